package litequeue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// State is where a job is in its life, as reported by Jobs, Job and Stats.
type State string

// The states of a job.
const (
	StateReady     State = "ready"     // pending and due: a worker may claim it now
	StateScheduled State = "scheduled" // pending, due later (a delay, a run-at time or a retry's backoff)
	StateRunning   State = "running"   // claimed under a lease
	StateCompleted State = "completed" // succeeded, kept for Options.CompletedRetention
	StateDead      State = "dead"      // gave up: a dead letter
	// StateCancelled (control.go): cancelled by Cancel, kept until PurgeCancelled.
)

// States returns every State in life order, in a new slice each call.
func States() []State {
	return []State{StateReady, StateScheduled, StateRunning, StateCompleted, StateDead, StateCancelled}
}

// ParseState returns the State named s, or an error listing the valid names.
func ParseState(s string) (State, error) {
	for _, st := range States() {
		if string(st) == s {
			return st, nil
		}
	}
	all := States()
	names := make([]string, len(all))
	for i, st := range all {
		names[i] = string(st)
	}
	return "", fmt.Errorf("litequeue: unknown state %q; use one of %s", s, strings.Join(names, ", "))
}

// JobInfo is a read-only view of a stored job.
type JobInfo struct {
	ID       int64           `json:"id"`
	Queue    string          `json:"queue"`
	Kind     string          `json:"kind"`
	State    State           `json:"state"`
	Attempt  int             `json:"attempt"` // attempts made so far (the running one included)
	Priority int             `json:"priority"`
	Key      string          `json:"key,omitempty"`
	Payload  json.RawMessage `json:"payload"`
	// CreatedAt is when the job was enqueued; RunAt when it was first due.
	CreatedAt time.Time `json:"created_at"`
	RunAt     time.Time `json:"run_at"`
	// VisibleAt is when a pending job is due, or when a running job's lease
	// expires.
	VisibleAt time.Time `json:"visible_at"`
	// AttemptedAt is when the last attempt was claimed; zero if never.
	AttemptedAt time.Time `json:"attempted_at,omitzero"`
	// FinishedAt is when a completed job succeeded or a dead one gave up.
	FinishedAt time.Time `json:"finished_at,omitzero"`
	LastError  string    `json:"last_error,omitempty"`
	DeadReason string    `json:"dead_reason,omitempty"`
	// Attempts is the history of failed attempts, oldest first; filled by
	// Job and DeadLetter only.
	Attempts []AttemptRecord `json:"attempts,omitempty"`
	// Progress is the last progress a handler reported (Delivery.SetProgress),
	// nil if none; Output the output it set (Delivery.SetOutput), nil if
	// none. Filled by Job only.
	Progress *Progress       `json:"progress,omitempty"`
	Output   json.RawMessage `json:"output,omitempty"`
}

// AttemptRecord is one failed attempt in a job's history. In JSON, Delay is
// a Go duration string ("30s", "1m30s"), as every duration in the package's
// JSON (see RetryPolicy).
type AttemptRecord struct {
	Attempt    int           `json:"attempt"`
	StartedAt  time.Time     `json:"started_at"`
	FinishedAt time.Time     `json:"finished_at"`
	Error      string        `json:"error"`
	Decision   Decision      `json:"decision"` // a Decision* value
	Delay      time.Duration `json:"delay"`    // the chosen wait when Decision is retry
}

// Order sorts a job listing.
type Order string

const (
	OrderNewest  Order = "newest"   // highest id first (the default)
	OrderNextDue Order = "next-due" // earliest visible_at first, then priority
)

// JobFilter selects jobs for Jobs and DeadLetters. Zero fields select all:
// the zero JobFilter lists every job, however many there are.
type JobFilter struct {
	Queue  string
	Kind   string
	States []State // any of these; empty means every state
	Order  Order   // default OrderNewest
	Limit  int     // at most this many; 0 or negative means no limit (all)
	Offset int     // skip this many, for paging
}

// Jobs lists the jobs f selects, in f.Order. It reads a consistent snapshot
// and works on a read-only queue. A Queue or Kind that no name can be (it
// holds NUL or invalid UTF-8) selects nothing, on every backend.
func (q *Queue) Jobs(ctx context.Context, f JobFilter) ([]JobInfo, error) {
	now := unixNanos(q.clock)
	sf := store.JobFilter{Queue: f.Queue, Kind: f.Kind, Limit: f.Limit, Offset: f.Offset, Now: now}
	for _, st := range f.States {
		if _, err := ParseState(string(st)); err != nil {
			return nil, err
		}
		sf.States = append(sf.States, listState(st))
	}
	switch f.Order {
	case OrderNextDue:
		sf.Order = store.NextDue
	case OrderNewest, "":
		sf.Order = store.NewestFirst
	default:
		return nil, fmt.Errorf("litequeue: unknown order %q; use %q or %q", f.Order, OrderNewest, OrderNextDue)
	}
	if !storableText(f.Queue) || !storableText(f.Kind) {
		return []JobInfo{}, nil // no stored name holds NUL or invalid UTF-8
	}
	rows, err := q.store.Jobs(ctx, sf)
	if err != nil {
		return nil, wrapf("litequeue: list jobs: %w", err)
	}
	out := make([]JobInfo, 0, len(rows))
	for _, j := range rows {
		out = append(out, jobInfo(j, now))
	}
	return out, nil
}

// Job returns one job with its attempt history, or an error wrapping
// ErrNotFound.
func (q *Queue) Job(ctx context.Context, id int64) (JobInfo, error) {
	now := unixNanos(q.clock)
	j, as, err := q.store.Job(ctx, id)
	if err != nil {
		return JobInfo{}, wrapf("litequeue: %w", err)
	}
	info := jobInfo(j, now)
	info.Attempts = attemptRecords(as)
	if err := q.progressOf(ctx, &info); err != nil && !errors.Is(err, ErrNotFound) {
		return JobInfo{}, wrapf("litequeue: %w", err)
	}
	return info, nil
}

