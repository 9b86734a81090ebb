package store

import (
	"context"
	"database/sql"
	"time"
)

// The seam, split by who calls it: the worker runtime (Runtime), the
// operator's reads and writes (Admin), the dashboard's reads (Dashboard) and
// durable schedules (Schedules). A backend implements all four as Backend;
// the test kit's extra operations are the optional Testing. Implementations
// are safe for concurrent use.

// Tx is an application's transaction that a write joins (Runtime.Insert,
// Runtime.CompleteTx, TxWatcher.TxMark): opaque to the queue, which takes
// it from its caller and hands it to its backend unchanged. The zero Tx is
// no transaction.
type Tx struct{ sql *sql.Tx }

// SQLTx is the Tx of a database/sql transaction; nil gives the zero Tx.
func SQLTx(tx *sql.Tx) Tx { return Tx{sql: tx} }

// SQL returns the database/sql transaction, nil for the zero Tx.
func (t Tx) SQL() *sql.Tx { return t.sql }

// IsZero reports whether t is no transaction.
func (t Tx) IsZero() bool { return t.sql == nil }

// Backend is what a backend implements and what a queue runs on.
type Backend interface {
	Runtime
	Admin
	Dashboard
	Schedules
	Flows
	Limiter
	LimitsReader
	Processes
	// Close stops the store's goroutines after writing what is queued. It
	// closes the database only if the store opened it.
	Close() error
}

// Runtime is what the worker runtime needs: enqueue, claim, hold a lease
// and write the outcome of each attempt.
//
// Every store keeps two rules for paused queues (Admin.Pause):
//   - Claim and InsertClaim claim nothing of a paused queue; the check is
//     made inside the claim's transaction, so a claim that commits after a
//     Pause committed takes nothing (InsertClaim still inserts its job).
//   - NextDue reports nothing due (ok false) for a paused queue.
//
// A NewJob's Unique, when set, is honoured by Insert and InsertClaim (and by
// a Burial's FollowUp): a conflict is a *UniqueError in dups (InsertClaim:
// its error, with the blocking row's id).
type Runtime interface {
	// Insert stores jobs in one transaction — on tx, the application's,
	// when it is not the zero Tx. ids[i] is the id of jobs[i]; dups[i] is a
	// *DuplicateError when its key is held by a live job (or an earlier item),
	// and then nothing was inserted for it. Any other error inserts nothing.
	Insert(ctx context.Context, tx Tx, jobs []NewJob) (ids []int64, dups []error, err error)
	// InsertClaim inserts job and, in the same transaction, claims per q
	// (which may take the new job or a more urgent one; a store may instead
	// claim the new job only when nothing comes before it, and nothing
	// otherwise). handOff, when the transaction committed, gets the claimed
	// jobs (maybe none), the new job marked New; the caller wakes its
	// dispatcher when the new job was not among them.
	InsertClaim(ctx context.Context, job NewJob, q ClaimQuery, handOff func([]Claimed)) (id int64, err error)
	// Claim claims per q and hands the claimed jobs to handOff once
	// committed. It returns how many it claimed.
	Claim(ctx context.Context, q ClaimQuery, handOff func([]Claimed)) (int, error)
	// NextDue returns the earliest VisibleAt of the live rows of queue of
	// kinds, pending or running; ok false if there are none.
	NextDue(ctx context.Context, queue string, kinds []string, kindsJSON string) (due int64, ok bool, err error)
	// Watch starts watching for other connections' writes and returns once
	// it has its baseline: every write committed after Watch returned makes
	// wake be called (soon: SQLite on a file-change notification, or by
	// polling every interval where there is none). It stops when ctx ends.
	// interval <= 0 means do not watch.
	Watch(ctx context.Context, interval time.Duration, wake func()) error

	// Extend moves the lease end of each row to until and returns the
	// indexes of those whose lease was lost.
	Extend(ctx context.Context, leases []Lease, until int64) (lost []int, err error)
	// Holds reports whether the row is still running under l (a CompleteTx
	// whose transaction did not commit leaves it so).
	Holds(ctx context.Context, l Lease) (bool, error)
	// WhichCancelled returns the indexes of the leases whose rows were
	// cancelled while running under that very lease.
	WhichCancelled(ctx context.Context, leases []Lease) ([]int, error)
	// Report writes r if the row is running under r.Lease, else returns
	// ErrLeaseLost and changes nothing.
	Report(ctx context.Context, r Report) error

	// Complete queues a success for the next write and returns at once;
	// c.Notify reports the outcome.
	Complete(c Completion)
	// Flush waits until every success queued before it is written and
	// notified.
	Flush(ctx context.Context) error
	// CompleteTx writes a success on the application's tx (ErrLeaseLost if
	// the lease was lost). keepAt non-zero keeps the row as completed at
	// that time; zero deletes it.
	CompleteTx(ctx context.Context, tx Tx, l Lease, keepAt int64) error
	// Retry and Bury record a failed attempt (ErrLeaseLost if the lease was
	// lost: then nothing changes).
	Retry(ctx context.Context, r Retry) error
	Bury(ctx context.Context, b Burial) error
	// Snooze applies s (see Snooze), conditional on its lease
	// (ErrLeaseLost: nothing changes). A row that has snoozed s.Max times
	// already is left alone and ErrSnoozeLimit returned.
	Snooze(ctx context.Context, s Snooze) error
	// Release puts leased rows back to pending, due at now, with the
	// attempt the claim counted given back. Rows whose lease was lost stay.
	Release(ctx context.Context, leases []Lease, now int64) error
}

