package litequeue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// scheduleStore is every storage operation of durable schedules, in the
// queue's words. All the SQL of schedules is in this file; the scheduler
// (schedule.go, schedule_run.go) calls only this interface.
//
// Rules every implementation keeps:
//   - Times are int64 nanoseconds since the Unix epoch from the caller (the
//     queue's Clock).
//   - FireSchedule is one transaction: it checks that the schedule still has
//     the NextAt and Revision the caller planned from (else it changes
//     nothing and reports Stale), enqueues the occurrences' jobs with their
//     keys through the same insert as Enqueue, records the history and moves
//     NextAt — so processes racing on one occurrence enqueue one job.
//   - The overlap check ("does a job of this schedule still live?") is made
//     inside that transaction: a live job is a pending or running one whose
//     key starts with scheduleKeyPrefix(name).
//   - Each schedule keeps its newest scheduleHistoryKeep events.
type scheduleStore interface {
	// UpsertSchedule stores def under def.Name. A new schedule is inserted
	// as given (NextAt, Anchor) with a "registered" event. An existing one
	// with the same definition is left alone (ScheduleUnchanged, nothing
	// written). Otherwise its definition is replaced and its Revision
	// raised, with an "updated" event; its NextAt and Anchor are replaced
	// only when its timing (cron, every, time zone) changed. Paused is never
	// changed by an upsert. prev is the stored schedule before, if any.
	UpsertSchedule(ctx context.Context, def storedSchedule, now int64, detail string) (prev *storedSchedule, change ScheduleChange, err error)
	// RemoveSchedule deletes a schedule and its history
	// (ErrScheduleNotFound). Jobs it enqueued stay.
	RemoveSchedule(ctx context.Context, name string) error
	// PauseSchedule sets Paused; when resuming, NextAt becomes next
	// (occurrences passed while paused are not missed: they were paused).
	// ErrScheduleNotFound for an unknown name.
	PauseSchedule(ctx context.Context, name string, paused bool, next int64, now int64) error
	// Schedules returns every schedule, by name, with the state of its last
	// job; name non-empty selects that one.
	Schedules(ctx context.Context, name string) ([]storedSchedule, error)
	// FireSchedule runs one firing (see the rules above).
	FireSchedule(ctx context.Context, f firing) (fireResult, error)
	// TriggerSchedule enqueues an extra occurrence of the schedule now, with
	// the key scheduleKeyPrefix(name)+"t"+now, leaving its NextAt alone.
	TriggerSchedule(ctx context.Context, name string, now int64) (id int64, queue, kind string, err error)
	// ScheduleHistory returns a schedule's newest events, newest first; limit
	// <= 0 means all that are kept.
	ScheduleHistory(ctx context.Context, name string, limit int) ([]ScheduleEvent, error)
}

// scheduleHistoryKeep is how many events each schedule keeps.
const scheduleHistoryKeep = 200

// storedSchedule is a schedule row.
type storedSchedule struct {
	Name        string
	Cron        string
	Every       int64
	Anchor      int64
	TZ          string
	Queue, Kind string
	Payload     []byte
	Priority    int
	Missed      MissedPolicy
	CatchUp     int
	Overlap     OverlapPolicy
	Grace       int64
	Paused      bool
	Waiting     bool
	NextAt      int64
	Revision    int64
	LastAt      int64 // 0: none
	LastJob     int64 // 0: none
	LastState   int   // of the last job: -1 no job, -2 the row is gone, else State
	MissedCount int64
	CreatedAt   int64
	UpdatedAt   int64
}

// firing is one advance of a schedule: the occurrences to enqueue and the
// ones skipped, planned at Now from NextAt and Revision.
type firing struct {
	Name     string
	Revision int64
	NextAt   int64 // the planned-from next occurrence
	NewNext  int64 // the next occurrence after this firing
	Now      int64
	Jobs     []newJob // one per occurrence, in order, Key set
	Late     []bool   // Jobs[i] runs later than the schedule's grace
	// Skipped missed occurrences: how many, the first and the last.
	Skipped             int64
	SkipFirst, SkipLast int64
	SkipDetail          string
	Overlap             OverlapPolicy
}

