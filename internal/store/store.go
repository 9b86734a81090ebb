// Package store is the storage seam of litequeue: every operation the queue
// needs from a database, in the queue's own words (insert, claim, extend,
// complete, retry, bury, release, list, requeue, purge), with no SQL in it
// or above it (what the SQL backends share is in internal/sqlkit). The SQLite store (package internal/sqlite) is the first
// implementation; the PostgreSQL store (package postgres) implements the same
// interfaces. A backend implements Backend (backend.go): Runtime, Admin,
// Dashboard and Schedules, split by who calls them. The store-level suite
// (internal/storetest) checks a backend method by method; the public-API
// suite (the root package's conformance_*_test.go) checks a queue on it.
//
// Rules every implementation keeps:
//   - Times are int64 nanoseconds since the Unix epoch and always come from
//     the caller (the queue's Clock), never from the database's clock.
//   - Every write on behalf of a delivery is conditional on its Lease: a row
//     whose lease is not the given one is left alone and the operation
//     reports ErrLeaseLost for it.
//   - A claim counts the attempt, sets a new lease and moves VisibleAt to the
//     lease's end in the same statement/transaction that selects the rows;
//     no two concurrent claims (any number of processes) return one row.
//   - Claims hand their jobs to the caller's handOff in commit order: no
//     claim's handOff runs before that of a claim that committed earlier.
//   - Errors are the sentinels of this package (wrapped with detail) or the
//     driver's own; each backend maps its driver's errors to ErrStorageFull,
//     ErrStorageIO and the like.
package store

import (
	"context"
	"errors"
	"fmt"
)

// State is a job row's stored state.
type State int8

// The stored states of a job. A pending row is ready when VisibleAt <= now,
// scheduled otherwise; a running row's VisibleAt is its lease's end.
const (
	Pending   State = 0
	Running   State = 1
	Completed State = 2
	Dead      State = 3
)

// NewJob is a validated, encoded job to insert.
type NewJob struct {
	Queue, Kind string
	Priority    int
	VisibleAt   int64 // when it is first due
	CreatedAt   int64
	Payload     []byte
	Key         string  // idempotency key; "" for none
	Unique      *Unique // uniqueness beyond the key (live.go); nil for none
	// Meta is the job's metadata as a JSON object (meta.go), "" for none;
	// Tags are the tags it holds, each once, for the tag index.
	Meta string
	Tags []string
	// Waits is the number of the job's parents (InsertFlow, workflow.go): a
	// job with any is stored Waiting.
	Waits int
	// Group is the job's group for the per-group limits (limits.go), "" for
	// none.
	Group string
}

// ClaimQuery says what a claim takes: up to N due rows of Queue whose kind is
// one of Kinds, most urgent first (priority, then VisibleAt, then id), at
// Now, under the new Lease which lasts Until.
type ClaimQuery struct {
	Queue     string
	Kinds     []string
	KindsJSON string // Kinds as a JSON array, computed once by the caller
	N         int
	Now       int64
	Until     int64
	Lease     int64
	// Limited routes the claim through the queue's stored limits (see
	// Flow); false takes the claim path of queues without limits.
	Limited bool
	Process int64 // the claiming process's id (Process), written on each claimed row
}

// Claimed is one claimed job.
type Claimed struct {
	ID        int64
	Kind      string
	Attempt   int // counted by this claim: 1 on the first
	Priority  int
	Payload   []byte
	Key       string
	CreatedAt int64
	DueAt     int64  // the VisibleAt the claim found: when this attempt became due
	LastError string // the previous attempt's error, or why its worker was lost
	New       bool   // the job that InsertClaim inserted in the same transaction
	Meta      string // the job's metadata JSON (meta.go), "" for none
}

// MarkNew sets New on the claimed job with id, the one InsertClaim
// inserted.
func MarkNew(cs []Claimed, id int64) {
	for i := range cs {
		cs[i].New = cs[i].ID == id
	}
}

// Lease names one claimed row: the job and the lease it holds.
type Lease struct {
	ID    int64
	Lease int64
}

// Attempt is one record of a job's attempt history.
type Attempt struct {
	Attempt    int
	StartedAt  int64
	FinishedAt int64
	Error      string
	Decision   string
	Delay      int64 // nanoseconds
	// The process that ran the attempt (0, "", 0 when unknown).
	Process int64
	Host    string
	PID     int
}

// Completion is a success to write. Notify, if set, is called once the
// write committed (nil), found the lease lost (ErrLeaseLost) or failed.
type Completion struct {
	Lease
	At   int64 // when the handler returned
	Keep bool  // keep the row as completed (retention) instead of deleting it
	// Flow is the job's MetaDoc.Flow (workflow.go): non-zero takes the
	// workflow's path, which resolves its children in the same transaction.
	Flow   int
	Notify func(err error)
}

// Retry reschedules a failed attempt: the row becomes pending, due at Due,
// with LastError, and Record is appended to its history.
type Retry struct {
	Lease
	Due       int64
	LastError string
	Record    Attempt
}

// Burial makes a row a dead letter at At with Reason; LastError, when
// non-nil, replaces the row's last error; Attempt, when non-zero, sets its
// attempt count (a burial of a job whose last attempt was lost); Record is
// appended to its history. FollowUp, when set, is inserted in the same
// transaction (not when a live job holds its key or uniqueness); then
// FollowUpID, when non-nil, receives its id once Bury returned nil (0 when
// it was not inserted).
type Burial struct {
	Lease
	At         int64
	Reason     string
	LastError  *string
	Attempt    int
	Record     Attempt
	FollowUp   *NewJob
	FollowUpID *int64
	// Flow is the job's MetaDoc.Flow (workflow.go): with FlowParent set, its
	// children are resolved in the same transaction.
	Flow int
}

