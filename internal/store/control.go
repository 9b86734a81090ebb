package store

import (
	"context"
	"errors"
)

// Live control of jobs and queues: pausing a queue, cancelling jobs (running
// ones too) and snoozing a running job.

// Cancelled is the stored state of a cancelled job: kept, listed and
// purgeable like a dead letter, never run again. A job cancelled while
// running keeps its Lease in the row, so its worker can tell a cancel from
// a lost lease (see Control.WhichCancelled).
const Cancelled State = 4

// ListCancelled filters listings by the cancelled state.
const ListCancelled = ListDead + 1

// ErrSnoozeLimit is returned by Snooze when the row has snoozed its maximum
// number of times.
var ErrSnoozeLimit = errors.New("litequeue: the job has snoozed the most times its queue allows")

// CancelledJob is a job Cancel cancelled.
type CancelledJob struct {
	ID          int64
	Queue, Kind string
	// Running is true when the job was running: its worker has yet to stop
	// its handler. Lease is then the lease it ran under.
	Running bool
	Lease   int64
}

// Snooze reschedules a running job without using an attempt: the row
// becomes pending, due at Due, the attempt its claim counted is given back,
// its snooze count goes up by one and Record is appended to its history.
type Snooze struct {
	Lease
	Due    int64
	Max    int // the most snoozes the row may have made before this one
	Record Attempt
}

// Control is what live control needs from a store. Besides these methods,
// every store keeps two rules for paused queues:
//   - Claim and InsertClaim claim nothing of a paused queue; the check is
//     made inside the claim's transaction, so a claim that commits after a
//     Pause committed takes nothing (InsertClaim still inserts its job).
//   - NextDue reports nothing due (ok false) for a paused queue.
type Control interface {
	// Pause marks queue paused at at and reports whether it changed (false:
	// it was paused already, and keeps its first pause time). The queue
	// need not have jobs: the pause applies to the jobs that come.
	Pause(ctx context.Context, queue string, at int64) (bool, error)
	// Resume clears queue's pause and reports whether it was paused.
	Resume(ctx context.Context, queue string) (bool, error)
	// Paused returns every paused queue with the time it was paused.
	Paused(ctx context.Context) (map[string]int64, error)

	// Cancel cancels jobs by id at now, all or nothing: pending rows become
	// Cancelled (lease NULL), running rows become Cancelled keeping their
	// lease, both with FinishedAt now. An unknown id (ErrNotFound) or a row
	// that is completed, dead or already cancelled (ErrWrongState) cancels
	// nothing; the error names the id.
	Cancel(ctx context.Context, ids []int64, now int64) ([]CancelledJob, error)
	// WhichCancelled returns the indexes of the leases whose rows were
	// cancelled while running under that very lease.
	WhichCancelled(ctx context.Context, leases []Lease) ([]int, error)
	// PurgeCancelled deletes cancelled rows (with their history) that were
	// cancelled before before and returns how many.
	PurgeCancelled(ctx context.Context, before int64) (int, error)

	// Snooze applies s (see Snooze), conditional on its lease
	// (ErrLeaseLost: nothing changes). A row that has snoozed s.Max times
	// already is left alone and ErrSnoozeLimit returned.
	Snooze(ctx context.Context, s Snooze) error
}
