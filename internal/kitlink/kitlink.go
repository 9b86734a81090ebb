// Package kitlink is the typed link between package litequeue and its test
// kit (package litequeuetest, and this module's conformance suites): the few
// parts of a queue they reach besides the public API. The root package
// registers its Link once, at init, as database/sql drivers register
// themselves; the kit gets it back with Of. Q is *litequeue.Queue and O is
// *litequeue.Options: the compiler checks both sides against Link.
package kitlink

import (
	"context"
	"database/sql"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// Link is what the root package gives the test kit.
type Link[Q, O any] interface {
	// Open is litequeue.Open with the fault hooks f installed before the
	// queue is used.
	Open(name string, opts O, f Faults) (Q, error)
	// New is litequeue.New (the queue's tables in the application's db)
	// with the fault hooks f installed before the queue is used.
	New(db *sql.DB, opts O, f Faults) (Q, error)
	// Handled returns the pairs q has handlers for, sorted by kind.
	Handled(q Q) []Pair
	// Store returns the storage q runs on, for tests of store rules that
	// the public API cannot time (a firing planned before a concurrent
	// change).
	Store(q Q) store.Backend
	// Load reads q's Load.
	Load(ctx context.Context, q Q) (Load, error)
	// Capture runs register (which calls litequeue.Register on the queue it
	// is given) on a bare queue and returns the handler it registered.
	Capture(register func(Q)) Handler
	// Run runs h once on payload, with a delivery made from spec, as the
	// queue's worker would: panics become *litequeue.PanicError and an
	// undecodable payload a Permanent error. cfg, when not nil, is the queue
	// whose configuration (retry policy, job timeout, Clock) applies.
	Run(ctx context.Context, h Handler, cfg Q, payload []byte, spec Spec) error
	// RunStored is Run through q: the job is stored in q as claimed under
	// a lease, the handler runs, and the outcome is recorded as the worker
	// records it. It returns the job's id and the handler's error.
	RunStored(ctx context.Context, h Handler, q Q, payload []byte, spec Spec) (int64, error)
}

// Handler is a handler Capture returned.
type Handler interface {
	// Registered returns the kind and the queue the handler was registered
	// for.
	Registered() (kind, queue string)
}

var link any // the registered Link[Q, O]

// Register makes l the link Of returns. The root package calls it at init.
func Register[Q, O any](l Link[Q, O]) { link = l }

// Of returns the registered link. It panics if the root package registered
// none, or one of other types (a programmer error of this module).
func Of[Q, O any]() Link[Q, O] { return link.(Link[Q, O]) }

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

// Faults are the fault-injection hooks of a queue opened with Link.Open.
// Every field may be nil.
type Faults struct {
	// Wrap wraps the queue's store from outside: every store call of the
	// queue goes through the store it returns.
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
