package litequeue

import (
	"errors"
	"fmt"
	"time"
)

// Snoozing: a handler puts its job off without using an attempt.

// DefaultMaxSnoozes is QueueConfig.MaxSnoozes' default.
const DefaultMaxSnoozes = 100

// SnoozeError asks for the job to run again after Delay without using an
// attempt. Make one with Snooze.
type SnoozeError struct {
	Delay time.Duration
}

func (e *SnoozeError) Error() string { return fmt.Sprintf("snoozed for %s", e.Delay) }

// Snooze returns the error a handler returns to put its job off for d
// without using an attempt: the job becomes scheduled, due after d, and its
// next run has the same Attempt number. Use it when the job is not ready
// to run yet — a resource it waits for, polling an outside state — and
// RetryAfter (which counts an attempt) when the attempt failed.
//
// A job may snooze QueueConfig.MaxSnoozes times (DefaultMaxSnoozes by
// default); the snooze after that counts as a failed attempt with a
// *SnoozeLimitError, and the policy retries it or gives up as with any
// failure. d of 0 runs the job again as soon as a worker is free. A
// negative d is a bug in the handler: the attempt fails (counted, so the
// retry policy applies) with an error wrapping ErrNegativeSnooze.
func Snooze(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: Snooze(%s); use 0 to run again at once", ErrNegativeSnooze, d)
	}
	return &SnoozeError{Delay: d}
}

// ErrNegativeSnooze is the failure of a handler that returned Snooze with a
// negative duration.
var ErrNegativeSnooze = errors.New("litequeue: snooze duration is negative")

// SnoozeLimitError is the failure recorded when a job snoozes more often
// than QueueConfig.MaxSnoozes allows.
type SnoozeLimitError struct {
	Max   int           // the queue's MaxSnoozes
	Delay time.Duration // the refused snooze's delay
}

func (e *SnoozeLimitError) Error() string {
	return fmt.Sprintf("litequeue: the job snoozed %d times, the most QueueConfig.MaxSnoozes allows; this snooze (for %s) counts as a failed attempt", e.Max, e.Delay)
}