// fireResult is what a firing did.
type fireResult struct {
	Stale      bool    // the schedule changed or another process fired it: nothing done
	Held       bool    // overlap wait: a previous job still lives; nothing enqueued, NextAt kept
	OverlapHit bool    // overlap skip: the occurrences were skipped
	IDs        []int64 // the jobs of f.Jobs (a job whose key was live: the live one's id)
	New        []bool  // IDs[i] was inserted by this firing
}

// sqlSchedules is the SQLite scheduleStore of a Queue.
type sqlSchedules struct{ q *Queue }

func (q *Queue) schedules() scheduleStore { return sqlSchedules{q} }

const scheduleColumns = `s.name, s.cron, s.every, s.anchor, s.tz, s.queue, s.kind, s.payload, s.priority,
	s.missed, s.catch_up, s.overlap, s.grace, s.paused, s.waiting, s.next_at, s.revision,
	coalesce(s.last_at, 0), coalesce(s.last_job, 0), s.missed_count, s.created_at, s.updated_at`

func scanSchedule(sc interface{ Scan(...any) error }, extra ...any) (storedSchedule, error) {
	var s storedSchedule
	args := []any{&s.Name, &s.Cron, &s.Every, &s.Anchor, &s.TZ, &s.Queue, &s.Kind, &s.Payload, &s.Priority,
		&s.Missed, &s.CatchUp, &s.Overlap, &s.Grace, &s.Paused, &s.Waiting, &s.NextAt, &s.Revision,
		&s.LastAt, &s.LastJob, &s.MissedCount, &s.CreatedAt, &s.UpdatedAt}
	err := sc.Scan(append(args, extra...)...)
	return s, err
}

