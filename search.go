package litequeue

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/litequeue/litequeue/internal/sqlite"
)

// JobQuery selects jobs for SearchJobs, CountJobs and the bulk actions
// (RequeueMatching, CancelMatching, DeleteMatching). Zero fields select all.
type JobQuery struct {
	Queue  string
	Kind   string
	States []State // any of these; empty means every state
	// Text, when not empty, keeps the jobs whose payload or last error
	// contains it, ignoring ASCII case. A text filter cannot use an index:
	// SearchJobs bounds its cost with PageRequest.ScanLimit.
	Text string
	// IDs, when not empty, restricts the selection to these ids.
	IDs []int64
}

// PageRequest asks SearchJobs for one page of jobs, newest (highest id)
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

// JobPage is one page of SearchJobs.
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

// queryWhere renders the conditions of f as SQL on lq_jobs, with named
// arguments; :now must be bound by the caller.
func queryWhere(f JobQuery) ([]string, []any, error) {
	var where []string
	var args []any
	if f.Queue != "" {
		where = append(where, "queue = :queue")
		args = append(args, sql.Named("queue", f.Queue))
	}
	if f.Kind != "" {
		where = append(where, "kind = :kind")
		args = append(args, sql.Named("kind", f.Kind))
	}
	if len(f.States) > 0 {
		var ors []string
		for _, s := range f.States {
			if _, err := ParseState(string(s)); err != nil {
				return nil, nil, err
			}
			ors = append(ors, sqlite.StateSQL(listState(s)))
		}
		where = append(where, "("+strings.Join(ors, " OR ")+")")
	}
	if f.Text != "" {
		where = append(where, `(instr(lower(CAST(payload AS TEXT)), :text) > 0 OR instr(lower(coalesce(last_error, '')), :text) > 0)`)
		args = append(args, sql.Named("text", strings.ToLower(f.Text)))
	}
	if len(f.IDs) > 0 {
		where = append(where, "id IN (SELECT value FROM json_each(:ids))")
		args = append(args, sql.Named("ids", idsJSON(f.IDs)))
	}
	return where, args, nil
}

// SearchJobs returns one page of the jobs f selects, newest first, by keyset
// pagination on the job id: a page reads only the rows of its id window
// (see PageRequest.ScanLimit) through the primary key, never the whole
// table, so it stays fast on a file of millions of jobs; a text filter is
// bounded the same way. It works on a read-only queue. An unknown state is
// an error.
func (q *Queue) SearchJobs(ctx context.Context, f JobQuery, p PageRequest) (JobPage, error) {
	now := unixNanos(q.clock)
	if p.Limit <= 0 {
		p.Limit = DefaultPageLimit
	}
	if p.ScanLimit <= 0 {
		p.ScanLimit = DefaultScanLimit
	}
	where, args, err := queryWhere(f)
	if err != nil {
		return JobPage{}, err
	}
	tx, err := q.lite.DB().BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return JobPage{}, fmt.Errorf("litequeue: search jobs: %w", err)
	}
	defer tx.Rollback()
	var lo, hi sql.NullInt64
	if err := tx.QueryRowContext(ctx, idRangeSQL).Scan(&lo, &hi); err != nil {
		return JobPage{}, fmt.Errorf("litequeue: search jobs: %w", err)
	}
	if !hi.Valid {
		return JobPage{}, nil
	}
	before := p.Before
	if before <= 0 || before > hi.Int64+1 {
		before = hi.Int64 + 1
	}
	floor := max(before-int64(p.ScanLimit), lo.Int64)
	page := JobPage{ScannedFrom: floor, ScannedTo: before - 1}
	if before <= lo.Int64 {
		return JobPage{ScannedFrom: before, ScannedTo: before - 1}, nil
	}
	query := searchSQL(where)
	args = append(args, sql.Named("now", now), sql.Named("before", before), sql.Named("floor", floor), sql.Named("limit", p.Limit))
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return JobPage{}, fmt.Errorf("litequeue: search jobs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		j, err := scanJob(rows, now)
		if err != nil {
			return JobPage{}, err
		}
		page.Jobs = append(page.Jobs, j)
	}
	if err := rows.Err(); err != nil {
		return JobPage{}, err
	}
	switch {
	case len(page.Jobs) == p.Limit:
		last := page.Jobs[len(page.Jobs)-1].ID
		page.ScannedFrom = last
		if last > lo.Int64 {
			page.Next = last
		}
	case floor > lo.Int64:
		page.Next, page.Partial = floor, true
	}
	return page, nil
}

