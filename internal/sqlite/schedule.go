package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/litequeue/litequeue/internal/store"
)

// The SQL of durable schedules (store.ScheduleStore): tables lq_schedules
// and lq_schedule_events (migration 0004).

// write runs fn in the writer's next transaction, with the write errors
// classified.
func (st *Store) write(ctx context.Context, fn func(ctx context.Context, tx Execer) error) error {
	if st.w == nil {
		return store.ErrReadOnly
	}
	return classifyWriteError(st.w.do(ctx, fn))
}

const scheduleColumns = `s.name, s.cron, s.every, s.anchor, s.tz, s.queue, s.kind, s.payload, s.priority,
	s.missed, s.catch_up, s.overlap, s.grace, s.paused, s.waiting, s.next_at, s.revision,
	coalesce(s.last_at, 0), coalesce(s.last_job, 0), s.missed_count, s.created_at, s.updated_at`

func scanSchedule(sc interface{ Scan(...any) error }, extra ...any) (store.Schedule, error) {
	var s store.Schedule
	args := []any{&s.Name, &s.Cron, &s.Every, &s.Anchor, &s.TZ, &s.Queue, &s.Kind, &s.Payload, &s.Priority,
		&s.Missed, &s.CatchUp, &s.Overlap, &s.Grace, &s.Paused, &s.Waiting, &s.NextAt, &s.Revision,
		&s.LastAt, &s.LastJob, &s.MissedCount, &s.CreatedAt, &s.UpdatedAt}
	err := sc.Scan(append(args, extra...)...)
	return s, err
}

func addScheduleEvent(ctx context.Context, tx Execer, name string, at int64, event string, occ, last, job, count int64, detail string) error {
	nz := func(v int64) any {
		if v == 0 {
			return nil
		}
		return v
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO lq_schedule_events (schedule, at, event, occurrence, last, job_id, count, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, name, at, event, nz(occ), nz(last), nz(job), count, detail); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM lq_schedule_events WHERE schedule = ? AND id <=
		(SELECT id FROM lq_schedule_events WHERE schedule = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`, name, name, store.ScheduleHistoryKeep)
	return err
}

func (st *Store) UpsertSchedule(ctx context.Context, def store.Schedule, now int64, detail string) (*store.Schedule, store.ScheduleChange, error) {
	var prev *store.Schedule
	change := store.ScheduleUnchanged
	err := st.write(ctx, func(ctx context.Context, tx Execer) error {
		prev, change = nil, store.ScheduleUnchanged
		old, err := scanSchedule(tx.QueryRowContext(ctx, `SELECT `+scheduleColumns+` FROM lq_schedules s WHERE s.name = ?`, def.Name))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			_, err = tx.ExecContext(ctx, `INSERT INTO lq_schedules (name, cron, every, anchor, tz, queue, kind, payload, priority,
				missed, catch_up, overlap, grace, next_at, created_at, updated_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				def.Name, def.Cron, def.Every, def.Anchor, def.TZ, def.Queue, def.Kind, def.Payload, def.Priority,
				def.Missed, def.CatchUp, def.Overlap, def.Grace, def.NextAt, now, now)
			if err != nil {
				return err
			}
			change = store.ScheduleCreated
			return addScheduleEvent(ctx, tx, def.Name, now, "registered", 0, 0, 0, 0, detail)
		case err != nil:
			return err
		}
		prev = &old
		if old.SameDefinition(&def) {
			return nil
		}
		next, anchor := old.NextAt, old.Anchor
		if !old.SameTiming(&def) {
			next, anchor = def.NextAt, def.Anchor
		}
		_, err = tx.ExecContext(ctx, `UPDATE lq_schedules SET cron = ?, every = ?, anchor = ?, tz = ?, queue = ?, kind = ?,
			payload = ?, priority = ?, missed = ?, catch_up = ?, overlap = ?, grace = ?, next_at = ?, waiting = 0,
			revision = revision + 1, updated_at = ? WHERE name = ?`,
			def.Cron, def.Every, anchor, def.TZ, def.Queue, def.Kind, def.Payload, def.Priority,
			def.Missed, def.CatchUp, def.Overlap, def.Grace, next, now, def.Name)
		if err != nil {
			return err
		}
		change = store.ScheduleUpdated
		return addScheduleEvent(ctx, tx, def.Name, now, "updated", 0, 0, 0, 0, detail)
	})
	return prev, change, err
}

