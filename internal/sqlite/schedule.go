package sqlite

import (
	"context"
	"strings"

	"github.com/litequeue/litequeue/internal/sqlitefile"
	"github.com/litequeue/litequeue/internal/sqlkit"
	"github.com/litequeue/litequeue/internal/store"
)

// The SQL of durable schedules (store.Schedules): tables lq_schedules
// and lq_schedule_events (migration 0004). The writes' logic is shared with
// the PostgreSQL store (sqlkit.ScheduleSQL); these are SQLite's statements.

// write runs fn in the writer's next transaction, with the write errors
// classified.
func (st *Store) write(ctx context.Context, fn func(ctx context.Context, tx Execer) error) error {
	if st.w == nil {
		return store.ErrReadOnly
	}
	return sqlitefile.ClassifyWriteError(st.w.do(ctx, fn))
}

var scheduleSQL = &sqlkit.ScheduleSQL{
	Select: `SELECT ` + sqlkit.ScheduleColumns + ` FROM lq_schedules s WHERE s.name = ?1`,
	Insert: `INSERT INTO lq_schedules (name, cron, every, anchor, tz, queue, kind, payload, priority,
		missed, catch_up, overlap, grace, next_at, created_at, updated_at, uniq, end_at, max_runs, run_first)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?15, ?16, ?17, ?18, ?19)`,
	Update: `UPDATE lq_schedules SET cron = ?2, every = ?3, anchor = ?4, tz = ?5, queue = ?6, kind = ?7,
		payload = ?8, priority = ?9, missed = ?10, catch_up = ?11, overlap = ?12, grace = ?13, next_at = ?14, waiting = 0,
		revision = revision + 1, updated_at = ?15, uniq = ?16, end_at = ?17, max_runs = ?18, run_first = ?19
		WHERE name = ?1`,
	Delete:       `DELETE FROM lq_schedules WHERE name = ?1`,
	DeleteEvents: `DELETE FROM lq_schedule_events WHERE schedule = ?1`,
	SelectPaused: `SELECT paused FROM lq_schedules WHERE name = ?1`,
	Pause:        `UPDATE lq_schedules SET paused = 1, revision = revision + 1 WHERE name = ?1`,
	Resume:       `UPDATE lq_schedules SET paused = 0, waiting = 0, next_at = ?2, revision = revision + 1 WHERE name = ?1`,
	// The writer's transaction is BEGIN IMMEDIATE: the row needs no lock.
	FireState: `SELECT next_at, revision, paused, waiting FROM lq_schedules WHERE name = ?1`,
	// A range on the unique index of live keys.
	LiveJob:    `SELECT EXISTS (SELECT 1 FROM lq_jobs WHERE idem_key >= ?1 AND idem_key < ?2 AND state IN (0, 1))`,
	SetWaiting: `UPDATE lq_schedules SET waiting = 1 WHERE name = ?1`,
	Fired: `UPDATE lq_schedules SET next_at = ?2, waiting = 0, missed_count = missed_count + ?3, run_count = run_count + ?6,
		last_at = CASE WHEN ?4 = 0 THEN last_at ELSE ?5 END, last_job = CASE WHEN ?4 = 0 THEN last_job ELSE ?4 END
		WHERE name = ?1`,
	Triggered: `UPDATE lq_schedules SET last_at = ?2, last_job = ?3 WHERE name = ?1`,
	AddEvent: `INSERT INTO lq_schedule_events (schedule, at, event, occurrence, last, job_id, count, detail)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)`,
	TrimEvents: `DELETE FROM lq_schedule_events WHERE schedule = ?1 AND id <=
		(SELECT id FROM lq_schedule_events WHERE schedule = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)`,
}

// scheduleTx is the writer's transaction as sqlkit.ScheduleSQL uses it.
type scheduleTx struct{ Execer }

