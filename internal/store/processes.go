package store

import "context"

// Processes: each started queue registers itself in the database and
// writes a heartbeat, so that operators see which processes work the
// queues, which are gone, and which process ran each attempt.

// Process is one registered process (a started queue).
type Process struct {
	ID          int64
	Host        string
	PID         int
	StartedAt   int64  // Unix nanoseconds
	HeartbeatAt int64  // Unix nanoseconds, the last heartbeat
	Interval    int64  // nanoseconds between heartbeats
	Queues      string // JSON object: queue name -> kinds
	Version     string
	Running     int    // jobs it ran at the last heartbeat
	Held        string // JSON array of the ids of jobs it ran then (at most HeldMax)
}

// HeldMax is the most job ids a heartbeat records.
const HeldMax = 100

// Processes is the registry of processes. Beat and Unregister are writes
// (ErrReadOnly on a read-only store).
type Processes interface {
	// Beat writes p's row (inserting it or replacing its heartbeat,
	// running count and held jobs) and deletes the rows of other processes
	// whose heartbeat is before pruneBefore, in one transaction.
	Beat(ctx context.Context, p Process, pruneBefore int64) error
	// Unregister deletes process id's row; an unknown id is no error.
	Unregister(ctx context.Context, id int64) error
	// Processes returns every row, oldest start first (none on a database
	// whose schema predates the registry).
	Processes(ctx context.Context) ([]Process, error)
}
