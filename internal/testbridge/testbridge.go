// Package testbridge lets package litequeuetest reach the few unexported
// parts of a litequeue.Queue that a test kit needs, without exporting them
// from litequeue: the root package fills these variables at init, and
// litequeuetest calls them. Nothing else may use it.
package testbridge

import (
	"context"
	"time"
)

// Pair is a queue and a kind that a queue has a handler for.
type Pair struct{ Queue, Kind string }

// Load is what a queue's handled jobs look like at its Clock's now.
type Load struct {
	Busy      int       // ready (due now) or running jobs of handled pairs
	Next      time.Time // the earliest due time of a scheduled handled job
	HasNext   bool      // whether Next is set
	Unhandled int       // live jobs of no handled pair
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

var (
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