func addScheduleEvent(ctx context.Context, tx execer, name string, at int64, event string, occ, last, job, count int64, detail string) error {
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
		(SELECT id FROM lq_schedule_events WHERE schedule = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`, name, name, scheduleHistoryKeep)
	return err
}

func (st sqlSchedules) UpsertSchedule(ctx context.Context, def storedSchedule, now int64, detail string) (*storedSchedule, ScheduleChange, error) {
	var prev *storedSchedule
	change := ScheduleUnchanged
	err := st.q.w.do(ctx, func(ctx context.Context, tx execer) error {
		prev, change = nil, ScheduleUnchanged
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
			change = ScheduleCreated
			return addScheduleEvent(ctx, tx, def.Name, now, "registered", 0, 0, 0, 0, detail)
		case err != nil:
			return err
		}
		prev = &old
		if old.sameDefinition(&def) {
			return nil
		}
		next, anchor := old.NextAt, old.Anchor
		if !old.sameTiming(&def) {
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
		change = ScheduleUpdated
		return addScheduleEvent(ctx, tx, def.Name, now, "updated", 0, 0, 0, 0, detail)
	})
	return prev, change, err
}

func (st sqlSchedules) RemoveSchedule(ctx context.Context, name string) error {
	return st.q.w.do(ctx, func(ctx context.Context, tx execer) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM lq_schedules WHERE name = ?`, name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("%w: %q", ErrScheduleNotFound, name)
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM lq_schedule_events WHERE schedule = ?`, name)
		return err
	})
}

func (st sqlSchedules) PauseSchedule(ctx context.Context, name string, paused bool, next, now int64) error {
	return st.q.w.do(ctx, func(ctx context.Context, tx execer) error {
		var was bool
		err := tx.QueryRowContext(ctx, `SELECT paused FROM lq_schedules WHERE name = ?`, name).Scan(&was)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %q", ErrScheduleNotFound, name)
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

func (st sqlSchedules) Schedules(ctx context.Context, name string) ([]storedSchedule, error) {
	query := `SELECT ` + scheduleColumns + `, CASE WHEN s.last_job IS NULL THEN -1 ELSE coalesce(j.state, -2) END
		FROM lq_schedules s LEFT JOIN lq_jobs j ON j.id = s.last_job`
	var args []any
	if name != "" {
		query += ` WHERE s.name = ?`
		args = append(args, name)
	}
	rows, err := st.q.db.QueryContext(ctx, query+` ORDER BY s.name`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []storedSchedule
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

func (st sqlSchedules) FireSchedule(ctx context.Context, f firing) (fireResult, error) {
	var res fireResult
	err := st.q.w.do(ctx, func(ctx context.Context, tx execer) error {
		res = fireResult{}
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
		if len(jobs) > 0 && f.Overlap != OverlapAllow {
			prefix := scheduleKeyPrefix(f.Name)
			var live bool
			if err := tx.QueryRowContext(ctx, liveScheduleJobSQL, prefix, prefixEnd(prefix)).Scan(&live); err != nil {
				return err
			}
			switch {
			case live && f.Overlap == OverlapWait:
				res.Held = true
				if waiting {
					return nil
				}
				if _, err := tx.ExecContext(ctx, `UPDATE lq_schedules SET waiting = 1 WHERE name = ?`, f.Name); err != nil {
					return err
				}
				return addScheduleEvent(ctx, tx, f.Name, f.Now, "waiting", jobs[0].runAt, 0, 0, 0,
					"overlap wait: a previous job of the schedule is still pending or running")
			case live:
				res.OverlapHit = true
				n := int64(len(jobs))
				if err := addScheduleEvent(ctx, tx, f.Name, f.Now, "skipped", jobs[0].runAt, jobs[len(jobs)-1].runAt, 0, n,
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
			id, err := insert(ctx, tx, &jobs[i], nil)
			var dup *DuplicateError
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
			if err := addScheduleEvent(ctx, tx, f.Name, f.Now, "enqueued", jobs[i].runAt, 0, id, 1, detail); err != nil {
				return err
			}
			lastAt, lastJob = jobs[i].runAt, id
		}
		_, err = tx.ExecContext(ctx, `UPDATE lq_schedules SET next_at = ?, waiting = 0, missed_count = missed_count + ?,
			last_at = CASE WHEN ? = 0 THEN last_at ELSE ? END, last_job = CASE WHEN ? = 0 THEN last_job ELSE ? END
			WHERE name = ?`, f.NewNext, f.Skipped, lastJob, lastAt, lastJob, lastJob, f.Name)
		return err
	})
	return res, err
}

func (st sqlSchedules) TriggerSchedule(ctx context.Context, name string, now int64) (id int64, queue, kind string, err error) {
	err = st.q.w.do(ctx, func(ctx context.Context, tx execer) error {
		s, err := scanSchedule(tx.QueryRowContext(ctx, `SELECT `+scheduleColumns+` FROM lq_schedules s WHERE s.name = ?`, name))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %q", ErrScheduleNotFound, name)
		}
		if err != nil {
			return err
		}
		nj := newJob{queue: s.Queue, kind: s.Kind, priority: s.Priority, visibleAt: now, runAt: now, createdAt: now,
			payload: s.Payload, key: fmt.Sprintf("%st%d", scheduleKeyPrefix(name), now)}
		if id, err = insert(ctx, tx, &nj, nil); err != nil {
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

func (st sqlSchedules) ScheduleHistory(ctx context.Context, name string, limit int) ([]ScheduleEvent, error) {
	if limit <= 0 {
		limit = scheduleHistoryKeep
	}
	rows, err := st.q.db.QueryContext(ctx, `SELECT id, at, event, coalesce(occurrence, 0), coalesce(last, 0), coalesce(job_id, 0), count, detail
		FROM lq_schedule_events WHERE schedule = ? ORDER BY id DESC LIMIT ?`, name, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ScheduleEvent
	for rows.Next() {
		var e ScheduleEvent
		var at, occ, last int64
		if err := rows.Scan(&e.ID, &at, &e.Type, &occ, &last, &e.JobID, &e.Count, &e.Detail); err != nil {
			return nil, err
		}
		e.Time, e.Occurrence, e.Last = nanoTime(at), nanoTime(occ), nanoTime(last)
		out = append(out, e)
	}
	return out, rows.Err()
}

// prefixEnd returns the smallest string greater than every string with the
// given prefix, which ends in ':' (so ';' follows it).
func prefixEnd(prefix string) string {
	return strings.TrimSuffix(prefix, ":") + ";"
}
