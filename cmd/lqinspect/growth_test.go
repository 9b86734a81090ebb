//go:build !race

// The race detector makes modernc.org/sqlite some 50 times slower: the
// fill alone would take minutes. CI runs this test in a step of its own,
// without -race (.ci/run, "growth smoke").

package main

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// growthRows is how many rows of each state TestReadsStayBoundedBesideAHundredThousandJobsOfEachState
// adds: due jobs of a kind nobody handles, jobs scheduled a year ahead, dead
// letters, retained completed jobs and cancelled jobs. LQ_GROWTH_ROWS sets
// another count, for the same checks on larger files by hand (200000 makes
// a file of a million jobs); CI uses the default.
var growthRows = 100_000

func init() {
	if n, err := strconv.Atoi(os.Getenv("LQ_GROWTH_ROWS")); err == nil && n >= 1000 {
		growthRows = n
	}
}

// growthBound is the regression guard of each read: generous, so that a
// loaded machine passes, and far below what a read that walks the file's
// half a million rows, or a claim that steps over the unhandled ones one
// job at a time, takes. LQ_GROWTH_TIMES set lifts it, to log the times of
// a larger file (LQ_GROWTH_ROWS) without failing on them.
var growthBound = time.Second

// growthFile fills a new queue file with growthRows rows of each of five
// states in queue "default", by direct SQL (the bench's way: minutes of
// Enqueue in a second), counts them as the store's migration does, and
// returns its path and the ids of its first dead letter and its last row.
func growthFile(t *testing.T) (path string, dead, last int64) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "growth.db")
	q, err := litequeue.Open(path, &litequeue.Options{PollInterval: -1})
	require.NoError(t, err)
	require.NoError(t, q.Close())
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=synchronous(OFF)")
	require.NoError(t, err)
	defer db.Close()
	now := fixtureNow.UnixNano()
	// Row i's state is i % 5: 0 due "other" jobs, 1 scheduled "ping" jobs
	// a year ahead, 2 completed, 3 dead (with an error and a reason), 4
	// cancelled.
	_, err = db.Exec(`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ?2 * 5 - 1)
		INSERT INTO lq_jobs (queue, kind, state, priority, visible_at, attempt, payload, created_at, run_at,
			finished_at, last_error, dead_reason)
		SELECT 'default', iif(i % 5 = 0, 'other', 'ping'), iif(i % 5 = 1, 0, i % 5), 0,
			iif(i % 5 = 1, ?1 + 365 * 86400000000000, ?1 - i * 1000), iif(i % 5 < 2, 0, 1),
			CAST('{"n":' || i || '}' AS BLOB), ?1 - i * 1000, ?1 - i * 1000,
			iif(i % 5 < 2, NULL, ?1 - i), iif(i % 5 = 3, 'upstream returned 503 ' || (i % 7), NULL),
			iif(i % 5 = 3, 'exhausted', NULL)
		FROM n`, now, growthRows)
	require.NoError(t, err)
	_, err = db.Exec(`DELETE FROM lq_counts; INSERT INTO lq_counts (queue, state, due, n)
		SELECT queue, state, CASE WHEN state = 0 THEN visible_at >> 38 ELSE 0 END, count(*) FROM lq_jobs GROUP BY 1, 2, 3`)
	require.NoError(t, err)
	require.NoError(t, db.QueryRow(`SELECT min(id) FROM lq_jobs WHERE state = 3`).Scan(&dead))
	require.NoError(t, db.QueryRow(`SELECT max(id) FROM lq_jobs`).Scan(&last))
	return path, dead, last
}

// within runs read and fails the test if it took longer than growthBound.
func within(t *testing.T, what string, read func()) {
	t.Helper()
	t0 := time.Now()
	read()
	took := time.Since(t0)
	t.Logf("%s: %v", what, took.Round(10*time.Microsecond))
	require.Less(t, took, growthBound, "%s took %v beside %d jobs of each state", what, took, growthRows)
}

