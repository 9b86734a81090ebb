package postgres

import (
	"context"
	"database/sql"

	"github.com/litequeue/litequeue/internal/sqlkit"
	"github.com/litequeue/litequeue/internal/store"
)

// Durable schedules (store.Schedules) in lq_schedules and
// lq_schedule_events. Every write to a schedule runs in one transaction that
// first takes a transaction-level advisory lock on the schedule's name, so
// processes racing on one schedule (two registrations, two firings of one
// occurrence) run one after the other, and the second sees the first's
// result.

// scheduleTx runs fn in a transaction holding the lock of schedule name.
func (s *pgStore) scheduleTx(ctx context.Context, name string, fn func(tx *sql.Tx) error) error {
	if err := s.writable(); err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('litequeue schedule ' || $1::text || ' ' || $2::text, 0))`, s.schema, name); err != nil {
			return err
		}
		return fn(tx)
	})
}

var scheduleSQL = &sqlkit.ScheduleSQL{
	Select: `SELECT ` + sqlkit.ScheduleColumns + ` FROM lq_schedules s WHERE s.name = $1`,
	Insert: `INSERT INTO lq_schedules (name, cron, every, anchor, tz, queue, kind, payload, priority,
		missed, catch_up, overlap, grace, next_at, created_at, updated_at, uniq, end_at, max_runs, run_first)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $15, $16, $17, $18, $19)`,
	Update: `UPDATE lq_schedules SET cron = $2, every = $3, anchor = $4, tz = $5, queue = $6, kind = $7,
		payload = $8, priority = $9, missed = $10, catch_up = $11, overlap = $12, grace = $13, next_at = $14, waiting = false,
		revision = revision + 1, updated_at = $15, uniq = $16, end_at = $17, max_runs = $18, run_first = $19
		WHERE name = $1`,
	Delete:       `DELETE FROM lq_schedules WHERE name = $1`,
	DeleteEvents: `DELETE FROM lq_schedule_events WHERE schedule = $1`,
	SelectPaused: `SELECT paused FROM lq_schedules WHERE name = $1`,
	Pause:        `UPDATE lq_schedules SET paused = true, revision = revision + 1 WHERE name = $1`,
	Resume:       `UPDATE lq_schedules SET paused = false, waiting = false, next_at = $2, revision = revision + 1 WHERE name = $1`,
	FireState:    `SELECT next_at, revision, paused, waiting FROM lq_schedules WHERE name = $1 FOR UPDATE`,
	// Keys compare bytewise: the column's collation is "C".
	LiveJob:    `SELECT EXISTS (SELECT 1 FROM lq_jobs WHERE idem_key >= $1 AND idem_key < $2 AND state IN (0, 1))`,
	SetWaiting: `UPDATE lq_schedules SET waiting = true WHERE name = $1`,
	Fired: `UPDATE lq_schedules SET next_at = $2, waiting = false, missed_count = missed_count + $3, run_count = run_count + $6,
		last_at = CASE WHEN $4::bigint = 0 THEN last_at ELSE $5::bigint END,
		last_job = CASE WHEN $4::bigint = 0 THEN last_job ELSE $4::bigint END
		WHERE name = $1`,
	Triggered: `UPDATE lq_schedules SET last_at = $2, last_job = $3 WHERE name = $1`,
	AddEvent: `INSERT INTO lq_schedule_events (schedule, at, event, occurrence, last, job_id, count, detail)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
	TrimEvents: `DELETE FROM lq_schedule_events WHERE schedule = $1 AND id <=
		(SELECT id FROM lq_schedule_events WHERE schedule = $1 ORDER BY id DESC LIMIT 1 OFFSET $2)`,
}

// scheduleTx is a transaction holding a schedule's lock, as sqlkit.ScheduleSQL
// uses it: every statement is qualified with the store's schema.
type scheduleTx struct {
	s  *pgStore
	tx *sql.Tx
}

func (t scheduleTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, t.s.q(query), args...)
}