func (st *Store) RemoveSchedule(ctx context.Context, name string) error {
	return st.write(ctx, func(ctx context.Context, tx Execer) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM lq_schedules WHERE name = ?`, name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("%w: %q", store.ErrScheduleNotFound, name)
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM lq_schedule_events WHERE schedule = ?`, name)
		return err
	})
}

func (st *Store) PauseSchedule(ctx context.Context, name string, paused bool, next, now int64) error {
	return st.write(ctx, func(ctx context.Context, tx Execer) error {
		var was bool
		err := tx.QueryRowContext(ctx, `SELECT paused FROM lq_schedules WHERE name = ?`, name).Scan(&was)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %q", store.ErrScheduleNotFound, name)
		}
		if err != nil || was == paused {
			return err
		}
		event := "paused"
		if paused {
			_, err = tx.ExecContext(ctx, `UPDATE lq_schedules SET paused = 1, revision = revision + 1 WHERE name = ?`, name)
		} else {
			event = "resumed"
			_, err = tx.ExecContext(ctx, `UPDATE lq_schedules SET paused = 0, waiting = 0, next_at = ?, revision = revision + 1 WHERE name = ?`, next, name)
		}
		if err != nil {
			return err
		}
		return addScheduleEvent(ctx, tx, name, now, event, 0, 0, 0, 0, "")
	})
}

func (st *Store) Schedules(ctx context.Context, name string) ([]store.Schedule, error) {
	query := `SELECT ` + scheduleColumns + `, CASE WHEN s.last_job IS NULL THEN -1 ELSE coalesce(j.state, -2) END
		FROM lq_schedules s LEFT JOIN lq_jobs j ON j.id = s.last_job`
	var args []any
	if name != "" {
		query += ` WHERE s.name = ?`
		args = append(args, name)
	}
	rows, err := st.db.QueryContext(ctx, query+` ORDER BY s.name`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Schedule
	for rows.Next() {
		var last int
		s, err := scanSchedule(rows, &last)
		if err != nil {
			return nil, err
		}
		s.LastState = last
		out = append(out, s)
	}
	return out, rows.Err()
}

// liveScheduleJobSQL finds a live job of a schedule by its key prefix: a
// range on the unique index of live keys.
const liveScheduleJobSQL = `SELECT EXISTS (SELECT 1 FROM lq_jobs
	WHERE idem_key >= ? AND idem_key < ? AND state IN (0, 1))`

func (st *Store) FireSchedule(ctx context.Context, f store.Firing) (store.FireResult, error) {
	var res store.FireResult
	err := st.write(ctx, func(ctx context.Context, tx Execer) error {
		res = store.FireResult{}
		var next, rev int64
		var paused, waiting bool
		err := tx.QueryRowContext(ctx, `SELECT next_at, revision, paused, waiting FROM lq_schedules WHERE name = ?`, f.Name).
			Scan(&next, &rev, &paused, &waiting)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && (next != f.NextAt || rev != f.Revision || paused)) {
			res.Stale = true
			return nil
		}
		if err != nil {
			return err
		}
		jobs := f.Jobs
		if len(jobs) > 0 && f.Overlap != store.OverlapAllow {
			var live bool
			if err := tx.QueryRowContext(ctx, liveScheduleJobSQL, store.ScheduleKeyPrefix(f.Name), store.ScheduleKeyEnd(f.Name)).Scan(&live); err != nil {
				return err
			}
			switch {
			case live && f.Overlap == store.OverlapWait:
				res.Held = true
				if waiting {
					return nil
				}
				if _, err := tx.ExecContext(ctx, `UPDATE lq_schedules SET waiting = 1 WHERE name = ?`, f.Name); err != nil {
					return err
				}
				return addScheduleEvent(ctx, tx, f.Name, f.Now, "waiting", jobs[0].VisibleAt, 0, 0, 0,
					"overlap wait: a previous job of the schedule is still pending or running")
			case live:
				res.OverlapHit = true
				n := int64(len(jobs))
				if err := addScheduleEvent(ctx, tx, f.Name, f.Now, "skipped", jobs[0].VisibleAt, jobs[len(jobs)-1].VisibleAt, 0, n,
					"overlap skip: a previous job of the schedule is still pending or running"); err != nil {
					return err
				}
				jobs = nil
			}
		}
		if f.Skipped > 0 {
			if err := addScheduleEvent(ctx, tx, f.Name, f.Now, "skipped", f.SkipFirst, f.SkipLast, 0, f.Skipped, f.SkipDetail); err != nil {
				return err
			}
		}
		var lastAt, lastJob int64
		for i := range jobs {
			id, err := insertOne(ctx, tx, &jobs[i], nil)
			var dup *store.DuplicateError
			if err != nil && !errors.As(err, &dup) {
				return err
			}
			res.IDs = append(res.IDs, id)
			res.New = append(res.New, dup == nil)
			detail := ""
			if f.Late[i] {
				detail = "late"
			}
			if dup != nil {
				detail = "already enqueued"
			}
			if err := addScheduleEvent(ctx, tx, f.Name, f.Now, "enqueued", jobs[i].VisibleAt, 0, id, 1, detail); err != nil {
				return err
			}
			lastAt, lastJob = jobs[i].VisibleAt, id
		}
		_, err = tx.ExecContext(ctx, `UPDATE lq_schedules SET next_at = ?, waiting = 0, missed_count = missed_count + ?,
			last_at = CASE WHEN ? = 0 THEN last_at ELSE ? END, last_job = CASE WHEN ? = 0 THEN last_job ELSE ? END
			WHERE name = ?`, f.NewNext, f.Skipped, lastJob, lastAt, lastJob, lastJob, f.Name)
		return err
	})
	return res, err
}

