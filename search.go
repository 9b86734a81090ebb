package litequeue

import (
	"context"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// JobQuery selects jobs: the jobs that meet every condition set. Zero
// fields select all. It is the one selection of the operator's methods:
// ListJobs pages through it, CountJobs counts it, RequeueJobs, CancelJobs
// and DeleteJobs act on it, GroupDeadLetters and RequeueGroup group its
// dead letters. A Queue, Kind or Kinds entry that no name can be (it holds
// NUL or invalid UTF-8) selects nothing, on every backend.
type JobQuery struct {
	Queue string
	Kind  string
	// Kinds, when not empty, keeps the jobs of one of these kinds (and of
	// Kind too when Kind is set).
	Kinds  []string
	States []State // any of these; empty means every state
	// Text, when not empty, keeps the jobs whose payload or last error
	// contains it in its first 4,096 characters, ignoring ASCII case (so
	// that a search's cost does not grow with what a job stores). A text
	// filter cannot use an index: ListJobs bounds its cost with
	// PageRequest.ScanLimit.
	Text string
	// IDs, when not empty, restricts the selection to these ids.
	IDs []int64
	// CreatedFrom and CreatedBefore, when not zero, keep the jobs enqueued
	// at or after CreatedFrom and before CreatedBefore.
	CreatedFrom, CreatedBefore time.Time
	// FinishedFrom and FinishedBefore, when not zero, keep the jobs that
	// finished (completed, died or were cancelled) at or after FinishedFrom
	// and before FinishedBefore; a job that has not finished fails them.
	FinishedFrom, FinishedBefore time.Time
	// Tags, when not empty, keeps the jobs that carry every one of these
	// tags (EnqueueOptions.Tags), through an index. A string that is no
	// valid tag selects nothing.
	Tags []string
	// Metadata, when not empty, keeps the jobs whose metadata holds each
	// of these keys with exactly its value. No index serves it: ListJobs
	// bounds its cost with PageRequest.ScanLimit.
	Metadata map[string]string
}

// PageRequest asks ListJobs for one page of jobs, newest (highest id)
// first.
type PageRequest struct {
	// Before is the cursor: only jobs with an id below it are listed. 0
	// starts at the newest job. Pass JobPage.Next to get the following page.
	Before int64
	// Limit is the most jobs on the page. Default DefaultPageLimit (50).
	Limit int
	// ScanLimit bounds the work of one page: it examines jobs in a window of
	// at most ScanLimit consecutive ids below Before, so a page costs the
	// same on a file of a million jobs as on one of a thousand, whatever
	// the filter. A window that holds fewer than Limit matches gives a
	// shorter page with Partial set. Default DefaultScanLimit (100,000).
	ScanLimit int
}

// Defaults of PageRequest fields left zero.
const (
	DefaultPageLimit = 50
	DefaultScanLimit = 100_000
)

// JobPage is one page of ListJobs.
type JobPage struct {
	Jobs []JobInfo `json:"jobs"`
	// Next is the cursor of the following (older) page, for
	// PageRequest.Before; 0 when no older job is left to examine.
	Next int64 `json:"next,omitempty"`
	// Partial says the page stopped at its scan window before it found
	// Limit matches: older matches may exist, from Next down.
	Partial bool `json:"partial,omitempty"`
	// ScannedFrom and ScannedTo are the lowest and highest id of the window
	// the page examined (ScannedTo is below Before).
	ScannedFrom int64 `json:"scanned_from"`
	ScannedTo   int64 `json:"scanned_to"`
}

// storeQuery converts f to the store's selection at now, checking its
// states. ok is false when f selects nothing because a name in it cannot
// be stored.
func storeQuery(f JobQuery, now int64) (sq store.JobQuery, ok bool, err error) {
	sq = store.JobQuery{Queue: f.Queue, Kind: f.Kind, Kinds: f.Kinds, Text: f.Text, IDs: f.IDs, Now: now,
		CreatedFrom: boundNanos(f.CreatedFrom), CreatedBefore: boundNanos(f.CreatedBefore),
		FinishedFrom: boundNanos(f.FinishedFrom), FinishedBefore: boundNanos(f.FinishedBefore),
		Tags: f.Tags, Metadata: f.Metadata}
	for _, s := range f.States {
		if _, err := ParseState(string(s)); err != nil {
			return store.JobQuery{}, false, err
		}
		sq.States = append(sq.States, listState(s))
	}
	ok = storableText(f.Queue) && storableText(f.Kind) && checkMetaQuery(f)
	for _, k := range f.Kinds {
		ok = ok && storableText(k)
	}
	return sq, ok, nil
}

// boundNanos is t in Unix nanoseconds, saturated at the stored range; 0
// (no bound) for the zero time.
func boundNanos(t time.Time) int64 {
	switch {
	case t.IsZero():
		return 0
	case t.Before(minStoredTime):
		return minStoredTime.UnixNano()
	case t.After(maxStoredTime):
		return maxStoredTime.UnixNano()
	}
	return t.UnixNano()
}

// ListJobs returns one page of the jobs f selects, newest first, by keyset
// pagination on the job id: a page reads only the rows of its id window
// (see PageRequest.ScanLimit) through the primary key, never the whole
// table, so it stays fast on a file of millions of jobs; a text filter is
// bounded the same way. It works on a read-only queue. An unknown state is
// an error.
func (q *Queue) ListJobs(ctx context.Context, f JobQuery, p PageRequest) (JobPage, error) {
	now := unixNanos(q.clock)
	if p.Limit <= 0 {
		p.Limit = DefaultPageLimit
	}
	if p.ScanLimit <= 0 {
		p.ScanLimit = DefaultScanLimit
	}
	sq, ok, err := storeQuery(f, now)
	if err != nil || !ok {
		return JobPage{}, err
	}
	sp, err := q.store.Search(ctx, sq, store.PageQuery{Before: p.Before, Limit: p.Limit, ScanLimit: p.ScanLimit})
	if err != nil {
		return JobPage{}, wrapf("litequeue: list jobs: %w", err)
	}
	page := JobPage{Next: sp.Next, Partial: sp.Partial, ScannedFrom: sp.ScannedFrom, ScannedTo: sp.ScannedTo}
	for _, j := range sp.Jobs {
		page.Jobs = append(page.Jobs, jobInfo(j, now))
	}
	return page, nil
}

// SearchJobs returns one page of the jobs f selects, as ListJobs does.
//
// Deprecated: use ListJobs.
func (q *Queue) SearchJobs(ctx context.Context, f JobQuery, p PageRequest) (JobPage, error) {
	return q.ListJobs(ctx, f, p)
}

// CountJobs counts the jobs f selects, stopping at limit (0 or less: no
// limit) so that the answer is "at least limit" when it returns limit. A
// state filter counts through an index; a filter by kind or text alone reads
// every row, so call it for a confirmation, not on every page render.
func (q *Queue) CountJobs(ctx context.Context, f JobQuery, limit int) (int, error) {
	sq, ok, err := storeQuery(f, unixNanos(q.clock))
	if err != nil || !ok {
		return 0, err
	}
	n, err := q.store.Count(ctx, sq, limit)
	if err != nil {
		return 0, wrapf("litequeue: count jobs: %w", err)
	}
	return n, nil
}

// QueueSummary is one queue's figures for a dashboard, from QueueSummaries.
type QueueSummary struct {
	Queue     string `json:"queue"`
	Ready     int    `json:"ready"`
	Scheduled int    `json:"scheduled"`
	Running   int    `json:"running"`
	Completed int    `json:"completed"`
	Dead      int    `json:"dead"`
	// Capped says a count reached the limit given to QueueSummaries: the
	// live counts (ready, scheduled, running) are then "at least" figures.
	Capped bool `json:"capped,omitempty"`
	// CompletedCapped and DeadCapped say that the file holds at least limit
	// completed (or dead) jobs in all: Completed (or Dead) then counts this
	// queue's among the most recent limit of them, an "at least" figure.
	CompletedCapped bool `json:"completed_capped,omitempty"`
	DeadCapped      bool `json:"dead_capped,omitempty"`
	// OldestReady is how long the longest-waiting ready job has been due;
	// 0 when none is ready.
	OldestReady time.Duration `json:"oldest_ready"`
	// OldestReadyID is that job's id; 0 when none is ready.
	OldestReadyID int64 `json:"oldest_ready_id,omitempty"`
	// OldestReadyCapped says OldestReady is an "at least" figure: the
	// queue has more live jobs than the limit and more than 100 priority
	// levels among them, and only the 100 most urgent levels were searched.
	OldestReadyCapped bool `json:"oldest_ready_capped,omitempty"`
}

// QueueSummaries returns per-queue counts like Stats, sorted by queue name,
// without reading the whole table: the live jobs (ready, scheduled,
// running) of each queue are counted through the claim index up to limit
// per queue (QueueSummary.Capped says a count stopped there), the dead and
// completed ones through the finished index up to limit in all; the queue
// names come from a skip scan of the claim index. limit 0 or less means
// DefaultCountLimit. The oldest ready job is found among the live jobs
// counted, exactly, when a queue has fewer than limit of them; otherwise
// with one index seek per priority level, for the 100 most urgent levels
// (QueueSummary.OldestReadyCapped when there are more), so that the cost
// stays bounded however many priorities the jobs use.
func (q *Queue) QueueSummaries(ctx context.Context, limit int) ([]QueueSummary, error) {
	if limit <= 0 {
		limit = DefaultCountLimit
	}
	now := unixNanos(q.clock)
	sums, err := q.store.Summaries(ctx, now, limit)
	if err != nil {
		return nil, wrapf("litequeue: queue summaries: %w", err)
	}
	out := make([]QueueSummary, 0, len(sums))
	for _, s := range sums {
		qs := QueueSummary{Queue: s.Queue, Ready: s.Ready, Scheduled: s.Scheduled, Running: s.Running,
			Completed: s.Completed, Dead: s.Dead, Capped: s.LiveCapped,
			CompletedCapped: s.CompletedCapped, DeadCapped: s.DeadCapped, OldestReadyID: s.OldestReadyID,
			OldestReadyCapped: s.OldestReadyCapped}
		if s.OldestReadyID != 0 {
			// Saturated, not wrapped, for a time more than 292 years ago.
			qs.OldestReady = time.Unix(0, now).Sub(time.Unix(0, s.OldestReadyAt))
		}
		out = append(out, qs)
	}
	return out, nil
}

// DefaultCountLimit is the count limit of QueueSummaries.
const DefaultCountLimit = 100_000
