package litequeue

import (
	"context"
	"time"
)

// AttemptInfo describes the attempt a Middleware wraps.
type AttemptInfo struct {
	ID          int64  // the job's id
	Queue, Kind string // where the job lives and what runs it
	Attempt     int    // this attempt's number: 1 on the first
	MaxAttempts int    // the policy's total attempts in force for the job
	Priority    int
	Key         string // the idempotency key, empty if none
	EnqueuedAt  time.Time
	// Timeout is the attempt's timeout in force (the job type's Timeout,
	// else the queue's); 0 means none.
	Timeout time.Duration
	// Trace is the W3C trace context of the enqueue (EnqueueOptions.Trace);
	// zero if none. Tags and Metadata are the job's (EnqueueOptions); nil
	// if none. Read them, do not change them: they are shared.
	Trace    TraceContext
	Tags     []string
	Metadata map[string]string
}

// HandlerFunc runs one attempt of a job: the registered handler, as the
// innermost HandlerFunc of the middleware chain.
type HandlerFunc func(ctx context.Context, a AttemptInfo) error

// Middleware wraps every handler of a queue, for tracing, metrics or
// logging: it returns a HandlerFunc that does its work around next (and
// usually calls it once). It sees the attempt's context — with the attempt's
// timeout already applied — and may add values to it, and it sees the
// error the handler returned and may change it (RetryAfter, Permanent). A
// panic in a middleware counts as a panic of the handler.
type Middleware func(next HandlerFunc) HandlerFunc

// timeouter is implemented by job types with their own attempt timeout.
type timeouter interface{ Timeout() time.Duration }

// ownTimeout returns the timeout job's type asks for (see Job), and false
// if it has no Timeout method.
func ownTimeout(job any) (time.Duration, bool) {
	if t, ok := job.(timeouter); ok {
		return t.Timeout(), true
	}
	return 0, false
}
