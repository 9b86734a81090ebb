package store

import (
	"errors"
	"slices"
	"strings"
)

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
	// Tags keeps the rows that hold every one of these tags (through an
	// index); Metadata the rows whose metadata has each of these keys with
	// its value (no index: bounded by the page's window).
	Tags     []string
	Metadata map[string]string
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
	// Cancelled are the rows cancelled (BulkCancel), with their follow-ups.
	Cancelled []CancelledJob
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
// Dashboard.Summaries reads them.
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

// List returns the summaries by queue name.
func (m Summaries) List() []QueueSummary {
	out := make([]QueueSummary, 0, len(m))
	for _, sum := range m {
		out = append(out, *sum)
	}
	slices.SortFunc(out, func(a, b QueueSummary) int { return strings.Compare(a.Queue, b.Queue) })
	return out
}