// Job is a stored job row.
type Job struct {
	ID          int64
	Queue, Kind string
	State       State
	Attempt     int
	Priority    int
	Key         string
	Payload     []byte
	CreatedAt   int64
	RunAt       int64
	VisibleAt   int64
	AttemptedAt int64 // 0 if never
	FinishedAt  int64 // 0 if not finished
	LastError   string
	DeadReason  string
	Meta        string // the job's metadata JSON (meta.go), "" for none
	// Process is the id of the process whose claim took the row last (0:
	// never claimed, or unknown); set by Admin.Job only.
	Process int64
}

// ListState is a state as listings filter by it.
type ListState int8

// The states a listing filters by (Ready and Scheduled split Pending at now).
const (
	ListReady ListState = iota
	ListScheduled
	ListRunning
	ListCompleted
	ListDead
)

// Order sorts a listing.
type Order int8

const (
	NewestFirst Order = iota // id descending
	NextDue                  // VisibleAt, then priority, then id
)

// JobFilter selects jobs. Zero fields select all; Limit 0 or less means no
// limit.
type JobFilter struct {
	Queue  string
	Kind   string
	Group  string // the job's group (limits.go); "" for any
	States []ListState
	Order  Order
	Limit  int
	Offset int
	Now    int64
	// After, when non-nil, selects only the rows after it in Order: ids
	// below After.ID for NewestFirst, (visible_at, priority, id) above
	// After's for NextDue.
	After *Cursor
}

// Cursor is a place in a listing's order (see JobFilter.After).
type Cursor struct {
	Due      int64 // visible_at; NextDue only
	Priority int   // NextDue only
	ID       int64
}

// Moved is a job an admin operation changed.
type Moved struct {
	ID          int64
	Queue, Kind string
}

// QueueStats counts one queue's rows by state at Now.
type QueueStats struct {
	Queue                                      string
	Ready, Scheduled, Running, Completed, Dead int
	Cancelled                                  int
	Waiting                                    int   // waiting for parents (workflow.go)
	OldestReadySince                           int64 // VisibleAt of the longest-waiting ready row; 0 if none
	NextDue                                    int64 // VisibleAt of the next scheduled row; 0 if none
}

// Errors of the store. The root package exports the same values.
var (
	ErrNotSQLite    = errors.New("litequeue: file is not a SQLite database")
	ErrCorrupt      = errors.New("litequeue: queue file is damaged (truncated or corrupt)")
	ErrNotLitequeue = errors.New("litequeue: SQLite file is not a litequeue queue file")
	ErrSchemaTooNew = errors.New("litequeue: queue file has a newer schema version than this build supports")
	ErrStorageFull  = errors.New("litequeue: disk full")
	ErrClosed       = errors.New("litequeue: queue is closed")
	ErrReadOnly     = errors.New("litequeue: queue is opened read-only")
	ErrDuplicate    = errors.New("litequeue: a live job already has this idempotency key")
	ErrNotFound     = errors.New("litequeue: job not found")
	ErrJobRunning   = errors.New("litequeue: job is running")
	ErrLeaseLost    = errors.New("litequeue: lease lost")
	ErrWrongState   = errors.New("litequeue: job is not in the required state")
	ErrStorageIO    = errors.New("litequeue: I/O error on the queue file")
	ErrFileReplaced = errors.New("litequeue: the queue file was removed or replaced while open")
)

// DuplicateError reports an idempotency key held by a live job.
type DuplicateError struct {
	Key string // the idempotency key
	ID  int64  // the id of the live job holding it
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("litequeue: idempotency key %q is held by live job %d; nothing was enqueued", e.Key, e.ID)
}

// Is reports whether target is ErrDuplicate.
func (e *DuplicateError) Is(target error) bool { return target == ErrDuplicate }

// Backuper is implemented by stores that can write a consistent copy of
// their database to a file.
type Backuper interface {
	Backup(ctx context.Context, path string) error
}

// TxWatcher is implemented by stores that can tell whether an application's
// transaction, in which Insert wrote jobs, has committed: so that the queue
// reports those jobs enqueued once they exist.
type TxWatcher interface {
	// TxMark returns, on tx right after Insert wrote jobs on it, what
	// TxEnded needs to tell the transaction's end; id and createdAt are
	// those of one of the jobs.
	TxMark(ctx context.Context, tx Tx, id, createdAt int64) (TxMark, error)
	// TxEnded reports for each mark whether its transaction committed,
	// rolled back or is still open. It may wait for the transactions to
	// end (SQLite: for the write lock they hold).
	TxEnded(ctx context.Context, marks []TxMark) ([]TxState, error)
}

// TxMark names an application's transaction that inserted jobs.
type TxMark struct {
	ID        int64 // a job the transaction inserted
	CreatedAt int64 // its CreatedAt: tells it from a later job given the id of a rolled-back one
	XID       int64 // the transaction's id where the database has one (PostgreSQL); 0 otherwise
}

// TxState is what became of an application's transaction.
type TxState int8

// The states TxEnded reports.
const (
	TxOpen       TxState = iota // not ended yet
	TxCommitted                 // committed: its jobs exist
	TxRolledBack                // rolled back (or its jobs are gone already): nothing to report
)