// Admin is what the operator's reads and writes need: listing, counting,
// requeueing, cancelling, deleting and purging jobs, and pausing queues.
type Admin interface {
	// Jobs lists rows, Job one row (ErrNotFound) with its history.
	Jobs(ctx context.Context, f JobFilter) ([]Job, error)
	Job(ctx context.Context, id int64) (Job, []Attempt, error)
	// Progress reads one row's state, progress and output (ErrNotFound).
	Progress(ctx context.Context, id int64) (JobProgress, error)
	// Stats counts every queue's rows, sorted by queue name.
	Stats(ctx context.Context, now int64) ([]QueueStats, error)
	// Search returns one keyset page of the jobs q selects, id descending:
	// the window p.Window(lo, hi) of the lowest and highest stored ids, read
	// in one snapshot, at most p.Limit jobs of it; MakePage fills the page.
	Search(ctx context.Context, q JobQuery, p PageQuery) (Page, error)
	// Count counts the jobs q selects, stopping at limit (0 or less: no
	// limit).
	Count(ctx context.Context, q JobQuery, limit int) (int, error)

	// Requeue makes dead rows pending, due at now, attempts reset, all or
	// nothing (ErrNotFound, ErrWrongState, *DuplicateError naming the live
	// holder of the key).
	Requeue(ctx context.Context, ids []int64, now int64) ([]Moved, error)
	// Cancel cancels jobs by id at now, all or nothing: pending rows become
	// Cancelled (lease NULL), running rows become Cancelled keeping their
	// lease, both with FinishedAt now. An unknown id (ErrNotFound) or a row
	// that is completed, dead or already cancelled (ErrWrongState) cancels
	// nothing; the error names the id. hook, when non-nil, is asked for
	// each cancelled job's follow-up, inserted in the same transaction.
	Cancel(ctx context.Context, ids []int64, now int64, hook CancelHook) ([]CancelledJob, error)
	// Bulk selects, in one write transaction, the up to n highest ids below
	// before among the rows q selects, and applies op to those of them in
	// op's states: BulkRequeue makes dead rows whose key no live row holds
	// pending, due at q.Now, attempts reset (a row whose key is held stays
	// dead); BulkCancel makes pending rows Cancelled at q.Now (as Cancel
	// does; running rows are left alone); BulkDelete deletes completed,
	// dead and cancelled rows with their history. Other rows are left
	// alone. A BulkCancel lists the rows it cancelled in
	// BulkResult.Cancelled and asks hook (when non-nil) for each one's
	// follow-up, as Cancel does; other ops ignore hook.
	Bulk(ctx context.Context, op BulkOp, q JobQuery, before int64, n int, hook CancelHook) (BulkResult, error)
	// PurgeCancelled deletes cancelled rows (with their history) that were
	// cancelled before before and returns how many.
	PurgeCancelled(ctx context.Context, before int64) (int, error)
	// OldestCompleted returns the earliest FinishedAt of completed rows.
	OldestCompleted(ctx context.Context) (at int64, ok bool, err error)
	// PurgeCompleted deletes completed rows finished before before.
	PurgeCompleted(ctx context.Context, before int64) (int, error)
	// Expire deletes, with their history, in one transaction, at most
	// e.Limit of the rows e selects that finished before e.Before, oldest
	// first, and returns how many.
	Expire(ctx context.Context, e Expiry) (int, error)
	// OldestFinished returns the earliest FinishedAt of the rows e selects
	// (e.Before and e.Limit are ignored); ok is false when there is none.
	OldestFinished(ctx context.Context, e Expiry) (at int64, ok bool, err error)

	// Pause marks queue paused at at and reports whether it changed (false:
	// it was paused already, and keeps its first pause time). The queue
	// need not have jobs: the pause applies to the jobs that come (see the
	// rules of Runtime).
	Pause(ctx context.Context, queue string, at int64) (bool, error)
	// Resume clears queue's pause and reports whether it was paused.
	Resume(ctx context.Context, queue string) (bool, error)
	// Paused returns every paused queue with the time it was paused.
	Paused(ctx context.Context) (map[string]int64, error)
}