// searchSQL is the query of one SearchJobs page: the filter's conditions
// inside the id window, through the primary key.
func searchSQL(where []string) string {
	where = append([]string{"id < :before", "id >= :floor"}, where...)
	return "SELECT " + jobColumns + " FROM lq_jobs WHERE " + strings.Join(where, " AND ") + " ORDER BY id DESC LIMIT :limit"
}

// CountJobs counts the jobs f selects, stopping at limit (0 or less: no
// limit) so that the answer is "at least limit" when it returns limit. A
// state filter counts through an index; a filter by kind or text alone reads
// every row, so call it for a confirmation, not on every page render.
func (q *Queue) CountJobs(ctx context.Context, f JobQuery, limit int) (int, error) {
	where, args, err := queryWhere(f)
	if err != nil {
		return 0, err
	}
	args = append(args, sql.Named("now", unixNanos(q.clock)))
	query := "SELECT 1 FROM lq_jobs"
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	if limit > 0 {
		query += " LIMIT :limit"
		args = append(args, sql.Named("limit", limit))
	}
	var n int
	if err := q.lite.DB().QueryRowContext(ctx, "SELECT count(*) FROM ("+query+")", args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("litequeue: count jobs: %w", err)
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
}

// QueueSummaries returns per-queue counts like Stats, sorted by queue name,
// without reading the whole table: the live jobs (ready, scheduled,
// running) of each queue are counted through the claim index up to limit
// per queue (QueueSummary.Capped says a count stopped there), the dead and
// completed ones through the finished index up to limit in all; the queue
// names come from a skip scan of the claim index. limit 0 or less means
// DefaultCountLimit. The oldest ready job is found exactly, with one index
// seek per priority level.
func (q *Queue) QueueSummaries(ctx context.Context, limit int) ([]QueueSummary, error) {
	if limit <= 0 {
		limit = DefaultCountLimit
	}
	now := unixNanos(q.clock)
	tx, err := q.lite.DB().BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("litequeue: queue summaries: %w", err)
	}
	defer tx.Rollback()
	byName := map[string]*QueueSummary{}
	var names []string
	get := func(name string) *QueueSummary {
		s, ok := byName[name]
		if !ok {
			s = &QueueSummary{Queue: name}
			byName[name] = s
			names = append(names, name)
		}
		return s
	}
	// Live queue names: a loose index scan, one seek per queue.
	var live []string
	for {
		var name sql.NullString
		if err := tx.QueryRowContext(ctx, nextLiveQueueSQL, lastOr(live)).Scan(&name); err != nil {
			return nil, fmt.Errorf("litequeue: queue summaries: %w", err)
		}
		if !name.Valid {
			break
		}
		live = append(live, name.String)
	}
	for _, name := range live {
		s := get(name)
		rows, err := tx.QueryContext(ctx, liveCountSQL, now, name, limit)
		if err != nil {
			return nil, fmt.Errorf("litequeue: queue summaries: %w", err)
		}
		n := 0
		for rows.Next() {
			var state int
			var due bool
			if err := rows.Scan(&state, &due); err != nil {
				rows.Close()
				return nil, err
			}
			n++
			switch {
			case state == 1:
				s.Running++
			case due:
				s.Ready++
			default:
				s.Scheduled++
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		s.Capped = n >= limit
		if err := oldestReady(ctx, tx, s, now); err != nil {
			return nil, err
		}
	}
	for _, st := range []int{2, 3} {
		rows, err := tx.QueryContext(ctx, map[int]string{2: completedCountSQL, 3: deadCountSQL}[st], limit)
		if err != nil {
			return nil, fmt.Errorf("litequeue: queue summaries: %w", err)
		}
		total := 0
		for rows.Next() {
			var name string
			var n int
			if err := rows.Scan(&name, &n); err != nil {
				rows.Close()
				return nil, err
			}
			total += n
			if st == 2 {
				get(name).Completed = n
			} else {
				get(name).Dead = n
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		if total >= limit {
			for _, sum := range byName {
				if st == 2 {
					sum.CompletedCapped = true
				} else {
					sum.DeadCapped = true
				}
			}
		}
	}
	out := make([]QueueSummary, 0, len(names))
	for _, n := range names {
		out = append(out, *byName[n])
	}
	sortSummaries(out)
	return out, nil
}

// The queries of SearchJobs and QueueSummaries (see TestDashboardQueriesUseIndexes).
const (
	idRangeSQL       = `SELECT (SELECT min(id) FROM lq_jobs), (SELECT max(id) FROM lq_jobs)`
	nextLiveQueueSQL = `SELECT min(queue) FROM lq_jobs WHERE state IN (0, 1) AND queue > ?`
	liveCountSQL     = `SELECT state, visible_at <= ? FROM lq_jobs WHERE queue = ? AND state IN (0, 1) LIMIT ?`
	// The states are literals so that the planner sees the partial
	// finished index applies.
	completedCountSQL = `SELECT queue, count(*) FROM
		(SELECT queue FROM lq_jobs INDEXED BY lq_jobs_finished WHERE state IN (2, 3) AND state = 2 ORDER BY finished_at DESC LIMIT ?) GROUP BY queue`
	deadCountSQL = `SELECT queue, count(*) FROM
		(SELECT queue FROM lq_jobs INDEXED BY lq_jobs_finished WHERE state IN (2, 3) AND state = 3 ORDER BY finished_at DESC LIMIT ?) GROUP BY queue`
	firstLivePrioritySQL = `SELECT min(priority) FROM lq_jobs WHERE queue = ? AND state IN (0, 1)`
	nextLivePrioritySQL  = `SELECT min(priority) FROM lq_jobs WHERE queue = ? AND state IN (0, 1) AND priority > ?`
	oldestReadySQL       = `SELECT id, visible_at FROM lq_jobs
		WHERE queue = ? AND state IN (0, 1) AND priority = ? AND visible_at <= ? AND state = 0
		ORDER BY visible_at LIMIT 1`
)

// DefaultCountLimit is the count limit of QueueSummaries.
const DefaultCountLimit = 100_000

func lastOr(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

// oldestReady fills s.OldestReady: for each priority level of the queue (a
// skip scan of the claim index) the earliest due pending row.
func oldestReady(ctx context.Context, tx *sql.Tx, s *QueueSummary, now int64) error {
	var prio sql.NullInt64
	first := true
	for {
		query, args := nextLivePrioritySQL, []any{s.Queue, prio.Int64}
		if first {
			query, args = firstLivePrioritySQL, args[:1]
		}
		first = false
		if err := tx.QueryRowContext(ctx, query, args...).Scan(&prio); err != nil {
			return fmt.Errorf("litequeue: queue summaries: %w", err)
		}
		if !prio.Valid {
			return nil
		}
		var id, visible int64
		err := tx.QueryRowContext(ctx, oldestReadySQL, s.Queue, prio.Int64, now).Scan(&id, &visible)
		if err == sql.ErrNoRows {
			continue
		}
		if err != nil {
			return fmt.Errorf("litequeue: queue summaries: %w", err)
		}
		if age := time.Duration(now - visible); s.OldestReadyID == 0 || age > s.OldestReady {
			s.OldestReady, s.OldestReadyID = age, id
		}
	}
}

func sortSummaries(s []QueueSummary) {
	slices.SortFunc(s, func(a, b QueueSummary) int { return strings.Compare(a.Queue, b.Queue) })
}
