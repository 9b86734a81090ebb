package postgres

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/litequeue/litequeue/internal/sqlitefile"
)

// Backup implements store.Backuper: it writes the queue's tables, as one
// consistent snapshot (a REPEATABLE READ, READ ONLY transaction), to a new
// queue file at path. Every job committed before Backup began is in the
// copy with its id, state, attempts, due time, lease, key, history, progress,
// output, tags and metadata; so are the paused queues, the schedules with
// their bounds and history
// and the dashboard's per-minute counts. New ids in the copy continue after
// the largest PostgreSQL has handed out (after the largest any copied row
// names, for a role that may not read the id sequence). Workers and
// enqueues go on meanwhile: it only reads, holding one snapshot for the
// copy's duration (as pg_dump does), about a second per hundred thousand
// jobs.
//
// The copy is a queue file like any other: litequeue.Open runs it on one
// machine, and MoveFile (lqinspect migrate) restores it into a PostgreSQL
// schema. The file's guarantees are those of the SQLite Backup: it refuses
// an existing path (fs.ErrExist) and never leaves a partial copy.
func (s *pgStore) Backup(ctx context.Context, path string) error {
	return sqlitefile.WriteCopy(ctx, path, func(ctx context.Context, dst *sql.Tx) error {
		src, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
		if err != nil {
			return err
		}
		defer src.Rollback()
		for _, t := range backupTables {
			if err := copyRows(ctx, src, dst, s.q(t.read), t.write); err != nil {
				return fmt.Errorf("copy %s: %w", t.name, err)
			}
		}
		// Ids handed out for rows deleted since are not reused in the copy.
		var last int64
		if err := src.QueryRowContext(ctx, s.q(lastJobIDSQL), quoteIdent(s.schema)+".lq_jobs").Scan(&last); err != nil {
			return err
		}
		if _, err := dst.ExecContext(ctx, `UPDATE sqlite_sequence SET seq = max(seq, ?1) WHERE name = 'lq_jobs'`, last); err != nil {
			return err
		}
		_, err = dst.ExecContext(ctx, `INSERT INTO sqlite_sequence (name, seq) SELECT 'lq_jobs', ?1
			WHERE ?1 > 0 AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'lq_jobs')`, last)
		return err
	})
}

// lastJobIDSQL reads the largest job id PostgreSQL has handed out: the id
// sequence's last value where the role may read the sequence (pg_sequences
// shows NULL otherwise, where pg_sequence_last_value would fail: a role
// granted only the tables' rows inserts through the identity column without
// any right on its sequence), and at least every id a row still names — a
// job, a schedule's last job, a schedule event's job — so that the copy
// never gives a new job an id the copied rows mean another job by.
const lastJobIDSQL = `SELECT greatest(
    (SELECT last_value FROM pg_sequences WHERE format('%I.%I', schemaname, sequencename) = pg_get_serial_sequence($1, 'id')),
    (SELECT max(id) FROM lq_jobs), (SELECT max(last_job) FROM lq_schedules), (SELECT max(job_id) FROM lq_schedule_events), 0)`

// backupTables says how each table is read from PostgreSQL and written to
// the queue file, in an order that satisfies the file's foreign keys.
var backupTables = []struct{ name, read, write string }{
	{"jobs",
		`SELECT id, queue, kind, state, priority, visible_at, attempt, payload, idem_key, lease, created_at, run_at,
			attempted_at, finished_at, last_error, dead_reason, due_at, snoozes, progress, progress_msg, progress_at,
			output, unique_key, unique_states, meta::text, waits, process
		FROM lq_jobs ORDER BY id`,
		`INSERT INTO lq_jobs (id, queue, kind, state, priority, visible_at, attempt, payload, idem_key, lease, created_at, run_at,
			attempted_at, finished_at, last_error, dead_reason, due_at, snoozes, progress, progress_msg, progress_at,
			output, unique_key, unique_states, meta, waits, process)
		VALUES (?, ?, ?, ?, ?, ?, ?, coalesce(?, x''), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
	// Workflow dependencies (migration 0006), with the parents' outputs.
	{"workflow dependencies",
		`SELECT child, parent, mode, done, output FROM lq_deps ORDER BY child, parent`,
		`INSERT INTO lq_deps (child, parent, mode, done, output) VALUES (?, ?, ?, ?, ?)`},
	// The file indexes each job's tags in a table of their own.
	{"job tags",
		`SELECT DISTINCT t.tag, j.id FROM lq_jobs j CROSS JOIN LATERAL jsonb_array_elements_text(j.meta -> 'tags') AS t(tag)
		WHERE j.meta IS NOT NULL AND jsonb_typeof(j.meta -> 'tags') = 'array'`,
		`INSERT INTO lq_job_tags (tag, job_id) VALUES (?, ?)`},
	// Attempt records outlive no job on PostgreSQL; any that did would
	// break the file's foreign key, so only those of copied jobs come.
	{"attempt history",
		`SELECT a.id, a.job_id, a.attempt, a.started_at, a.finished_at, a.error, a.decision, a.delay, a.process, a.host, a.pid
		FROM lq_attempts a WHERE EXISTS (SELECT 1 FROM lq_jobs j WHERE j.id = a.job_id) ORDER BY a.id`,
		`INSERT INTO lq_attempts (id, job_id, attempt, started_at, finished_at, error, decision, delay, process, host, pid)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
	{"paused queues",
		`SELECT queue, paused_at FROM lq_queues ORDER BY queue`,
		`INSERT INTO lq_queues (queue, paused_at) VALUES (?, ?)`},
	{"schedules",
		`SELECT name, cron, every, anchor, tz, queue, kind, payload, priority, missed, catch_up, overlap, grace,
			paused::int, waiting::int, next_at, revision, last_at, last_job, missed_count, created_at, updated_at, uniq,
			end_at, max_runs, run_count, run_first::int
		FROM lq_schedules ORDER BY name`,
		`INSERT INTO lq_schedules (name, cron, every, anchor, tz, queue, kind, payload, priority, missed, catch_up, overlap, grace,
			paused, waiting, next_at, revision, last_at, last_job, missed_count, created_at, updated_at, uniq,
			end_at, max_runs, run_count, run_first)
		VALUES (?, ?, ?, ?, ?, ?, ?, coalesce(?, x''), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
	{"schedule history",
		`SELECT id, schedule, at, event, occurrence, last, job_id, count, detail FROM lq_schedule_events ORDER BY id`,
		`INSERT INTO lq_schedule_events (id, schedule, at, event, occurrence, last, job_id, count, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`},
	{"history",
		`SELECT queue, minute, enqueued, succeeded, retried, dead FROM lq_history ORDER BY queue, minute`,
		`INSERT INTO lq_history (queue, minute, enqueued, succeeded, retried, dead) VALUES (?, ?, ?, ?, ?, ?)`},
}

// copyRows inserts every row read by query on src with insert on dst.
func copyRows(ctx context.Context, src, dst *sql.Tx, query, insert string) error {
	rows, err := src.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	stmt, err := dst.PrepareContext(ctx, insert)
	if err != nil {
		return err
	}
	defer stmt.Close()
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		if _, err := stmt.ExecContext(ctx, vals...); err != nil {
			return err
		}
	}
	return rows.Err()
}