func (t scheduleTx) InsertJobs(ctx context.Context, jobs []store.NewJob) ([]int64, []error, error) {
	return insertBatch(ctx, t.Execer, jobs)
}

func (st *Store) UpsertSchedule(ctx context.Context, def store.Schedule, now int64, detail string) (*store.Schedule, store.ScheduleChange, error) {
	var prev *store.Schedule
	var change store.ScheduleChange
	err := st.write(ctx, func(ctx context.Context, tx Execer) error {
		var err error
		prev, change, err = scheduleSQL.Upsert(ctx, scheduleTx{tx}, def, now, detail)
		return err
	})
	if err != nil {
		return nil, store.ScheduleUnchanged, err
	}
	return prev, change, nil
}

func (st *Store) RemoveSchedule(ctx context.Context, name string) error {
	return st.write(ctx, func(ctx context.Context, tx Execer) error {
		return scheduleSQL.Remove(ctx, scheduleTx{tx}, name)
	})
}

func (st *Store) PauseSchedule(ctx context.Context, name string, paused bool, next, now int64) error {
	return st.write(ctx, func(ctx context.Context, tx Execer) error {
		return scheduleSQL.SetPaused(ctx, scheduleTx{tx}, name, paused, next, now)
	})
}

func (st *Store) Schedules(ctx context.Context, name string) ([]store.Schedule, error) {
	columns := sqlkit.ScheduleColumns
	if st.w == nil {
		// A read-only open does not migrate: a file older than schema 8
		// has no uniq column (its schedules have no uniqueness).
		v, err := st.Version(ctx)
		if err != nil {
			return nil, err
		}
		if v < 8 {
			columns = strings.Replace(columns, "s.uniq", "NULL", 1)
		}
		if v < metaVersion {
			// Nor the bounds of migration 0011.
			columns = strings.Replace(columns, "s.end_at, s.max_runs, s.run_count, s.run_first", "0, 0, 0, 0", 1)
		}
	}
	query := `SELECT ` + columns + `, CASE WHEN s.last_job IS NULL THEN -1 ELSE coalesce(j.state, -2) END
		FROM lq_schedules s LEFT JOIN lq_jobs j ON j.id = s.last_job`
	var args []any
	if name != "" {
		query += ` WHERE s.name = ?`
		args = append(args, name)
	}
	return sqlkit.QueryAll(ctx, st.db, query+` ORDER BY s.name`, args, sqlkit.ScanScheduleWithLast)
}

func (st *Store) FireSchedule(ctx context.Context, f store.Firing) (store.FireResult, error) {
	var res store.FireResult
	err := st.write(ctx, func(ctx context.Context, tx Execer) error {
		var err error
		res, err = scheduleSQL.Fire(ctx, scheduleTx{tx}, f)
		return err
	})
	if err != nil {
		return store.FireResult{}, err
	}
	return res, nil
}

func (st *Store) TriggerSchedule(ctx context.Context, name string, now int64, unique func(*store.Schedule, *store.NewJob) error) (id int64, queue, kind string, err error) {
	var dup error
	err = st.write(ctx, func(ctx context.Context, tx Execer) error {
		id, queue, kind, dup, err = scheduleSQL.Trigger(ctx, scheduleTx{tx}, name, now, unique)
		return err
	})
	if err != nil {
		return 0, "", "", err
	}
	return id, queue, kind, dup
}

func (st *Store) ScheduleHistory(ctx context.Context, name string, limit int) ([]store.ScheduleEvent, error) {
	if limit <= 0 {
		limit = store.ScheduleHistoryKeep
	}
	return sqlkit.QueryAll(ctx, st.db, `SELECT id, at, event, coalesce(occurrence, 0), coalesce(last, 0), coalesce(job_id, 0), count, detail
		FROM lq_schedule_events WHERE schedule = ? ORDER BY id DESC LIMIT ?`, []any{name, limit}, sqlkit.ScanScheduleEvent)
}
