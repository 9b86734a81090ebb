package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/litequeue/litequeue/internal/store"
)

// Durable schedules (store.ScheduleStore) in lq_schedules and
// lq_schedule_events. Every write to a schedule runs in one transaction that
// first takes a transaction-level advisory lock on the schedule's name, so
// processes racing on one schedule (two registrations, two firings of one
// occurrence) run one after the other, and the second sees the first's
// result.

const scheduleColumns = `s.name, s.cron, s.every, s.anchor, s.tz, s.queue, s.kind, s.payload, s.priority,
    s.missed, s.catch_up, s.overlap, s.grace, s.paused, s.waiting, s.next_at, s.revision,
    coalesce(s.last_at, 0), coalesce(s.last_job, 0), s.missed_count, s.created_at, s.updated_at`

func scanSchedule(sc rowScanner, extra ...any) (store.Schedule, error) {
	var s store.Schedule
	args := []any{&s.Name, &s.Cron, &s.Every, &s.Anchor, &s.TZ, &s.Queue, &s.Kind, &s.Payload, &s.Priority,
		&s.Missed, &s.CatchUp, &s.Overlap, &s.Grace, &s.Paused, &s.Waiting, &s.NextAt, &s.Revision,
		&s.LastAt, &s.LastJob, &s.MissedCount, &s.CreatedAt, &s.UpdatedAt}
	err := sc.Scan(append(args, extra...)...)
	return s, err
}

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

