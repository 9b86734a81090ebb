package main

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/litequeue/litequeue"
)

// The growth scenario: -prefill N -prefill-as STATE fills the queue's
// tables with N jobs before the scenario runs, by direct SQL inserts (a
// million rows take seconds where Enqueue would take minutes), so that each
// scenario (A, B, C, D, E, idle) is measured beside them. The queue is
// opened once to create its tables, closed, filled, and opened again, with
// that Open timed (open_ms); Stats is timed once after it (stats_ms).
//
// STATE is what the rows are:
//   - unhandled: due jobs of kind "other" in the queue the workers serve, a
//     kind no handler of the run takes;
//   - pending: due jobs of the benchmark's kind in queue "backlog", which no
//     worker serves;
//   - scheduled: jobs of the benchmark's kind in the served queue, due a
//     year from now;
//   - dead: dead letters with an error and a reason;
//   - completed: retained completed jobs.
//
// The scenario's own checks count the jobs it made: the prefilled ones are
// subtracted (bench.base).
var prefillStates = map[string]bool{"unhandled": true, "pending": true, "scheduled": true, "dead": true, "completed": true}

// prefillChunk is how many rows one INSERT statement (one transaction) adds.
const prefillChunk = 100_000

// prefillPayload is a payload of the benchmark's size (~106 bytes of JSON).
const prefillPayload = `{"id":0,"account":"acct_00000000","email":"user00000000@example.com","action":"welcome","amount":1000}`

// prefillRow returns the SQL expressions of one prefilled row's queue, kind,
// state, visible_at, finished_at, attempt, last_error and dead_reason for
// state as, at now (nanoseconds).
func prefillRow(as string, now int64) (queue, kind string, state int, visible int64, finished any, attempt int, lastErr, reason any) {
	queue, kind, visible = litequeue.DefaultQueue, "bench", now-int64(time.Second)
	switch as {
	case "unhandled":
		kind = "other"
	case "pending":
		queue = "backlog"
	case "scheduled":
		visible = now + int64(365*24*time.Hour)
	case "dead":
		state, finished, attempt = 3, now, 25
		lastErr = "handler: upstream returned 503 Service Unavailable after 30s; giving up on this attempt"
		reason = "exhausted"
	case "completed":
		state, finished, attempt, visible = 2, now, 1, now
	}
	return
}

// prefill adds c.prefill rows of c.prefillAs to the run's tables, through
// db (the queue file, or the run's PostgreSQL database), with placeholders
// written as ph(i). count, when not empty, adds a chunk's rows to the
// store's counts by queue, state and due bucket (parameters 1 to 4),
// in the chunk's transaction, as the store's own writes do.
func prefill(ctx context.Context, db *sql.DB, c *config, ph func(i int) string, series, count string) error {
	now := time.Now().UnixNano()
	queue, kind, state, visible, finished, attempt, lastErr, reason := prefillRow(c.prefillAs, now)
	stmt := fmt.Sprintf(`INSERT INTO lq_jobs (queue, kind, state, priority, visible_at, run_at, created_at, payload,
    finished_at, attempt, last_error, dead_reason)
SELECT %s, %s, %s, 0, %s, %s, %s, %s, %s, %s, %s, %s FROM %s`,
		ph(1), ph(2), ph(3), ph(4), ph(4), ph(5), ph(6), ph(7), ph(8), ph(9), ph(10), fmt.Sprintf(series, ph(11)))
	for done := 0; done < c.prefill; done += prefillChunk {
		n := min(prefillChunk, c.prefill-done)
		if err := prefillTx(ctx, db, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, stmt, queue, kind, state, visible, now, []byte(prefillPayload),
				finished, attempt, lastErr, reason, n); err != nil {
				return err
			}
			if count == "" {
				return nil
			}
			due := int64(0) // the store's due bucket of a pending row (internal/sqlite/counts.go)
			if state == 0 {
				due = visible >> 38
			}
			_, err := tx.ExecContext(ctx, count, queue, state, due, n)
			return err
		}); err != nil {
			return fmt.Errorf("prefill rows %d-%d: %w", done, done+n-1, err)
		}
	}
	return nil
}

// prefillTx runs fn in one transaction of db.
func prefillTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// prefillSQLite fills the queue file at path.
func prefillSQLite(ctx context.Context, path string, c *config) error {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=synchronous(OFF)")
	if err != nil {
		return err
	}
	defer db.Close()
	series := `(WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < %s) SELECT i FROM s)`
	count := `INSERT INTO lq_counts (queue, state, due, n) VALUES (?1, ?2, ?3, ?4) ON CONFLICT (queue, state, due) DO UPDATE SET n = n + excluded.n`
	if err := prefill(ctx, db, c, func(i int) string { return fmt.Sprintf("?%d", i) }, series, count); err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
	return err
}

// prefillPG fills the run's PostgreSQL database, analyzes the table, as
// autovacuum would soon after, and checkpoints.
func prefillPG(ctx context.Context, r *pgRun, c *config) error {
	db, err := sql.Open("pgx", r.url)
	if err != nil {
		return err
	}
	defer db.Close()
	ph := func(i int) string {
		casts := map[int]string{1: "::text", 2: "::text", 3: "::smallint", 4: "::bigint", 5: "::bigint", 6: "::bytea",
			7: "::bigint", 8: "::integer", 9: "::text", 10: "::text", 11: "::integer"}
		return fmt.Sprintf("$%d%s", i, casts[i])
	}
	if err := prefill(ctx, db, c, ph, "generate_series(1, %s)", ""); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, "VACUUM ANALYZE lq_jobs"); err != nil {
		return err
	}
	// The bulk load's dirty pages go to disk now, not during the scenario
	// (a role without the right to CHECKPOINT measures with them pending).
	_, _ = db.ExecContext(ctx, "CHECKPOINT")
	return nil
}

// growth fills the tables (the queue q is closed first) and opens the queue
// again with open, timing that Open and one Stats into res. It returns the
// reopened queue.
func (b *bench) growth(ctx context.Context, res *Result, q *litequeue.Queue, open func() (*litequeue.Queue, error)) (*litequeue.Queue, error) {
	c := b.c
	if err := q.Close(); err != nil {
		return nil, fmt.Errorf("close before prefill: %w", err)
	}
	t0 := time.Now()
	var err error
	if b.pg != nil {
		err = prefillPG(ctx, b.pg, c)
	} else {
		err = prefillSQLite(ctx, b.path, c)
	}
	if err != nil {
		return nil, err
	}
	res.PrefillS = time.Since(t0).Seconds()
	t0 = time.Now()
	q, err = open()
	if err != nil {
		return nil, fmt.Errorf("open after prefill: %w", err)
	}
	res.OpenMs = ms(time.Since(t0))
	b.q = q
	t0 = time.Now()
	queued, running, other, err := b.counts(ctx)
	res.StatsMs = ms(time.Since(t0))
	if err != nil {
		q.Close()
		return nil, err
	}
	b.base = [3]int{queued, running, other}
	if queued+running+other != c.prefill {
		q.Close()
		return nil, fmt.Errorf("prefill of %d rows: Stats counts %d", c.prefill, queued+running+other)
	}
	return q, nil
}
