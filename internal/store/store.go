// Package store is the storage seam of litequeue: every operation the queue
// needs from a database, in the queue's own words (insert, claim, extend,
// complete, retry, bury, release, list, requeue, purge), with no SQL above
// it. The SQLite store (package internal/sqlite) is the first
// implementation; the PostgreSQL store (package postgres) implements the same
// interface and passes the same conformance suite (internal/conformance).
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
//     driver's own; Classify maps driver errors to ErrStorageFull,
//     ErrStorageIO and the like.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
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
	Key         string // idempotency key; "" for none
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
}

// Completion is a success to write. Notify, if set, is called once the
// write committed (nil), found the lease lost (ErrLeaseLost) or failed.
type Completion struct {
	Lease
	At     int64 // when the handler returned
	Keep   bool  // keep the row as completed (retention) instead of deleting it
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
// transaction.
type Burial struct {
	Lease
	At        int64
	Reason    string
	LastError *string
	Attempt   int
	Record    Attempt
	FollowUp  *NewJob
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
	States []ListState
	Order  Order
	Limit  int
	Offset int
	Now    int64
}

// DeadFilter selects dead letters. Zero fields select all. FinishedBefore,
// when non-zero, selects those that died before it.
type DeadFilter struct {
	Queue          string
	Kind           string
	FinishedBefore int64
	IDs            []int64
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
	OldestReadySince                           int64 // VisibleAt of the longest-waiting ready row; 0 if none
	NextDue                                    int64 // VisibleAt of the next scheduled row; 0 if none
}

// Store is what a Queue needs from a database. Implementations are safe for
// concurrent use.
type Store interface {
	// Insert stores jobs in one transaction — on tx, the application's,
	// when it is non-nil. ids[i] is the id of jobs[i]; dups[i] is a
	// *DuplicateError when its key is held by a live job (or an earlier item),
	// and then nothing was inserted for it. Any other error inserts nothing.
	Insert(ctx context.Context, tx *sql.Tx, jobs []NewJob) (ids []int64, dups []error, err error)
	// InsertClaim inserts job and, in the same transaction, claims per q
	// (which may take the new job or a more urgent one). handOff, when the
	// transaction committed, gets the claimed jobs (maybe none).
	InsertClaim(ctx context.Context, job NewJob, q ClaimQuery, handOff func([]Claimed)) (id int64, err error)
	// Claim claims per q and hands the claimed jobs to handOff once
	// committed. It returns how many it claimed.
	Claim(ctx context.Context, q ClaimQuery, handOff func([]Claimed)) (int, error)
	// NextDue returns the earliest VisibleAt of the live rows of queue of
	// kinds, pending or running; ok false if there are none.
	NextDue(ctx context.Context, queue string, kinds []string, kindsJSON string) (due int64, ok bool, err error)
	// Extend moves the lease end of each row to until and returns the
	// indexes of those whose lease was lost.
	Extend(ctx context.Context, leases []Lease, until int64) (lost []int, err error)
	// Release puts leased rows back to pending, due at now, with the
	// attempt the claim counted given back. Rows whose lease was lost stay.
	Release(ctx context.Context, leases []Lease, now int64) error
	// Complete queues a success for the next write and returns at once;
	// c.Notify reports the outcome.
	Complete(c Completion)
	// Flush waits until every success queued before it is written and
	// notified.
	Flush(ctx context.Context) error
	// CompleteTx writes a success on the application's tx (ErrLeaseLost if
	// the lease was lost). keepAt non-zero keeps the row as completed at
	// that time; zero deletes it.
	CompleteTx(ctx context.Context, tx *sql.Tx, l Lease, keepAt int64) error
	// Holds reports whether the row is still running under l (a CompleteTx
	// whose transaction did not commit leaves it so).
	Holds(ctx context.Context, l Lease) (bool, error)
	// Retry and Bury record a failed attempt (ErrLeaseLost if the lease was
	// lost: then nothing changes).
	Retry(ctx context.Context, r Retry) error
	Bury(ctx context.Context, b Burial) error

	// Watch starts watching for other connections' writes and returns once
	// it has its baseline: every write committed after Watch returned makes
	// wake be called (soon; SQLite polls every interval). It stops when ctx
	// ends. interval <= 0 means do not watch.
	Watch(ctx context.Context, interval time.Duration, wake func()) error

	// OldestCompleted returns the earliest FinishedAt of completed rows.
	OldestCompleted(ctx context.Context) (at int64, ok bool, err error)
	// PurgeCompleted deletes completed rows finished before before.
	PurgeCompleted(ctx context.Context, before int64) (int, error)

	// Jobs lists rows, Job one row (ErrNotFound) with its history.
	Jobs(ctx context.Context, f JobFilter) ([]Job, error)
	Job(ctx context.Context, id int64) (Job, []Attempt, error)
	// Cancel deletes pending rows by id, all or nothing: an unknown id
	// (ErrNotFound), a running one (ErrJobRunning) or a finished one
	// (ErrWrongState) deletes nothing; the error names the id.
	Cancel(ctx context.Context, ids []int64) (int, error)
	// Requeue makes dead rows pending, due at now, attempts reset, all or
	// nothing (ErrNotFound, ErrWrongState, *DuplicateError naming the live
	// holder of the key).
	Requeue(ctx context.Context, ids []int64, now int64) ([]Moved, error)
	// RequeueWhere requeues every dead row f selects whose key is free.
	RequeueWhere(ctx context.Context, f DeadFilter, now int64) ([]Moved, error)
	// PurgeDead deletes the dead rows f selects, with their history.
	PurgeDead(ctx context.Context, f DeadFilter) (int, error)
	// Stats counts every queue's rows, sorted by queue name.
	Stats(ctx context.Context, now int64) ([]QueueStats, error)

	// Close stops the store's goroutines after writing what is queued. It
	// closes the database only if the store opened it.
	Close() error

	// --- Dashboard, bulk actions, history and the test kit (branch dash2).
	// Types: JobQuery, PageQuery, Page, QueueSummary, BulkOp, BulkResult,
	// DeadMessage, HistoryCount, Handled, Load, RunningClaim (end of this file).
	// Every read bounds its cost by its limits through indexes; none scans
	// the whole jobs table unless its doc says so.

	// Search returns one keyset page of the jobs q selects, id descending:
	// the window p.Window(lo, hi) of the lowest and highest stored ids, read
	// in one snapshot, at most p.Limit jobs of it; MakePage fills the page.
	Search(ctx context.Context, q JobQuery, p PageQuery) (Page, error)
	// Count counts the jobs q selects, stopping at limit (0 or less: no
	// limit).
	Count(ctx context.Context, q JobQuery, limit int) (int, error)
	// Summaries counts each queue's rows at now, sorted by queue name: the
	// live rows of each queue up to limit (LiveCapped when it stopped
	// there), the completed and the dead ones among the limit most recently
	// finished of each state in all (CompletedCapped, DeadCapped on every
	// summary when that many exist), and the longest-waiting ready row
	// exactly. A queue with no rows counted is absent.
	Summaries(ctx context.Context, now int64, limit int) ([]QueueSummary, error)
	// Bulk selects, in one write transaction, the up to n highest ids below
	// before among the rows q selects, and applies op to those of them in
	// op's states: BulkRequeue makes dead rows whose key no live row holds
	// pending, due at q.Now, attempts reset (a row whose key is held stays
	// dead); BulkCancel deletes pending rows; BulkDelete deletes completed
	// and dead rows with their history. Other rows are left alone.
	Bulk(ctx context.Context, op BulkOp, q JobQuery, before int64, n int) (BulkResult, error)
	// LatestDead returns the limit most recently dead rows f selects,
	// latest death first (FinishedAt, then id, descending), through an
	// index of finished rows.
	LatestDead(ctx context.Context, f DeadFilter, limit int) ([]DeadMessage, error)
	// DeadBefore returns the up to limit highest-id dead rows f selects
	// whose id is below before, id descending.
	DeadBefore(ctx context.Context, f DeadFilter, before int64, limit int) ([]DeadMessage, error)
	// AddHistory adds counts to the history rows of their (queue, minute),
	// creating them, and deletes the rows of minutes before pruneBefore, in
	// one write transaction. ErrNoHistory if the database has no history.
	AddHistory(ctx context.Context, counts []HistoryCount, pruneBefore int64) error
	// History returns the history rows of minutes since and later, of queue
	// ("" every queue), by minute then queue. ErrNoHistory if the database
	// has no history.
	History(ctx context.Context, queue string, since int64) ([]HistoryCount, error)
	// LoadOf reads, at now, how many live rows of the handled pairs are
	// ready or running, the earliest due time of their scheduled rows, and
	// how many live rows belong to no handled pair (for the test kit; it
	// reads every live row).
	LoadOf(ctx context.Context, handled []Handled, now int64) (Load, error)
	// InsertRunning stores job as already claimed: a running row under
	// r.Lease at r.Attempt (for the test kit's Work through a queue). A key
	// held by a live row gives a *DuplicateError and stores nothing.
	InsertRunning(ctx context.Context, job NewJob, r RunningClaim) (int64, error)
	// --- end of dash2's block.
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

// NewQueue makes a *litequeue.Queue (returned as any) on s with opts (a
// *litequeue.Options, nil for defaults). The root package sets it at init;
// backends in sub-packages (postgres) call it, so the root package's public
// API needs no constructor that names a Store.
var NewQueue func(s Store, opts any) (any, error)

// Backuper is implemented by stores that can write a consistent copy of
// their database to a file.
type Backuper interface {
	Backup(ctx context.Context, path string) error
}

// --- Types of the dashboard, bulk, history and test-kit methods (dash2).

// ErrNoHistory is the error of a database without the per-minute history
// (a SQLite file whose schema predates it, opened read-only).
var ErrNoHistory = errors.New("litequeue: the file has no lq_history table (its schema predates the history)")

// JobQuery selects jobs for Search, Count and Bulk. Zero fields select all.
type JobQuery struct {
	Queue  string
	Kind   string
	States []ListState // any of these; empty means every state
	// Text keeps the rows whose payload or last error contains it, ignoring
	// ASCII case; "" keeps all. No index serves it.
	Text string
	IDs  []int64 // when not empty, only these ids
	Now  int64   // tells ready from scheduled
}

// PageQuery asks Search for one page. The caller fills every field (Limit
// and ScanLimit above 0).
type PageQuery struct {
	Before    int64 // ids below it; 0 or more than the highest id + 1: from the newest
	Limit     int   // most jobs on the page
	ScanLimit int   // most consecutive ids the page examines
}

// Window is the id window [floor, before) of p's page when the lowest and
// highest stored ids are lo and hi: before is p.Before clamped to hi+1,
// floor is before-ScanLimit, raised to lo. A window with before <= lo is
// empty.
func (p PageQuery) Window(lo, hi int64) (before, floor int64) {
	before = p.Before
	if before <= 0 || before > hi+1 {
		before = hi + 1
	}
	return before, max(before-int64(p.ScanLimit), lo)
}

// MakePage is the page of jobs (id descending, at most p.Limit) found in
// p's window when the lowest and highest stored ids are lo and hi (empty
// is true when there are no rows at all).
func MakePage(p PageQuery, jobs []Job, lo, hi int64, empty bool) Page {
	if empty {
		return Page{}
	}
	before, floor := p.Window(lo, hi)
	if before <= lo {
		return Page{ScannedFrom: before, ScannedTo: before - 1}
	}
	page := Page{Jobs: jobs, ScannedFrom: floor, ScannedTo: before - 1}
	switch {
	case len(jobs) >= p.Limit:
		last := jobs[len(jobs)-1].ID
		page.ScannedFrom = last
		if last > lo {
			page.Next = last
		}
	case floor > lo:
		page.Next, page.Partial = floor, true
	}
	return page
}

// Page is one page of Search.
type Page struct {
	Jobs []Job
	// Next is the Before of the following (older) page; 0 when no older
	// row is left to examine.
	Next int64
	// Partial says the window ended before Limit matches were found.
	Partial bool
	// ScannedFrom and ScannedTo are the lowest and highest id examined.
	ScannedFrom, ScannedTo int64
}

// QueueSummary is one queue's counts from Summaries.
type QueueSummary struct {
	Queue                                      string
	Ready, Scheduled, Running, Completed, Dead int
	LiveCapped                                 bool  // the live count stopped at the limit
	CompletedCapped, DeadCapped                bool  // at least limit rows of that state exist in all
	OldestReadyAt                              int64 // VisibleAt of the longest-waiting ready row; 0 if none
	OldestReadyID                              int64 // its id; 0 if none
}

// BulkOp is what Bulk does to the rows it selects.
type BulkOp int8

// The bulk operations.
const (
	BulkRequeue BulkOp = iota // dead → pending, due now, attempts reset
	BulkCancel                // pending → deleted
	BulkDelete                // completed or dead → deleted, with history
)

// BulkResult is what one Bulk call did.
type BulkResult struct {
	Selected int     // rows selected (changed or not), at most n
	Last     int64   // the lowest id selected (the next call's before); 0 if none
	Changed  int     // rows changed
	Moved    []Moved // the rows requeued (BulkRequeue)
}

// DeadMessage is a dead row as the dead-letter groups read it.
type DeadMessage struct {
	ID          int64
	Queue, Kind string
	FinishedAt  int64
	Message     string // the last error, or the dead reason when it is empty
}

// HistoryCount is one queue's outcomes in one minute.
type HistoryCount struct {
	Queue                              string
	Minute                             int64 // minutes since the Unix epoch
	Enqueued, Succeeded, Retried, Dead int
}

// Handled is a queue and a kind that the caller has a handler for.
type Handled struct{ Queue, Kind string }

// Load is what LoadOf reads.
type Load struct {
	Busy      int   // live rows of handled pairs, ready or running
	Next      int64 // the earliest VisibleAt of a scheduled row of a handled pair
	HasNext   bool  // whether Next is set
	Unhandled int   // live rows of no handled pair
}

// RunningClaim is the claim InsertRunning gives a new row.
type RunningClaim struct {
	Lease     int64
	Attempt   int    // the attempt the claim counted
	At        int64  // when it was claimed (AttemptedAt)
	Until     int64  // the lease's end (VisibleAt)
	LastError string // the previous attempt's error; "" for none
}