func (s *pgStore) addScheduleEvent(ctx context.Context, tx *sql.Tx, name string, at int64, event string, occ, last, job, count int64, detail string) error {
	nz := func(v int64) any {
		if v == 0 {
			return nil
		}
		return v
	}
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO lq_schedule_events (schedule, at, event, occurrence, last, job_id, count, detail)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`), name, at, event, nz(occ), nz(last), nz(job), count, detail); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, s.q(`DELETE FROM lq_schedule_events WHERE schedule = $1 AND id <=
		(SELECT id FROM lq_schedule_events WHERE schedule = $1 ORDER BY id DESC LIMIT 1 OFFSET $2)`), name, store.ScheduleHistoryKeep)
	return err
}

// UpsertSchedule implements store.Store.
func (s *pgStore) UpsertSchedule(ctx context.Context, def store.Schedule, now int64, detail string) (*store.Schedule, store.ScheduleChange, error) {
	var prev *store.Schedule
	change := store.ScheduleUnchanged
	payload := def.Payload
	if payload == nil {
		payload = []byte{}
	}
	err := s.scheduleTx(ctx, def.Name, func(tx *sql.Tx) error {
		prev, change = nil, store.ScheduleUnchanged
		old, err := scanSchedule(tx.QueryRowContext(ctx, s.q(`SELECT `+scheduleColumns+` FROM lq_schedules s WHERE s.name = $1`), def.Name))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			_, err = tx.ExecContext(ctx, s.q(`INSERT INTO lq_schedules (name, cron, every, anchor, tz, queue, kind, payload, priority,
				missed, catch_up, overlap, grace, next_at, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $15)`),
				def.Name, def.Cron, def.Every, def.Anchor, def.TZ, def.Queue, def.Kind, payload, int64(def.Priority),
				def.Missed, def.CatchUp, def.Overlap, def.Grace, def.NextAt, now)
			if err != nil {
				return err
			}
			change = store.ScheduleCreated
			return s.addScheduleEvent(ctx, tx, def.Name, now, "registered", 0, 0, 0, 0, detail)
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
		_, err = tx.ExecContext(ctx, s.q(`UPDATE lq_schedules SET cron = $1, every = $2, anchor = $3, tz = $4, queue = $5, kind = $6,
			payload = $7, priority = $8, missed = $9, catch_up = $10, overlap = $11, grace = $12, next_at = $13, waiting = false,
			revision = revision + 1, updated_at = $14 WHERE name = $15`),
			def.Cron, def.Every, anchor, def.TZ, def.Queue, def.Kind, payload, int64(def.Priority),
			def.Missed, def.CatchUp, def.Overlap, def.Grace, next, now, def.Name)
		if err != nil {
			return err
		}
		change = store.ScheduleUpdated
		return s.addScheduleEvent(ctx, tx, def.Name, now, "updated", 0, 0, 0, 0, detail)
	})
	if err != nil {
		return nil, store.ScheduleUnchanged, err
	}
	return prev, change, nil
}

// RemoveSchedule implements store.Store.
func (s *pgStore) RemoveSchedule(ctx context.Context, name string) error {
	return s.scheduleTx(ctx, name, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q(`DELETE FROM lq_schedules WHERE name = $1`), name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("%w: %q", store.ErrScheduleNotFound, name)
		}
		_, err = tx.ExecContext(ctx, s.q(`DELETE FROM lq_schedule_events WHERE schedule = $1`), name)
		return err
	})
}

// PauseSchedule implements store.Store.
func (s *pgStore) PauseSchedule(ctx context.Context, name string, paused bool, next, now int64) error {
	return s.scheduleTx(ctx, name, func(tx *sql.Tx) error {
		var was bool
		err := tx.QueryRowContext(ctx, s.q(`SELECT paused FROM lq_schedules WHERE name = $1`), name).Scan(&was)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %q", store.ErrScheduleNotFound, name)
		}
		if err != nil || was == paused {
			return err
		}
		event := "paused"
		if paused {
			_, err = tx.ExecContext(ctx, s.q(`UPDATE lq_schedules SET paused = true, revision = revision + 1 WHERE name = $1`), name)
		} else {
			event = "resumed"
			_, err = tx.ExecContext(ctx, s.q(`UPDATE lq_schedules SET paused = false, waiting = false, next_at = $1, revision = revision + 1 WHERE name = $2`), next, name)
		}
		if err != nil {
			return err
		}
		return s.addScheduleEvent(ctx, tx, name, now, event, 0, 0, 0, 0, "")
	})
}

// Schedules implements store.Store.
func (s *pgStore) Schedules(ctx context.Context, name string) ([]store.Schedule, error) {
	query := `SELECT ` + scheduleColumns + `, CASE WHEN s.last_job IS NULL THEN -1 ELSE coalesce(j.state, -2) END
		FROM lq_schedules s LEFT JOIN lq_jobs j ON j.id = s.last_job `
	var a args
	if name != "" {
		query += ` WHERE s.name = ` + a.add(name)
	}
	rows, err := s.db.QueryContext(ctx, s.q(query+` ORDER BY s.name`), a...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Schedule
	for rows.Next() {
		var last int
		sc, err := scanSchedule(rows, &last)
		if err != nil {
			return nil, err
		}
		sc.LastState = last
		out = append(out, sc)
	}
	return out, rows.Err()
}

// liveScheduleJobSQL finds a live job of a schedule by its key range (keys
// compare bytewise: the column's collation is "C").
const liveScheduleJobSQL = `SELECT EXISTS (SELECT 1 FROM lq_jobs
    WHERE idem_key >= $1 AND idem_key < $2 AND state IN (0, 1))`

// FireSchedule implements store.Store.
func (s *pgStore) FireSchedule(ctx context.Context, f store.Firing) (store.FireResult, error) {
	var res store.FireResult
	err := s.scheduleTx(ctx, f.Name, func(tx *sql.Tx) error {
		res = store.FireResult{}
		var next, rev int64
		var paused, waiting bool
		err := tx.QueryRowContext(ctx, s.q(`SELECT next_at, revision, paused, waiting FROM lq_schedules WHERE name = $1 FOR UPDATE`), f.Name).
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
			if err := tx.QueryRowContext(ctx, s.q(liveScheduleJobSQL), store.ScheduleKeyPrefix(f.Name), store.ScheduleKeyEnd(f.Name)).Scan(&live); err != nil {
				return err
			}
			switch {
			case live && f.Overlap == store.OverlapWait:
				res.Held = true
				if waiting {
					return nil
				}
				if _, err := tx.ExecContext(ctx, s.q(`UPDATE lq_schedules SET waiting = true WHERE name = $1`), f.Name); err != nil {
					return err
				}
				return s.addScheduleEvent(ctx, tx, f.Name, f.Now, "waiting", jobs[0].VisibleAt, 0, 0, 0,
					"overlap wait: a previous job of the schedule is still pending or running")
			case live:
				res.OverlapHit = true
				if err := s.addScheduleEvent(ctx, tx, f.Name, f.Now, "skipped", jobs[0].VisibleAt, jobs[len(jobs)-1].VisibleAt, 0, int64(len(jobs)),
					"overlap skip: a previous job of the schedule is still pending or running"); err != nil {
					return err
				}
				jobs = nil
			}
		}
		if f.Skipped > 0 {
			if err := s.addScheduleEvent(ctx, tx, f.Name, f.Now, "skipped", f.SkipFirst, f.SkipLast, 0, f.Skipped, f.SkipDetail); err != nil {
				return err
			}
		}
		var lastAt, lastJob int64
		if len(jobs) > 0 {
			ids, dups, err := s.insertTx(ctx, tx, jobs)
			if err != nil {
				return err
			}
			for i := range jobs {
				res.IDs = append(res.IDs, ids[i])
				res.New = append(res.New, dups[i] == nil)
				detail := ""
				if i < len(f.Late) && f.Late[i] {
					detail = "late"
				}
				if dups[i] != nil {
					detail = "already enqueued"
				}
				if err := s.addScheduleEvent(ctx, tx, f.Name, f.Now, "enqueued", jobs[i].VisibleAt, 0, ids[i], 1, detail); err != nil {
					return err
				}
				lastAt, lastJob = jobs[i].VisibleAt, ids[i]
			}
		}
		_, err = tx.ExecContext(ctx, s.q(`UPDATE lq_schedules SET next_at = $1, waiting = false, missed_count = missed_count + $2,
			last_at = CASE WHEN $3::bigint = 0 THEN last_at ELSE $4::bigint END,
			last_job = CASE WHEN $3::bigint = 0 THEN last_job ELSE $3::bigint END
			WHERE name = $5`), f.NewNext, f.Skipped, lastJob, lastAt, f.Name)
		return err
	})
	if err != nil {
		return store.FireResult{}, err
	}
	return res, nil
}

// TriggerSchedule implements store.Store.
func (s *pgStore) TriggerSchedule(ctx context.Context, name string, now int64) (id int64, queue, kind string, err error) {
	err = s.scheduleTx(ctx, name, func(tx *sql.Tx) error {
		sc, err := scanSchedule(tx.QueryRowContext(ctx, s.q(`SELECT `+scheduleColumns+` FROM lq_schedules s WHERE s.name = $1`), name))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %q", store.ErrScheduleNotFound, name)
		}
		if err != nil {
			return err
		}
		nj := store.NewJob{Queue: sc.Queue, Kind: sc.Kind, Priority: sc.Priority, VisibleAt: now, CreatedAt: now,
			Payload: sc.Payload, Key: fmt.Sprintf("%st%d", store.ScheduleKeyPrefix(name), now)}
		ids, dups, err := s.insertTx(ctx, tx, []store.NewJob{nj})
		if err != nil {
			return err
		}
		if dups[0] != nil {
			return dups[0]
		}
		id, queue, kind = ids[0], sc.Queue, sc.Kind
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE lq_schedules SET last_at = $1, last_job = $2 WHERE name = $3`), now, id, name); err != nil {
			return err
		}
		return s.addScheduleEvent(ctx, tx, name, now, "triggered", now, 0, id, 1, "")
	})
	if err != nil {
		return 0, "", "", err
	}
	return id, queue, kind, nil
}

// ScheduleHistory implements store.Store.
func (s *pgStore) ScheduleHistory(ctx context.Context, name string, limit int) ([]store.ScheduleEvent, error) {
	if limit <= 0 {
		limit = store.ScheduleHistoryKeep
	}
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT id, at, event, coalesce(occurrence, 0), coalesce(last, 0), coalesce(job_id, 0), count, detail
		FROM lq_schedule_events WHERE schedule = $1 ORDER BY id DESC LIMIT $2`), name, limit)
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
