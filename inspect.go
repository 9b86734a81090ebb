package litequeue

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
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
)

// States lists every State in life order.
var States = []State{StateReady, StateScheduled, StateRunning, StateCompleted, StateDead}

// ParseState returns the State named s, or an error listing the valid names.
func ParseState(s string) (State, error) {
	for _, st := range States {
		if string(st) == s {
			return st, nil
		}
	}
	names := make([]string, len(States))
	for i, st := range States {
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
}

// AttemptRecord is one failed attempt in a job's history. In JSON, Delay is
// a Go duration string ("30s", "1m30s"), as every duration in the package's
// JSON (see RetryPolicy).
type AttemptRecord struct {
	Attempt    int           `json:"attempt"`
	StartedAt  time.Time     `json:"started_at"`
	FinishedAt time.Time     `json:"finished_at"`
	Error      string        `json:"error"`
	Decision   string        `json:"decision"` // a Decision* value
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

const jobColumns = `id, queue, kind, state, attempt, priority, idem_key, payload, created_at, run_at,
	visible_at, attempted_at, finished_at, last_error, dead_reason`

// stateSQL is the SQL condition of a State at time ?now (named :now).
func stateSQL(s State) string {
	switch s {
	case StateReady:
		return "(state = 0 AND visible_at <= :now)"
	case StateScheduled:
		return "(state = 0 AND visible_at > :now)"
	case StateRunning:
		return "state = 1"
	case StateCompleted:
		return "state = 2"
	default:
		return "state = 3"
	}
}

func scanJob(rows interface{ Scan(...any) error }, now int64) (JobInfo, error) {
	var j JobInfo
	var state int
	var key, lastErr, reason sql.NullString
	var created, runAt, visible int64
	var attempted, finished sql.NullInt64
	if err := rows.Scan(&j.ID, &j.Queue, &j.Kind, &state, &j.Attempt, &j.Priority, &key, (*[]byte)(&j.Payload),
		&created, &runAt, &visible, &attempted, &finished, &lastErr, &reason); err != nil {
		return JobInfo{}, err
	}
	switch state {
	case 0:
		j.State = StateReady
		if visible > now {
			j.State = StateScheduled
		}
	case 1:
		j.State = StateRunning
	case 2:
		j.State = StateCompleted
	default:
		j.State = StateDead
	}
	j.Key, j.LastError, j.DeadReason = key.String, lastErr.String, reason.String
	j.CreatedAt, j.RunAt, j.VisibleAt = time.Unix(0, created), time.Unix(0, runAt), time.Unix(0, visible)
	if attempted.Valid {
		j.AttemptedAt = time.Unix(0, attempted.Int64)
	}
	if finished.Valid {
		j.FinishedAt = time.Unix(0, finished.Int64)
	}
	return j, nil
}

// Jobs lists the jobs f selects, in f.Order. It reads a consistent snapshot
// and works on a read-only queue.
func (q *Queue) Jobs(ctx context.Context, f JobFilter) ([]JobInfo, error) {
	now := unixNanos(q.clock)
	var where []string
	args := []any{sql.Named("now", now)}
	if f.Queue != "" {
		where = append(where, "queue = :queue")
		args = append(args, sql.Named("queue", f.Queue))
	}
	if f.Kind != "" {
		where = append(where, "kind = :kind")
		args = append(args, sql.Named("kind", f.Kind))
	}
	if len(f.States) > 0 {
		var ors []string
		for _, s := range f.States {
			if _, err := ParseState(string(s)); err != nil {
				return nil, err
			}
			ors = append(ors, stateSQL(s))
		}
		where = append(where, "("+strings.Join(ors, " OR ")+")")
	}
	query := "SELECT " + jobColumns + " FROM lq_jobs"
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	switch f.Order {
	case OrderNextDue:
		query += " ORDER BY visible_at, priority, id"
	case OrderNewest, "":
		query += " ORDER BY id DESC"
	default:
		return nil, fmt.Errorf("litequeue: unknown order %q; use %q or %q", f.Order, OrderNewest, OrderNextDue)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	query += " LIMIT :limit OFFSET :offset"
	args = append(args, sql.Named("limit", limit), sql.Named("offset", max(f.Offset, 0)))
	rows, err := q.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, wrapf("litequeue: list jobs: %w", err)
	}
	defer rows.Close()
	var out []JobInfo
	for rows.Next() {
		j, err := scanJob(rows, now)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// Job returns one job with its attempt history, or an error wrapping
// ErrNotFound.
func (q *Queue) Job(ctx context.Context, id int64) (JobInfo, error) {
	now := unixNanos(q.clock)
	tx, err := q.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return JobInfo{}, err
	}
	defer tx.Rollback()
	j, err := scanJob(tx.QueryRowContext(ctx, "SELECT "+jobColumns+" FROM lq_jobs WHERE id = ?", id), now)
	if errors.Is(err, sql.ErrNoRows) {
		return JobInfo{}, wrapf("litequeue: job %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return JobInfo{}, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT attempt, started_at, finished_at, error, decision, delay
		FROM lq_attempts WHERE job_id = ? ORDER BY id`, id)
	if err != nil {
		return JobInfo{}, err
	}
	defer rows.Close()
	for rows.Next() {
		var a AttemptRecord
		var started, finished, delay int64
		if err := rows.Scan(&a.Attempt, &started, &finished, &a.Error, &a.Decision, &delay); err != nil {
			return JobInfo{}, err
		}
		a.StartedAt, a.FinishedAt, a.Delay = time.Unix(0, started), time.Unix(0, finished), time.Duration(delay)
		j.Attempts = append(j.Attempts, a)
	}
	return j, rows.Err()
}

// Cancel deletes pending (ready or scheduled) jobs by id and returns how many
// it deleted. It is all or nothing: if any id is unknown (ErrNotFound), running
// (ErrJobRunning) or completed or dead (ErrWrongState), nothing is deleted
// and the error names the id.
func (q *Queue) Cancel(ctx context.Context, ids ...int64) (int, error) {
	if err := q.writable(); err != nil {
		return 0, err
	}
	n := 0
	err := q.w.do(ctx, func(ctx context.Context, tx execer) error {
		n = 0
		for _, id := range ids {
			var state int
			err := tx.QueryRowContext(ctx, `SELECT state FROM lq_jobs WHERE id = ?`, id).Scan(&state)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				return wrapf("litequeue: cancel job %d: %w", id, ErrNotFound)
			case err != nil:
				return err
			case state == 1:
				return wrapf("litequeue: cancel job %d: %w; wait for it to finish, or stop its worker first", id, ErrJobRunning)
			case state != 0:
				return wrapf("litequeue: cancel job %d: it is %s: %w", id, stateName(state), ErrWrongState)
			}
			res, err := tx.ExecContext(ctx, `DELETE FROM lq_jobs WHERE id = ? AND state = 0`, id)
			if err != nil {
				return err
			}
			c, _ := res.RowsAffected()
			n += int(c)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

func stateName(state int) State {
	switch state {
	case 1:
		return StateRunning
	case 2:
		return StateCompleted
	case 3:
		return StateDead
	}
	return StateReady
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
	var n int64
	err := q.w.do(ctx, func(ctx context.Context, tx execer) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM lq_jobs WHERE state = 2 AND finished_at < ?`, cutoff)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
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
	// OldestReady is how long the longest-waiting ready job has been due;
	// 0 when none is ready.
	OldestReady time.Duration `json:"oldest_ready"`
	// NextDue is when the next scheduled job becomes ready; zero if none.
	NextDue time.Time `json:"next_due,omitzero"`
}

// Stats returns the counts of every queue in the file, sorted by queue name,
// at the queue's Clock's now. It scans the table; call it for dashboards and
// inspection, not per job.
func (q *Queue) Stats(ctx context.Context) ([]QueueStats, error) {
	now := unixNanos(q.clock)
	rows, err := q.db.QueryContext(ctx, `SELECT queue,
		sum(state = 0 AND visible_at <= :now), sum(state = 0 AND visible_at > :now),
		sum(state = 1), sum(state = 2), sum(state = 3),
		min(CASE WHEN state = 0 AND visible_at <= :now THEN visible_at END),
		min(CASE WHEN state = 0 AND visible_at > :now THEN visible_at END)
		FROM lq_jobs GROUP BY queue ORDER BY queue`, sql.Named("now", now))
	if err != nil {
		return nil, wrapf("litequeue: stats: %w", err)
	}
	defer rows.Close()
	var out []QueueStats
	for rows.Next() {
		var s QueueStats
		var oldest, next sql.NullInt64
		if err := rows.Scan(&s.Queue, &s.Ready, &s.Scheduled, &s.Running, &s.Completed, &s.Dead, &oldest, &next); err != nil {
			return nil, err
		}
		if oldest.Valid {
			s.OldestReady = time.Duration(now - oldest.Int64)
		}
		if next.Valid {
			s.NextDue = time.Unix(0, next.Int64)
		}
		out = append(out, s)
	}
	return out, rows.Err()
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
