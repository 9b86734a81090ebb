package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
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
	// Configured says the dashboard's Queue has the queue in its
	// Options.Queues (listed even without jobs).
	Configured bool
}

// queueRows returns every queue with jobs, from the capped, indexed counts
// of QueueSummaries and FinishedCounts (cancelled jobs), every queue
// configured in the dashboard's Queue (Options.Queues) and every paused
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
	for _, c := range s.q.QueueConfigs() {
		if _, ok := byName[c.Name]; !ok {
			add(litequeue.QueueSummary{Queue: c.Name})
		}
		rows[byName[c.Name]].Configured = true
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

// queueData is the page of one queue: its counts, pause and configuration.
type queueData struct {
	Row queueRow
	// Config is the queue's configuration in the dashboard's Queue:
	// Options.Queues' entry when Row.Configured, else NewQueueConfig's
	// defaults (as a process without an entry runs it).
	Config litequeue.QueueConfig
	Policy string     // the retry policy in words
	Plan   url.Values // the query of the retry plan page for the policy
	Flow   flowData   // limits and groups (limits.go)
}

// queue shows one queue (the query's "name"): its counts, whether it is
// paused, and its configuration as the dashboard's Queue knows it. 404 Not
// Found for a queue with no jobs that is neither paused nor configured.
func (s *server) queue(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	if name == "" {
		s.fail(w, r, http.StatusBadRequest, errors.New("no queue named: open /queue?name=NAME, or pick one on the queues page"))
		return
	}
	rows, err := s.queueRows(r.Context())
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	i := sort.Search(len(rows), func(i int) bool { return rows[i].Queue >= name })
	if i == len(rows) || rows[i].Queue != name {
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("no queue %q: it has no jobs, is not paused, and is not configured in this process's Options.Queues", name))
		return
	}
	d := queueData{Row: rows[i], Config: litequeue.NewQueueConfig(name)}
	for _, c := range s.q.QueueConfigs() {
		if c.Name == name {
			d.Config = c
		}
	}
	if d.Config.Concurrency <= 0 {
		d.Config.Concurrency = litequeue.DefaultConcurrency
	}
	if d.Config.VisibilityTimeout <= 0 {
		d.Config.VisibilityTimeout = litequeue.DefaultVisibilityTimeout
	}
	if d.Flow, err = s.flowOf(r.Context(), name, r.URL.Query().Get("after")); err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	d.Policy = describePolicy(d.Config.Retry)
	if b, err := json.Marshal(d.Config.Retry); err == nil {
		d.Plan = url.Values{"policy": {string(b)}}
	}
	s.render(w, r, http.StatusOK, "queue", &page{Title: "Queue " + name, Nav: "queues", Data: d})
}

// describePolicy says what a retry policy does, in words.
func describePolicy(p litequeue.RetryPolicy) string {
	n := p.Attempts()
	if n == 1 {
		return "1 attempt: no retries (the first failure makes the job a dead letter)"
	}
	b := p.Backoff
	var wait string
	switch b.Kind {
	case litequeue.BackoffFixed:
		wait = "a fixed wait of " + fmtDur(max(b.Delay, 0)) + " between attempts"
	case litequeue.BackoffExponential:
		wait = fmt.Sprintf("exponential waits from %s, ×%g each time, at most %s", fmtDur(max(b.Base, 0)), b.Factor, fmtDur(max(b.Max, 0)))
		if b.Jitter {
			wait += ", with full jitter"
		}
	default:
		wait = "no wait between attempts"
	}
	return fmt.Sprintf("%d attempts, %s", n, wait)
}
