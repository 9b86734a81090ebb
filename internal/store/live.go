package store

import (
	"errors"
	"fmt"
)

// Progress, output and unique jobs: the storage side of a handler's reports
// and of uniqueness beyond an idempotency key.

// Report is what a running attempt reports about itself. It is written only
// while the row is running under Lease (else ErrLeaseLost and nothing
// changes).
type Report struct {
	Lease
	// HasProgress says Fraction, Message and At replace the row's progress.
	HasProgress bool
	Fraction    float64 // in [0, 1]
	Message     string
	At          int64 // when the progress was reported
	// Output, when non-nil, replaces the row's output (JSON).
	Output []byte
}

// JobProgress is a row's progress and output as Progress reads them.
type JobProgress struct {
	State       State
	VisibleAt   int64 // tells a ready pending row from a scheduled one
	HasProgress bool  // false: the row has no progress yet (Fraction, Message, At are zero)
	Fraction    float64
	Message     string
	At          int64
	Output      []byte // nil if none
}

// Unique makes a NewJob unique: no other row whose Key equals Key and whose
// state is in States may exist when it is inserted.
type Unique struct {
	// Key is the job's uniqueness hash (kind, chosen payload, period bucket).
	Key string
	// States is the bitmask of stored states (bit n for State n) in which
	// a row holding Key blocks another.
	States uint8
	// Replace, when the blocking row is Pending, deletes it (with its
	// history) and inserts the new job in its place, in one transaction.
	// A blocking row in another state is reported as a *UniqueError.
	Replace bool
	// Replaced is set by the store, on the caller's NewJob, to the id of the
	// row a Replace deleted; 0 if none.
	Replaced int64
}

// ErrUnique is what a *UniqueError is (errors.Is).
var ErrUnique = errors.New("litequeue: a job with the same uniqueness already exists")

// UniqueError reports a unique job that was not inserted because the row ID,
// in State, holds its uniqueness key. It is also ErrDuplicate.
type UniqueError struct {
	ID    int64
	State State
	Kind  string
}

func (e *UniqueError) Error() string {
	return fmt.Sprintf("litequeue: job %d (%s, state %s) has the same uniqueness; nothing was enqueued", e.ID, e.Kind, e.State)
}

// Is reports whether target is ErrUnique or ErrDuplicate.
func (e *UniqueError) Is(target error) bool { return target == ErrUnique || target == ErrDuplicate }

func (s State) String() string {
	switch s {
	case Pending:
		return "pending"
	case Running:
		return "running"
	case Completed:
		return "completed"
	case Dead:
		return "dead"
	case Cancelled:
		return "cancelled"
	}
	return fmt.Sprintf("state(%d)", int8(s))
}