// With 100,000 jobs of each state in the file (due ones of a kind no
// process handles, scheduled, completed, dead, cancelled), Open, Stats, the
// first and a deep page of jobs, the dead-letter groups and every read
// command of lqinspect each answer within growthBound, and a queue that
// handles another kind drains its jobs — 200 claims of one job each —
// within it too: a regression guard of what the file's size must not
// reach, not a benchmark (see docs/performance.md for the figures).
func TestReadsStayBoundedBesideAHundredThousandJobsOfEachState(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a file of half a million jobs (about 2 s)")
	}
	if os.Getenv("LQ_GROWTH_TIMES") != "" {
		growthBound = time.Hour // report the times only
	}
	t0 := time.Now()
	path, dead, last := growthFile(t)
	t.Logf("filled %d rows in %v", 5*growthRows, time.Since(t0).Round(time.Millisecond))
	ctx := context.Background()

	var q *litequeue.Queue
	within(t, "Open", func() {
		var err error
		q, err = litequeue.Open(path, &litequeue.Options{PollInterval: -1, Durability: litequeue.DurabilityProcess,
			ClaimBatch: 1, Queues: []litequeue.QueueConfig{{Name: litequeue.DefaultQueue, Concurrency: 1}}})
		require.NoError(t, err)
	})
	t.Cleanup(func() { require.NoError(t, q.Close()) })
	within(t, "Stats", func() {
		st, err := q.Stats(ctx)
		require.NoError(t, err)
		require.Len(t, st, 1)
		require.Equal(t, growthRows, st[0].Ready)
		require.Equal(t, growthRows, st[0].Dead)
	})
	within(t, "ListJobs, first page", func() {
		p, err := q.ListJobs(ctx, litequeue.JobQuery{}, litequeue.PageRequest{})
		require.NoError(t, err)
		require.Len(t, p.Jobs, litequeue.DefaultPageLimit)
	})
	within(t, "ListJobs, a deep page of dead letters", func() {
		p, err := q.ListJobs(ctx, litequeue.JobQuery{States: []litequeue.State{litequeue.StateDead}},
			litequeue.PageRequest{Before: dead + 5*litequeue.DefaultPageLimit + 1})
		require.NoError(t, err)
		require.NotEmpty(t, p.Jobs)
	})
	deep := strconv.Itoa(growthRows * 9 / 10)
	within(t, "Jobs, a page of dead letters at offset "+deep, func() {
		js, err := q.Jobs(ctx, litequeue.JobFilter{States: []litequeue.State{litequeue.StateDead}, Limit: 50, Offset: growthRows * 9 / 10})
		require.NoError(t, err)
		require.Len(t, js, 50)
	})
	within(t, "GroupDeadLetters", func() {
		gs, err := q.GroupDeadLetters(ctx, litequeue.JobQuery{}, litequeue.GroupLimits{})
		require.NoError(t, err)
		require.NotEmpty(t, gs)
	})

	// A cursor in the middle of the file: deep pages are read by cursor
	// (--offset stops at 10,000).
	middle := strconv.FormatInt(dead+int64(growthRows)*5/2, 10)
	for _, args := range [][]string{
		{"stats", path},
		{"stats", path, "--queue", "default"},
		// jobs and dead print every match unless --limit says otherwise:
		// the guard is on a page of them.
		{"jobs", path, "--limit", "50"},
		{"jobs", path, "--state", "dead", "--after", middle, "--limit", "50"},
		{"jobs", path, "--kind", "ping", "--state", "scheduled", "--limit", "50"},
		{"dead", path, "--limit", "50"},
		{"dead", path, "--after", middle, "--limit", "50"},
		{"jobs", path, "--order", "next-due", "--after", strconv.FormatInt(fixtureNow.UnixNano(), 10) + ":0:" + middle},
		{"show", path, strconv.FormatInt(dead, 10)},
		{"show", path, strconv.FormatInt(last, 10)},
		{"schedules", path},
	} {
		within(t, "lqinspect "+args[0]+" "+joinArgs(args[2:]), func() {
			r := lq(t, "", args...)
			require.Equal(t, exitOK, r.code, "%v: %s", args, r.stderr)
		})
	}

	done := make(chan struct{}, 200)
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[Ping]) error {
		done <- struct{}{}
		return nil
	})
	items := make([]litequeue.BatchItem, cap(done))
	for i := range items {
		items[i] = litequeue.BatchItem{Job: Ping{}}
	}
	_, err := q.EnqueueBatch(ctx, items)
	require.NoError(t, err)
	within(t, "a drain of 200 handled jobs, one claim each, beside the unhandled ones", func() {
		require.NoError(t, q.Start(ctx))
		deadline := time.After(10 * growthBound)
		for range cap(done) {
			select {
			case <-done:
			case <-deadline:
				t.Fatal("the drain did not finish")
			}
		}
	})
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, q.Stop(sctx))
}

func joinArgs(args []string) string {
	s := ""
	for i, a := range args {
		if i > 0 {
			s += " "
		}
		s += a
	}
	return s
}