// PurgeCompleted deletes retained completed jobs that finished more than
// olderThan ago (0: all of them) and returns how many.
func (q *Queue) PurgeCompleted(ctx context.Context, olderThan time.Duration) (int, error) {
	if err := q.writable(); err != nil {
		return 0, err
	}
	return q.purgeCompletedBefore(ctx, q.clock.Now().Add(-olderThan).UnixNano()+boolInt(olderThan == 0))
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func (q *Queue) purgeCompletedBefore(ctx context.Context, cutoff int64) (int, error) {
	return q.store.PurgeCompleted(ctx, cutoff)
}

// QueueStats counts one queue's jobs by state. In JSON, OldestReady is a Go
// duration string ("1m30s"; "0s" when none is ready), as every duration in
// the package's JSON.
type QueueStats struct {
	Queue     string `json:"queue"`
	Ready     int    `json:"ready"`
	Scheduled int    `json:"scheduled"`
	Running   int    `json:"running"`
	Completed int    `json:"completed"`
	Dead      int    `json:"dead"`
	Cancelled int    `json:"cancelled"`
	// Paused is true while the queue is paused (see Queue.Pause), since
	// PausedAt. A paused queue is listed even when it has no jobs.
	Paused   bool      `json:"paused"`
	PausedAt time.Time `json:"paused_at,omitzero"`
	// OldestReady is how long the longest-waiting ready job has been due;
	// 0 when none is ready.
	OldestReady time.Duration `json:"oldest_ready"`
	// NextDue is when the next scheduled job becomes ready; zero if none.
	NextDue time.Time `json:"next_due,omitzero"`
}

// Stats returns the counts of every queue in the file (and of every paused
// queue, jobs or not, with Paused set), sorted by queue name,
// at the queue's Clock's now. It scans the table; call it for dashboards and
// inspection, not per job.
func (q *Queue) Stats(ctx context.Context) ([]QueueStats, error) {
	now := unixNanos(q.clock)
	rows, err := q.store.Stats(ctx, now)
	if err != nil {
		return nil, wrapf("litequeue: stats: %w", err)
	}
	out := make([]QueueStats, 0, len(rows))
	for _, r := range rows {
		s := QueueStats{Queue: r.Queue, Ready: r.Ready, Scheduled: r.Scheduled, Running: r.Running,
			Completed: r.Completed, Dead: r.Dead, Cancelled: r.Cancelled}
		if r.OldestReadySince != 0 {
			// Saturated, not wrapped, for a time more than 292 years ago.
			s.OldestReady = time.Unix(0, now).Sub(time.Unix(0, r.OldestReadySince))
		}
		if r.NextDue != 0 {
			s.NextDue = time.Unix(0, r.NextDue)
		}
		out = append(out, s)
	}
	return q.addPaused(ctx, out)
}

// errPrefix begins the text of every error of the package.
const errPrefix = "litequeue: "

// wrapf is fmt.Errorf for errors that wrap the package's own errors, whose
// texts begin with errPrefix too: the prefix is said once, at the start
// ("litequeue: requeue job 9: job not found", not "litequeue: requeue job 9:
// litequeue: job not found"). errors.Is and errors.As see what fmt.Errorf's
// %w verbs wrap.
func wrapf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, errPrefix); ok {
		for strings.HasPrefix(rest, errPrefix) {
			rest = rest[len(errPrefix):]
		}
		msg = errPrefix + strings.ReplaceAll(rest, ": "+errPrefix, ": ")
	}
	return &prefixedError{msg: msg, err: err}
}

// prefixedError is an error of wrapf: its text with the prefix said once.
type prefixedError struct {
	msg string
	err error // what fmt.Errorf made
}

func (e *prefixedError) Error() string { return e.msg }

// Unwrap returns what the format's %w verbs wrapped.
func (e *prefixedError) Unwrap() []error {
	switch u := e.err.(type) {
	case interface{ Unwrap() error }:
		return []error{u.Unwrap()}
	case interface{ Unwrap() []error }:
		return u.Unwrap()
	}
	return nil
}

// MarshalJSON writes Delay as a Go duration string.
func (a AttemptRecord) MarshalJSON() ([]byte, error) {
	type plain AttemptRecord
	return json.Marshal(struct {
		plain
		Delay string `json:"delay"`
	}{plain(a), a.Delay.String()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (a *AttemptRecord) UnmarshalJSON(data []byte) error {
	type plain AttemptRecord
	var v struct {
		plain
		Delay string `json:"delay"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	d, err := parseJSONDuration("delay", v.Delay)
	*a = AttemptRecord(v.plain)
	a.Delay = d
	return err
}

// MarshalJSON writes OldestReady as a Go duration string.
func (s QueueStats) MarshalJSON() ([]byte, error) {
	type plain QueueStats
	return json.Marshal(struct {
		plain
		OldestReady string `json:"oldest_ready"`
	}{plain(s), s.OldestReady.String()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *QueueStats) UnmarshalJSON(data []byte) error {
	type plain QueueStats
	var v struct {
		plain
		OldestReady string `json:"oldest_ready"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	d, err := parseJSONDuration("oldest_ready", v.OldestReady)
	*s = QueueStats(v.plain)
	s.OldestReady = d
	return err
}

// parseJSONDuration parses a duration string of the package's JSON; empty
// (a missing key) is 0.
func parseJSONDuration(key, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("litequeue: JSON key %q: %q is not a duration like \"1m30s\"", key, s)
	}
	return d, nil
}