func (st *Store) TriggerSchedule(ctx context.Context, name string, now int64) (id int64, queue, kind string, err error) {
	err = st.write(ctx, func(ctx context.Context, tx Execer) error {
		s, err := scanSchedule(tx.QueryRowContext(ctx, `SELECT `+scheduleColumns+` FROM lq_schedules s WHERE s.name = ?`, name))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %q", store.ErrScheduleNotFound, name)
		}
		if err != nil {
			return err
		}
		nj := store.NewJob{Queue: s.Queue, Kind: s.Kind, Priority: s.Priority, VisibleAt: now, CreatedAt: now,
			Payload: s.Payload, Key: fmt.Sprintf("%st%d", store.ScheduleKeyPrefix(name), now)}
		if id, err = insertOne(ctx, tx, &nj, nil); err != nil {
			return err
		}
		queue, kind = s.Queue, s.Kind
		if _, err := tx.ExecContext(ctx, `UPDATE lq_schedules SET last_at = ?, last_job = ? WHERE name = ?`, now, id, name); err != nil {
			return err
		}
		return addScheduleEvent(ctx, tx, name, now, "triggered", now, 0, id, 1, "")
	})
	return id, queue, kind, err
}

func (st *Store) ScheduleHistory(ctx context.Context, name string, limit int) ([]store.ScheduleEvent, error) {
	if limit <= 0 {
		limit = store.ScheduleHistoryKeep
	}
	rows, err := st.db.QueryContext(ctx, `SELECT id, at, event, coalesce(occurrence, 0), coalesce(last, 0), coalesce(job_id, 0), count, detail
		FROM lq_schedule_events WHERE schedule = ? ORDER BY id DESC LIMIT ?`, name, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.ScheduleEvent
	for rows.Next() {
		var e store.ScheduleEvent
		if err := rows.Scan(&e.ID, &e.At, &e.Type, &e.Occurrence, &e.Last, &e.JobID, &e.Count, &e.Detail); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
