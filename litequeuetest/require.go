package litequeuetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/litequeue/litequeue"
)

// Check narrows the jobs RequireEnqueued and RequireNotEnqueued look at.
type Check func(*checks)

type checks struct {
	queue    *string
	priority *int
	due      *time.Time
	key      *string
	states   []litequeue.State
}

// InQueue checks the job's queue (default: any queue).
func InQueue(name string) Check { return func(c *checks) { c.queue = &name } }

// WithPriority checks the job's priority.
func WithPriority(p int) Check { return func(c *checks) { c.priority = &p } }

// DueAt checks when the job is due (JobInfo.VisibleAt), to the nanosecond.
// For a job enqueued with a Delay, that is the clock's now at the enqueue
// plus the delay.
func DueAt(t time.Time) Check { return func(c *checks) { c.due = &t } }

// WithKey checks the job's idempotency key.
func WithKey(key string) Check { return func(c *checks) { c.key = &key } }

// InState checks the job's state; default: live (ready, scheduled or
// running).
func InState(states ...litequeue.State) Check { return func(c *checks) { c.states = states } }

// Enqueued is a job RequireEnqueued found: the stored job and its payload
// decoded into J.
type Enqueued[J litequeue.Job] struct {
	Job  J
	Info litequeue.JobInfo
}

// RequireEnqueued fails the test unless q holds a job of J's kind that
// passes every check (by default a live one: ready, scheduled or running),
// and returns the oldest such job. The failure lists the jobs of J's kind
// that q holds and why each did not match.
func RequireEnqueued[J litequeue.Job](t testing.TB, q *litequeue.Queue, checks ...Check) Enqueued[J] {
	t.Helper()
	match, others := find[J](t, q, checks)
	if len(match) == 0 {
		var zero J
		t.Fatalf("litequeuetest.RequireEnqueued: no job of kind %q%s; %s", zero.Kind(), describeChecks(checks), others)
	}
	j := match[len(match)-1] // Jobs lists newest first
	var job J
	if err := json.Unmarshal(j.Payload, &job); err != nil {
		t.Fatalf("litequeuetest.RequireEnqueued: job %d of kind %q does not decode into %T: %v", j.ID, j.Kind, job, err)
	}
	return Enqueued[J]{Job: job, Info: j}
}

// RequireNotEnqueued fails the test if q holds a job of J's kind that
// passes every check (by default a live one), naming the jobs it found.
func RequireNotEnqueued[J litequeue.Job](t testing.TB, q *litequeue.Queue, checks ...Check) {
	t.Helper()
	match, _ := find[J](t, q, checks)
	if len(match) > 0 {
		var zero J
		ids := make([]string, len(match))
		for i, j := range match {
			ids[i] = fmt.Sprintf("%d (%s, queue %q, due %s)", j.ID, j.State, j.Queue, j.VisibleAt.UTC().Format(time.RFC3339Nano))
		}
		t.Fatalf("litequeuetest.RequireNotEnqueued: %d jobs of kind %q%s: %s", len(match), zero.Kind(), describeChecks(checks), strings.Join(ids, ", "))
	}
}

// find lists the jobs of J's kind that pass checks, and describes the rest.
func find[J litequeue.Job](t testing.TB, q *litequeue.Queue, cs []Check) ([]litequeue.JobInfo, string) {
	t.Helper()
	var zero J
	var c checks
	for _, f := range cs {
		f(&c)
	}
	states := c.states
	if len(states) == 0 {
		states = []litequeue.State{litequeue.StateReady, litequeue.StateScheduled, litequeue.StateRunning}
	}
	jobs, err := q.Jobs(context.Background(), litequeue.JobFilter{Kind: zero.Kind(), States: states})
	if err != nil {
		t.Fatalf("litequeuetest: listing jobs of kind %q: %v", zero.Kind(), err)
	}
	var match []litequeue.JobInfo
	var why []string
	for _, j := range jobs {
		if reason := c.mismatch(j); reason != "" {
			why = append(why, fmt.Sprintf("job %d: %s", j.ID, reason))
			continue
		}
		match = append(match, j)
	}
	if len(jobs) == 0 {
		return match, fmt.Sprintf("there are no jobs of that kind in states %v", states)
	}
	return match, "the jobs of that kind differ: " + strings.Join(why, "; ")
}

func (c *checks) mismatch(j litequeue.JobInfo) string {
	var r []string
	if c.queue != nil && j.Queue != *c.queue {
		r = append(r, fmt.Sprintf("queue %q", j.Queue))
	}
	if c.priority != nil && j.Priority != *c.priority {
		r = append(r, fmt.Sprintf("priority %d", j.Priority))
	}
	if c.due != nil && !j.VisibleAt.Equal(*c.due) {
		r = append(r, "due "+j.VisibleAt.UTC().Format(time.RFC3339Nano))
	}
	if c.key != nil && j.Key != *c.key {
		r = append(r, fmt.Sprintf("key %q", j.Key))
	}
	return strings.Join(r, ", ")
}

func describeChecks(cs []Check) string {
	var c checks
	for _, f := range cs {
		f(&c)
	}
	var r []string
	if c.queue != nil {
		r = append(r, fmt.Sprintf("queue %q", *c.queue))
	}
	if c.priority != nil {
		r = append(r, fmt.Sprintf("priority %d", *c.priority))
	}
	if c.due != nil {
		r = append(r, "due "+c.due.UTC().Format(time.RFC3339Nano))
	}
	if c.key != nil {
		r = append(r, fmt.Sprintf("key %q", *c.key))
	}
	if len(c.states) > 0 {
		r = append(r, fmt.Sprintf("state %v", c.states))
	}
	if len(r) == 0 {
		return ""
	}
	return " with " + strings.Join(r, ", ")
}
