package store

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
)

// DashboardStore is the part of Store that serves the dashboard's reads
// (keyset pages, counts, per-queue summaries, dead-letter groups), its bulk
// actions, the per-minute history of outcomes, and the test kit
// (litequeuetest). Every read bounds its cost by its limits through
// indexes; none reads the whole jobs table unless its doc says so.
type DashboardStore interface {
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
	// summary when that many exist), and the longest-waiting ready row:
	// among the live rows counted when the count did not stop at limit
	// (exact), else among the OldestReadyLevels lowest priority levels of
	// the queue (exact when it has no more; OldestReadyCapped when it has).
	// A queue with no rows counted is absent.
	Summaries(ctx context.Context, now int64, limit int) ([]QueueSummary, error)
	// Bulk selects, in one write transaction, the up to n highest ids below
	// before among the rows q selects, and applies op to those of them in
	// op's states: BulkRequeue makes dead rows whose key no live row holds
	// pending, due at q.Now, attempts reset (a row whose key is held stays
	// dead); BulkCancel makes pending rows Cancelled at q.Now (as Cancel
	// does; running rows are left alone); BulkDelete deletes completed,
	// dead and cancelled rows with their history. Other rows are left
	// alone.
	Bulk(ctx context.Context, op BulkOp, q JobQuery, before int64, n int) (BulkResult, error)
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
	// LoadOf reads, at now, how many live rows of the handled pairs are
	// ready or running, the earliest due time of their scheduled rows, and
	// how many live rows belong to no handled pair (for the test kit; it
	// reads every live row).
	LoadOf(ctx context.Context, handled []Handled, now int64) (Load, error)
	// InsertRunning stores job as already claimed: a running row under
	// r.Lease at r.Attempt (for the test kit's Work through a queue). A key
	// held by a live row gives a *DuplicateError and stores nothing.
	InsertRunning(ctx context.Context, job NewJob, r RunningClaim) (int64, error)
}

// ErrNoHistory is the error of a database without the per-minute history
// (a SQLite file whose schema predates it, opened read-only).
var ErrNoHistory = errors.New("litequeue: the file has no lq_history table (its schema predates the history)")

// JobQuery selects jobs for Search, Count, Bulk, LatestDead and DeadBefore:
// the rows that meet every condition set. Zero fields select all.
type JobQuery struct {
	Queue  string
	Kind   string
	Kinds  []string    // when not empty, only rows of one of these kinds
	States []ListState // any of these; empty means every state
	// Text keeps the rows whose payload or last error contains it in its
	// first TextSearchChars characters, ignoring ASCII case; "" keeps all.
	// No index serves it.
	Text string
	IDs  []int64 // when not empty, only these ids
	// Time bounds in Unix nanoseconds, 0 for none: CreatedAt at or after
	// CreatedFrom and before CreatedBefore; FinishedAt at or after
	// FinishedFrom and before FinishedBefore (a row that never finished
	// has no FinishedAt and fails a finished bound).
	CreatedFrom, CreatedBefore   int64
	FinishedFrom, FinishedBefore int64
	Now                          int64 // tells ready from scheduled
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
	OldestReadyCapped                          bool  // only the OldestReadyLevels lowest priority levels were searched
}

// OldestReadyLevels bounds the priority levels Summaries searches one by one
// for the oldest ready row of a queue whose live rows it did not count to
// the end: its cost stays bounded when every job has its own priority.
const OldestReadyLevels = 100

// OfferOldest makes the ready row id, due at visible, sum's oldest when it
// is older than the one found so far (the first found wins a tie).
func (sum *QueueSummary) OfferOldest(id, visible int64) {
	if sum.OldestReadyID == 0 || visible < sum.OldestReadyAt {
		sum.OldestReadyID, sum.OldestReadyAt = id, visible
	}
}

// BulkOp is what Bulk does to the rows it selects.
type BulkOp int8

// The bulk operations.
const (
	BulkRequeue BulkOp = iota // dead → pending, due now, attempts reset
	BulkCancel                // pending → cancelled (kept), at JobQuery.Now
	BulkDelete                // completed, dead or cancelled → deleted, with history
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
	Message     string // the last error, or the dead reason when it is empty, cut to DeadMessageChars characters
}

// DeadMessageChars is how much of a dead row's message LatestDead and
// DeadBefore read, and TextSearchChars how much of a payload and a last
// error a text filter searches: the start of each, so that neither
// read's cost grows with the size of what is stored.
const (
	DeadMessageChars = 1024
	TextSearchChars  = 4096
)

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

// Summaries gathers QueueSummary values by queue while a backend's
// DashboardStore.Summaries reads them.
type Summaries map[string]*QueueSummary

// Get returns the summary of queue name, adding an empty one the first time.
func (m Summaries) Get(name string) *QueueSummary {
	sum, ok := m[name]
	if !ok {
		sum = &QueueSummary{Queue: name}
		m[name] = sum
	}
	return sum
}

// AddFinished runs query, which counts the newest limit rows of state st
// (Completed or Dead) per queue as (queue, count) rows, and sets each
// queue's count of st. When the counts reach limit in all, every summary's
// count of st is marked capped: it may be more.
func (m Summaries) AddFinished(ctx context.Context, db Querier, st State, limit int, query string, args ...any) error {
	type count struct {
		queue string
		n     int
	}
	counts, err := QueryAll(ctx, db, query, args, func(r *sql.Rows, c *count) error { return r.Scan(&c.queue, &c.n) })
	if err != nil {
		return err
	}
	total := 0
	for _, c := range counts {
		total += c.n
		if st == Completed {
			m.Get(c.queue).Completed = c.n
		} else {
			m.Get(c.queue).Dead = c.n
		}
	}
	if total >= limit {
		for _, sum := range m {
			if st == Completed {
				sum.CompletedCapped = true
			} else {
				sum.DeadCapped = true
			}
		}
	}
	return nil
}

// List returns the summaries by queue name.
func (m Summaries) List() []QueueSummary {
	out := make([]QueueSummary, 0, len(m))
	for _, sum := range m {
		out = append(out, *sum)
	}
	slices.SortFunc(out, func(a, b QueueSummary) int { return strings.Compare(a.Queue, b.Queue) })
	return out
}
