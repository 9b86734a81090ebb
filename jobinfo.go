package litequeue

import (
	"encoding/json"
	"fmt"
	"time"
)

// The read-only views of stored jobs that reads and events return.

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
	// Tags and Metadata are what the enqueue attached (EnqueueOptions);
	// nil if none.
	Tags     []string          `json:"tags,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// Trace is the W3C trace context of the enqueue; zero if none.
	Trace TraceContext `json:"trace,omitzero"`
	// Occurrence is, for a job a schedule enqueued, the scheduled time of
	// the occurrence it runs for; zero otherwise.
	Occurrence time.Time `json:"occurrence,omitzero"`
	// Process is the id of the process (see Queue.Processes) whose claim
	// took the job last: for a running job, the process that holds it. 0
	// when never claimed. Filled by Job only.
	Process int64 `json:"process,omitempty"`
	// Group is the job's group for the per-group limits (EnqueueOptions.Group);
	// "" for none. Filled by Job only.
	Group string `json:"group,omitempty"`
	// Wait says why a ready, scheduled or waiting job is not claimable
	// now (limits_wait.go); nil for a job that is claimable, running or
	// finished. Filled by Job only.
	Wait *WaitReason `json:"wait,omitempty"`
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
	// Process, Host and PID name the process that ran the attempt (see
	// Queue.Processes); zero for an attempt recorded without one (a lost
	// attempt, a job moved from an older file).
	Process int64  `json:"process,omitempty"`
	Host    string `json:"host,omitempty"`
	PID     int    `json:"pid,omitempty"`
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

// Progress is a job's last reported progress.
type Progress struct {
	// Fraction is how much is done, in [0, 1]; 0 until a fraction is
	// reported.
	Fraction float64 `json:"fraction"`
	// Message is the last message reported, empty if none.
	Message string `json:"message,omitempty"`
	// UpdatedAt is when it was reported (the queue's Clock).
	UpdatedAt time.Time `json:"updated_at"`
	// State is the job's state when this value was read; set by
	// WatchProgress only.
	State State `json:"state,omitempty"`
}
