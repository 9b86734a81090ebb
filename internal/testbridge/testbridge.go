// Package testbridge lets package litequeuetest reach the few unexported
// parts of a litequeue.Queue that a test kit needs, without exporting them
// from litequeue: the root package fills these variables at init, and
// litequeuetest calls them. Nothing else may use it.
package testbridge

import (
	"context"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// Pair is a queue and a kind that a queue has a handler for.
type Pair struct{ Queue, Kind string }

// Load is what a queue's handled jobs look like at its Clock's now.
type Load struct {
	Busy      int       // ready (due now) or running jobs of handled pairs
	Next      time.Time // the earliest due time of a scheduled handled job
	HasNext   bool      // whether Next is set
	Unhandled int       // live jobs of no handled pair
	Unwritten int       // finished attempts whose outcomes the queue keeps because their writes failed
}

// Spec is the delivery Run hands a handler.
type Spec struct {
	ID         int64
	Queue      string // "" for the job type's own
	Attempt    int
	Priority   int
	Key        string
	EnqueuedAt time.Time
	LastError  string
}

// Outcome is one attempt whose handler has returned, as the fault hooks
// see it.
type Outcome struct {
	ID          int64
	Queue, Kind string
	// Attempt is the job row's attempt count: the attempt's number (for a
	// claim that only buries a job whose last attempt was lost, one more).
	Attempt     int
	MaxAttempts int   // the attempts of the policy in force
	Err         error // the handler's error; nil for a success
	// Started reports whether EventStarted was emitted for the attempt
	// (not for a claim that only buries the job, nor for a payload that
	// did not decode).
	Started bool
}

// Faults are the fault-injection hooks of a queue opened with Open. Every
// field may be nil.
type Faults struct {
	// Wrap wraps the queue's store: every store call of the queue goes
	// through the store it returns.
	Wrap func(store.Backend) store.Backend
	// Drop is called when a handler has returned, before the queue records
	// its outcome. When it returns true the outcome is dropped, as if the
	// process died at that moment: nothing is written (no final progress
	// either), no event is emitted, the job's slot is freed and its lease is
	// no longer extended, so its row stays running until the lease ends.
	Drop func(Outcome) bool
	// Lost is called for every attempt whose outcome the queue did not
	// write: dropped by Drop, or its write (success, retry, dead letter,
	// snooze) failed. The job's row stays running until its lease ends. It
	// may be called on the store's writer goroutine: it must not block or
	// use the queue.
	Lost func(Outcome)
}

var (
	// StoreOf returns the storage q (a *litequeue.Queue) runs on, for the
	// conformance suite's tests of store rules that the public API cannot
	// time (a firing planned before a concurrent change).
	StoreOf func(q any) store.Backend
	// Open is litequeue.Open (opts is a *litequeue.Options) with the fault
	// hooks f installed before the queue is used.
	Open func(name string, opts any, f Faults) (q any, err error)
	// Handled returns the pairs q (a *litequeue.Queue) has handlers for.
	Handled func(q any) []Pair
	// LoadOf reads q's Load.
	LoadOf func(ctx context.Context, q any) (Load, error)
	// Capture runs register (which calls litequeue.Register on the queue it
	// is given) on a bare queue and returns the handler it registered.
	Capture func(register func(q any)) (handler any, kind, queue string)
	// Run runs handler (from Capture) once on payload, with a delivery made
	// from spec, as the queue's worker would: panics become
	// *litequeue.PanicError and an undecodable payload a Permanent error.
	// cfg, when not nil, is the *litequeue.Queue whose configuration (retry
	// policy, job timeout, Clock) applies.
	Run func(ctx context.Context, handler any, cfg any, payload []byte, spec Spec) error
	// RunStored is Run through q (a *litequeue.Queue): the job is stored in
	// q as claimed under a lease, the handler runs, and the outcome is
	// recorded as the worker records it. It returns the job's id and the
	// handler's error.
	RunStored func(ctx context.Context, handler any, q any, payload []byte, spec Spec) (int64, error)
)
