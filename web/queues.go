package web

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/litequeue/litequeue"
)

// queueRow is one queue of the overview and the queues page: its counts
// and whether it is paused.
type queueRow struct {
	litequeue.QueueSummary
	Paused   bool
	PausedAt time.Time
}

// queueRows returns every queue with jobs, from the capped, indexed counts
// of QueueSummaries, and every paused queue (jobs or not), sorted by name.
// Neither read scans the jobs table.
func (s *server) queueRows(ctx context.Context) ([]queueRow, error) {
	sums, err := s.q.QueueSummaries(ctx, countLimit)
	if err != nil {
		return nil, err
	}
	paused, err := s.q.PausedQueues(ctx)
	if err != nil {
		return nil, err
	}
	rows := make([]queueRow, 0, len(sums)+len(paused))
	for _, sum := range sums {
		at, ok := paused[sum.Queue]
		rows = append(rows, queueRow{QueueSummary: sum, Paused: ok, PausedAt: at})
		delete(paused, sum.Queue)
	}
	if len(paused) > 0 {
		for name, at := range paused {
			rows = append(rows, queueRow{QueueSummary: litequeue.QueueSummary{Queue: name}, Paused: true, PausedAt: at})
		}
		sort.Slice(rows, func(i, j int) bool { return rows[i].Queue < rows[j].Queue })
	}
	return rows, nil
}

func (s *server) queues(w http.ResponseWriter, r *http.Request) {
	rows, err := s.queueRows(r.Context())
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	s.render(w, r, http.StatusOK, "queues", &page{Title: "Queues", Nav: "queues", Data: rows})
}

// queueAction pauses or resumes the queue named by the form's "queue"
// field, then goes back to the queues page.
func (s *server) queueAction(w http.ResponseWriter, r *http.Request) {
	name := r.PostFormValue("queue")
	ctx := r.Context()
	var err error
	var code string
	switch a := r.PathValue("action"); a {
	case "pause":
		err, code = s.q.Pause(ctx, name), "queue-paused"
	case "resume":
		err, code = s.q.Resume(ctx, name), "queue-resumed"
	default:
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("no queue action %q; use pause or resume", a))
		return
	}
	s.finishAction(w, r, err, rootOf(r)+"/queues", flashValues(code, 0, 0, name), "queue", name)
}