// Dashboard is what the dashboard reads beyond Admin (per-queue summaries,
// dead-letter groups, the per-minute history of outcomes) and the history's
// writes. Every read bounds its cost by its limits through indexes; none
// reads the whole jobs table unless its doc says so.
type Dashboard interface {
	// Summaries counts each queue's rows at now, sorted by queue name: the
	// live rows of each queue up to limit (LiveCapped when it stopped
	// there), the completed and the dead ones among the limit most recently
	// finished of each state in all (CompletedCapped, DeadCapped on every
	// summary when that many exist), and the longest-waiting ready row:
	// among the live rows counted when the count did not stop at limit
	// (exact), else among the OldestReadyLevels lowest priority levels of
	// the queue (exact when it has no more; OldestReadyCapped when it has).
	// A queue with no rows counted is absent.
	Summaries(ctx context.Context, now int64, limit int) ([]QueueSummary, error)
	// LatestDead returns the limit most recently dead rows q selects (its
	// States are ignored), latest death first (FinishedAt, then id,
	// descending), through an index of finished rows, with the first
	// DeadMessageChars characters of each message.
	LatestDead(ctx context.Context, q JobQuery, limit int) ([]DeadMessage, error)
	// DeadBefore returns the up to limit highest-id dead rows q selects (its
	// States are ignored) whose id is below before, id descending, with the
	// first DeadMessageChars characters of each message.
	DeadBefore(ctx context.Context, q JobQuery, before int64, limit int) ([]DeadMessage, error)
	// AddHistory adds counts to the history rows of their (queue, minute),
	// creating them, and deletes the rows of minutes before pruneBefore, in
	// one write transaction. ErrNoHistory if the database has no history.
	AddHistory(ctx context.Context, counts []HistoryCount, pruneBefore int64) error
	// History returns the history rows of minutes since and later, of queue
	// ("" every queue), by minute then queue. ErrNoHistory if the database
	// has no history.
	History(ctx context.Context, queue string, since int64) ([]HistoryCount, error)
	// FinishedCounts counts, by queue, the rows of state st (Completed,
	// Dead or Cancelled; any other state counts nothing) among the limit
	// most recently finished rows of that state, through an index of
	// finished rows; capped is true when at least limit such rows exist in
	// all (the counts are then among the latest limit).
	FinishedCounts(ctx context.Context, st State, limit int) (counts map[string]int, capped bool, err error)
	// RequeueCancelled makes cancelled rows pending, due at now, attempts
	// reset, all or nothing, as Requeue does for dead rows (ErrNotFound,
	// ErrWrongState for a row that is not cancelled, *DuplicateError).
	RequeueCancelled(ctx context.Context, ids []int64, now int64) ([]Moved, error)
	// RunNow makes the pending row id due at now (its VisibleAt), keeping
	// its attempt count: a scheduled row, or one waiting out a retry's
	// backoff, becomes claimable. A row due already is left as it is.
	// ErrNotFound for an unknown id, ErrWrongState for a row that is not
	// pending (running or finished).
	RunNow(ctx context.Context, id, now int64) (Moved, error)
}

// Testing is what the test kit (litequeuetest) needs beyond Backend. It is
// optional: the kit asserts it and a queue never calls it.
type Testing interface {
	// LoadOf reads, at now, how many live rows of the handled pairs are
	// ready or running, the earliest due time of their scheduled rows, and
	// how many live rows belong to no handled pair (it reads every live
	// row).
	LoadOf(ctx context.Context, handled []Handled, now int64) (Load, error)
	// InsertRunning stores job as already claimed: a running row under
	// r.Lease at r.Attempt (for the kit's Work through a queue). A key held
	// by a live row gives a *DuplicateError and stores nothing.
	InsertRunning(ctx context.Context, job NewJob, r RunningClaim) (int64, error)
}
