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
	// Cancelled counts the queue's cancelled jobs among the countLimit
	// most recently cancelled; CancelledCapped says the file holds at
	// least that many in all (an "at least" figure, as DeadCapped).
	Cancelled       int
	CancelledCapped bool
	Paused          bool
	PausedAt        time.Time
}

// queueRows returns every queue with jobs, from the capped, indexed counts
// of QueueSummaries and FinishedCounts (cancelled jobs), and every paused
// queue (jobs or not), sorted by name. No read scans the jobs table.
func (s *server) queueRows(ctx context.Context) ([]queueRow, error) {
	sums, err := s.q.QueueSummaries(ctx, countLimit)
	if err != nil {
		return nil, err
	}
	cancelled, ccapped, err := s.q.FinishedCounts(ctx, litequeue.StateCancelled, countLimit)
	if err != nil {
		return nil, err
	}
	paused, err := s.q.PausedQueues(ctx)
	if err != nil {
		return nil, err
	}
	rows := make([]queueRow, 0, len(sums)+len(paused))
	byName := map[string]int{}
	add := func(sum litequeue.QueueSummary) {
		byName[sum.Queue] = len(rows)
		rows = append(rows, queueRow{QueueSummary: sum, CancelledCapped: ccapped})
	}
	for _, sum := range sums {
		add(sum)
	}
	for name, n := range cancelled {
		if _, ok := byName[name]; !ok {
			add(litequeue.QueueSummary{Queue: name})
		}
		rows[byName[name]].Cancelled = n
	}
	for name, at := range paused {
		if _, ok := byName[name]; !ok {
			add(litequeue.QueueSummary{Queue: name})
		}
		r := &rows[byName[name]]
		r.Paused, r.PausedAt = true, at
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Queue < rows[j].Queue })
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
