package store

import (
	"errors"
)

// Live control of jobs and queues: pausing a queue, cancelling jobs (running
// ones too) and snoozing a running job.

// Cancelled is the stored state of a cancelled job: kept, listed and
// purgeable like a dead letter, never run again. A job cancelled while
// running keeps its Lease in the row, so its worker can tell a cancel from
// a lost lease (see Runtime.WhichCancelled).
const Cancelled State = 4

// ListCancelled filters listings by the cancelled state.
const ListCancelled = ListDead + 1

// ErrSnoozeLimit is returned by Snooze when the row has snoozed its maximum
// number of times.
var ErrSnoozeLimit = errors.New("litequeue: the job has snoozed the most times its queue allows")

// CancelledJob is a job Cancel (or a BulkCancel) cancelled.
type CancelledJob struct {
	ID          int64
	Queue, Kind string
	// Running is true when the job was running: its worker has yet to stop
	// its handler. Lease is then the lease it ran under.
	Running bool
	Lease   int64
	// The row as it was cancelled, for a CancelHook.
	Payload   []byte
	Attempt   int
	Priority  int
	Key       string
	CreatedAt int64
	// FollowUp is the job the CancelHook asked for (nil for none) and
	// FollowUpID its id once the cancel committed: 0 when it was not
	// inserted because a live job holds its key or uniqueness.
	FollowUp   *NewJob
	FollowUpID int64
}

// CancelHook, when passed to Cancel or Bulk (BulkCancel), is asked for the
// follow-up of each job the transaction cancels, inside it: the job it
// returns (nil for none) is inserted in the same transaction, unless a
// live job holds its key or uniqueness. It may be asked again for the same
// job when the transaction is run again; only the committed answer counts.
type CancelHook func(CancelledJob) *NewJob

// Snooze reschedules a running job without using an attempt: the row
// becomes pending, due at Due, the attempt its claim counted is given back,
// its snooze count goes up by one and Record is appended to its history.
type Snooze struct {
	Lease
	Due    int64
	Max    int // the most snoozes the row may have made before this one
	Record Attempt
}