func (t scheduleTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, t.s.q(query), args...)
}

// InsertJobs inserts as Insert on a caller's transaction does: unique jobs
// one at a time.
func (t scheduleTx) InsertJobs(ctx context.Context, jobs []store.NewJob) ([]int64, []error, error) {
	if slowPath(jobs) {
		return t.s.insertEach(ctx, t.tx, jobs)
	}
	return t.s.insertTx(ctx, t.tx, jobs)
}

// UpsertSchedule implements store.Schedules.
func (s *pgStore) UpsertSchedule(ctx context.Context, def store.Schedule, now int64, detail string) (*store.Schedule, store.ScheduleChange, error) {
	var prev *store.Schedule
	var change store.ScheduleChange
	err := s.scheduleTx(ctx, def.Name, func(tx *sql.Tx) error {
		var err error
		prev, change, err = scheduleSQL.Upsert(ctx, scheduleTx{s, tx}, def, now, detail)
		return err
	})
	if err != nil {
		return nil, store.ScheduleUnchanged, err
	}
	return prev, change, nil
}

// RemoveSchedule implements store.Schedules.
func (s *pgStore) RemoveSchedule(ctx context.Context, name string) error {
	return s.scheduleTx(ctx, name, func(tx *sql.Tx) error {
		return scheduleSQL.Remove(ctx, scheduleTx{s, tx}, name)
	})
}

// PauseSchedule implements store.Schedules.
func (s *pgStore) PauseSchedule(ctx context.Context, name string, paused bool, next, now int64) error {
	return s.scheduleTx(ctx, name, func(tx *sql.Tx) error {
		return scheduleSQL.SetPaused(ctx, scheduleTx{s, tx}, name, paused, next, now)
	})
}

// Schedules implements store.Schedules.
func (s *pgStore) Schedules(ctx context.Context, name string) ([]store.Schedule, error) {
	query := `SELECT ` + sqlkit.ScheduleColumns + `, CASE WHEN s.last_job IS NULL THEN -1 ELSE coalesce(j.state, -2) END
		FROM lq_schedules s LEFT JOIN lq_jobs j ON j.id = s.last_job `
	var a args
	if name != "" {
		query += ` WHERE s.name = ` + a.add(name)
	}
	return readAll(s, ctx, s.q(query+` ORDER BY s.name`), a, sqlkit.ScanScheduleWithLast)
}

// FireSchedule implements store.Schedules.
func (s *pgStore) FireSchedule(ctx context.Context, f store.Firing) (store.FireResult, error) {
	var res store.FireResult
	err := s.scheduleTx(ctx, f.Name, func(tx *sql.Tx) error {
		var err error
		res, err = scheduleSQL.Fire(ctx, scheduleTx{s, tx}, f)
		return err
	})
	if err != nil {
		return store.FireResult{}, err
	}
	return res, nil
}

// TriggerSchedule implements store.Schedules.
func (s *pgStore) TriggerSchedule(ctx context.Context, name string, now int64, unique func(*store.Schedule, *store.NewJob) error) (id int64, queue, kind string, err error) {
	var dup error
	err = s.scheduleTx(ctx, name, func(tx *sql.Tx) error {
		id, queue, kind, dup, err = scheduleSQL.Trigger(ctx, scheduleTx{s, tx}, name, now, unique)
		return err
	})
	if err != nil {
		return 0, "", "", err
	}
	return id, queue, kind, dup
}

// ScheduleHistory implements store.Schedules.
func (s *pgStore) ScheduleHistory(ctx context.Context, name string, limit int) ([]store.ScheduleEvent, error) {
	if limit <= 0 {
		limit = store.ScheduleHistoryKeep
	}
	return readAll(s, ctx, s.q(`SELECT id, at, event, coalesce(occurrence, 0), coalesce(last, 0), coalesce(job_id, 0), count, detail
		FROM lq_schedule_events WHERE schedule = $1 ORDER BY id DESC LIMIT $2`), []any{name, limit}, sqlkit.ScanScheduleEvent)
}
