package sqlkit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/litequeue/litequeue/internal/store"
)

// The writes of store.Schedules, once for both backends: each backend runs
// these functions inside its own transaction (SQLite: the writer's; the
// PostgreSQL store: one holding the schedule's advisory lock) and supplies
// the SQL texts of ScheduleSQL in its dialect, so the rules of the
// store.Schedules interface live here and the SQL texts in the backend's
// files.

// ScheduleSQL holds one backend's statements for the schedule writes. Every
// statement takes its parameters numbered as documented (?1 or $1 ...), so
// the shared code passes the same arguments to both dialects.
type ScheduleSQL struct {
	// Select: 1 name → ScheduleColumns of the schedule (alias s).
	Select string
	// Insert: 1 name, 2 cron, 3 every, 4 anchor, 5 tz, 6 queue, 7 kind,
	// 8 payload, 9 priority, 10 missed, 11 catch_up, 12 overlap, 13 grace,
	// 14 next_at, 15 now (created_at and updated_at), 16 uniq, 17 end_at,
	// 18 max_runs, 19 run_first.
	Insert string
	// Update: the Insert parameters, 15 now as updated_at; it clears
	// waiting and raises revision.
	Update string
	// Delete: 1 name. DeleteEvents: 1 name.
	Delete, DeleteEvents string
	// SelectPaused: 1 name → paused.
	SelectPaused string
	// Pause: 1 name (paused, revision + 1). Resume: 1 name, 2 next_at
	// (not paused, not waiting, revision + 1).
	Pause, Resume string
	// FireState: 1 name → next_at, revision, paused, waiting, locking the
	// row where the dialect can.
	FireState string
	// LiveJob: 1 key prefix, 2 key end → whether a pending or running job's
	// key lies in [prefix, end).
	LiveJob string
	// SetWaiting: 1 name.
	SetWaiting string
	// Fired: 1 name, 2 next_at, 3 missed count to add, 4 last job (0: keep
	// last_at and last_job), 5 last_at, 6 runs to add to run_count; it
	// clears waiting.
	Fired string
	// Triggered: 1 name, 2 last_at, 3 last_job.
	Triggered string
	// AddEvent: 1 schedule, 2 at, 3 event, 4 occurrence, 5 last, 6 job_id
	// (4-6 NULL for 0), 7 count, 8 detail. TrimEvents: 1 schedule, 2 how
	// many to keep (store.ScheduleHistoryKeep).
	AddEvent, TrimEvents string
}

// ScheduleTx is one backend transaction as the schedule writes use it.
type ScheduleTx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	// InsertJobs inserts jobs as Insert does, in this transaction.
	InsertJobs(ctx context.Context, jobs []store.NewJob) (ids []int64, dups []error, err error)
}

// ScheduleColumns are the columns ScanSchedule reads, of lq_schedules
// aliased s.
const ScheduleColumns = `s.name, s.cron, s.every, s.anchor, s.tz, s.queue, s.kind, s.payload, s.priority,
    s.missed, s.catch_up, s.overlap, s.grace, s.paused, s.waiting, s.next_at, s.revision,
    coalesce(s.last_at, 0), coalesce(s.last_job, 0), s.missed_count, s.created_at, s.updated_at, s.uniq,
    s.end_at, s.max_runs, s.run_count, s.run_first`

// ScanSchedule reads ScheduleColumns, then extra.
func ScanSchedule(sc interface{ Scan(...any) error }, extra ...any) (store.Schedule, error) {
	var s store.Schedule
	args := []any{&s.Name, &s.Cron, &s.Every, &s.Anchor, &s.TZ, &s.Queue, &s.Kind, &s.Payload, &s.Priority,
		&s.Missed, &s.CatchUp, &s.Overlap, &s.Grace, &s.Paused, &s.Waiting, &s.NextAt, &s.Revision,
		&s.LastAt, &s.LastJob, &s.MissedCount, &s.CreatedAt, &s.UpdatedAt, &s.Unique,
		&s.EndAt, &s.MaxRuns, &s.RunCount, &s.RunFirst}
	err := sc.Scan(append(args, extra...)...)
	return s, err
}

// ScanScheduleWithLast reads ScheduleColumns and then LastState, for
// QueryAll.
func ScanScheduleWithLast(rows *sql.Rows, s *store.Schedule) error {
	var last int
	v, err := ScanSchedule(rows, &last)
	if err != nil {
		return err
	}
	v.LastState = last
	*s = v
	return nil
}

// ScanScheduleEvent reads (id, at, event, occurrence, last, job_id, count,
// detail), with NULLs read as 0.
func ScanScheduleEvent(rows *sql.Rows, e *store.ScheduleEvent) error {
	return rows.Scan(&e.ID, &e.At, &e.Type, &e.Occurrence, &e.Last, &e.JobID, &e.Count, &e.Detail)
}

func notFound(name string) error { return fmt.Errorf("%w: %q", store.ErrScheduleNotFound, name) }

// addEvent records one event of schedule name and keeps its newest
// store.ScheduleHistoryKeep.
func (q *ScheduleSQL) addEvent(ctx context.Context, tx ScheduleTx, name string, at int64, event string, occ, last, job, count int64, detail string) error {
	nz := func(v int64) any {
		if v == 0 {
			return nil
		}
		return v
	}
	if _, err := tx.ExecContext(ctx, q.AddEvent, name, at, event, nz(occ), nz(last), nz(job), count, detail); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, q.TrimEvents, name, store.ScheduleHistoryKeep)
	return err
}

// Upsert is store.Schedules.UpsertSchedule inside tx.
func (q *ScheduleSQL) Upsert(ctx context.Context, tx ScheduleTx, def store.Schedule, now int64, detail string) (*store.Schedule, store.ScheduleChange, error) {
	payload := def.Payload
	if payload == nil {
		payload = []byte{}
	}
	old, err := ScanSchedule(tx.QueryRowContext(ctx, q.Select, def.Name))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		next := def.NextAt
		if def.RunFirst {
			next = now
		}
		if _, err := tx.ExecContext(ctx, q.Insert, def.Name, def.Cron, def.Every, def.Anchor, def.TZ, def.Queue, def.Kind,
			payload, int64(def.Priority), def.Missed, def.CatchUp, def.Overlap, def.Grace, next, now, def.Unique,
			def.EndAt, def.MaxRuns, def.RunFirst); err != nil {
			return nil, store.ScheduleUnchanged, err
		}
		return nil, store.ScheduleCreated, q.addEvent(ctx, tx, def.Name, now, "registered", 0, 0, 0, 0, detail)
	case err != nil:
		return nil, store.ScheduleUnchanged, err
	}
	if old.SameDefinition(&def) {
		return &old, store.ScheduleUnchanged, nil
	}
	next, anchor := old.NextAt, old.Anchor
	if !old.SameTiming(&def) || (old.NextAt == store.NeverAt && (old.EndAt != def.EndAt || old.MaxRuns != def.MaxRuns)) {
		// A new timing, or new bounds for an ended schedule: from the
		// next occurrence after now.
		next, anchor = def.NextAt, def.Anchor
	}
	if def.RunFirst && old.LastAt == 0 && old.RunCount == 0 {
		next = min(next, now) // it has not run yet: it runs now
	}
	if _, err := tx.ExecContext(ctx, q.Update, def.Name, def.Cron, def.Every, anchor, def.TZ, def.Queue, def.Kind,
		payload, int64(def.Priority), def.Missed, def.CatchUp, def.Overlap, def.Grace, next, now, def.Unique,
		def.EndAt, def.MaxRuns, def.RunFirst); err != nil {
		return nil, store.ScheduleUnchanged, err
	}
	return &old, store.ScheduleUpdated, q.addEvent(ctx, tx, def.Name, now, "updated", 0, 0, 0, 0, detail)
}

// Remove is store.Schedules.RemoveSchedule inside tx.
func (q *ScheduleSQL) Remove(ctx context.Context, tx ScheduleTx, name string) error {
	res, err := tx.ExecContext(ctx, q.Delete, name)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return notFound(name)
	}
	_, err = tx.ExecContext(ctx, q.DeleteEvents, name)
	return err
}

// SetPaused is store.Schedules.PauseSchedule inside tx.
func (q *ScheduleSQL) SetPaused(ctx context.Context, tx ScheduleTx, name string, paused bool, next, now int64) error {
	var was bool
	err := tx.QueryRowContext(ctx, q.SelectPaused, name).Scan(&was)
	if errors.Is(err, sql.ErrNoRows) {
		return notFound(name)
	}
	if err != nil || was == paused {
		return err
	}
	event := "paused"
	if paused {
		_, err = tx.ExecContext(ctx, q.Pause, name)
	} else {
		event = "resumed"
		_, err = tx.ExecContext(ctx, q.Resume, name, next)
	}
	if err != nil {
		return err
	}
	return q.addEvent(ctx, tx, name, now, event, 0, 0, 0, 0, "")
}

// Fire is store.Schedules.FireSchedule inside tx (see the rules of
// store.Schedules).
func (q *ScheduleSQL) Fire(ctx context.Context, tx ScheduleTx, f store.Firing) (store.FireResult, error) {
	var res store.FireResult
	var next, rev int64
	var paused, waiting bool
	err := tx.QueryRowContext(ctx, q.FireState, f.Name).Scan(&next, &rev, &paused, &waiting)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && (next != f.NextAt || rev != f.Revision || paused)) {
		return store.FireResult{Stale: true}, nil
	}
	if err != nil {
		return res, err
	}
	jobs := f.Jobs
	if len(jobs) > 0 && f.Overlap != store.OverlapAllow {
		var live bool
		if err := tx.QueryRowContext(ctx, q.LiveJob, store.ScheduleKeyPrefix(f.Name), store.ScheduleKeyEnd(f.Name)).Scan(&live); err != nil {
			return res, err
		}
		switch {
		case live && f.Overlap == store.OverlapWait:
			res.Held = true
			if waiting {
				return res, nil
			}
			if _, err := tx.ExecContext(ctx, q.SetWaiting, f.Name); err != nil {
				return res, err
			}
			return res, q.addEvent(ctx, tx, f.Name, f.Now, "waiting", jobs[0].VisibleAt, 0, 0, 0,
				"overlap wait: a previous job of the schedule is still pending or running")
		case live:
			res.OverlapHit = true
			if err := q.addEvent(ctx, tx, f.Name, f.Now, "skipped", jobs[0].VisibleAt, jobs[len(jobs)-1].VisibleAt, 0, int64(len(jobs)),
				"overlap skip: a previous job of the schedule is still pending or running"); err != nil {
				return res, err
			}
			jobs = nil
		}
	}
	if f.Skipped > 0 {
		if err := q.addEvent(ctx, tx, f.Name, f.Now, "skipped", f.SkipFirst, f.SkipLast, 0, f.Skipped, f.SkipDetail); err != nil {
			return res, err
		}
	}
	var lastAt, lastJob int64
	runs, newNext := int64(len(jobs)), f.NewNext
	if f.MaxRuns > 0 && f.RunCount+runs >= f.MaxRuns {
		newNext = store.NeverAt
	}
	if len(jobs) > 0 {
		ids, dups, err := tx.InsertJobs(ctx, jobs)
		if err != nil {
			return res, err
		}
		for i := range jobs {
			res.IDs = append(res.IDs, ids[i])
			res.New = append(res.New, dups[i] == nil)
			var ue *store.UniqueError
			if errors.As(dups[i], &ue) {
				// The job type's uniqueness: a twin (enqueued by the
				// schedule or not) stands for the occurrence.
				res.Dups = append(res.Dups, ue)
				if err := q.addEvent(ctx, tx, f.Name, f.Now, "duplicate", jobs[i].VisibleAt, 0, ue.ID, 1, duplicateDetail(ue)); err != nil {
					return res, err
				}
				continue
			}
			res.Dups = append(res.Dups, nil)
			detail := ""
			if i < len(f.Late) && f.Late[i] {
				detail = "late"
			}
			if dups[i] != nil {
				detail = "already enqueued"
			}
			if err := q.addEvent(ctx, tx, f.Name, f.Now, "enqueued", jobs[i].VisibleAt, 0, ids[i], 1, detail); err != nil {
				return res, err
			}
			lastAt, lastJob = jobs[i].VisibleAt, ids[i]
		}
	}
	if _, err = tx.ExecContext(ctx, q.Fired, f.Name, newNext, f.Skipped, lastJob, lastAt, runs); err != nil {
		return res, err
	}
	if newNext == store.NeverAt {
		res.Ended = true
		detail := "no occurrence is left"
		switch {
		case f.MaxRuns > 0 && f.RunCount+runs >= f.MaxRuns:
			detail = fmt.Sprintf("run limit reached: %d runs", f.RunCount+runs)
		case f.EndDetail != "":
			detail = f.EndDetail
		}
		return res, q.addEvent(ctx, tx, f.Name, f.Now, "ended", 0, 0, 0, 0, detail)
	}
	return res, nil
}

// duplicateDetail is the detail of a "duplicate" event.
func duplicateDetail(ue *store.UniqueError) string {
	return fmt.Sprintf("unique: job %d (%s) has the same uniqueness; nothing enqueued", ue.ID, ue.State)
}

// Trigger is store.Schedules.TriggerSchedule inside tx. A twin that blocks
// the job is returned as dup (a *store.UniqueError), with the twin's id and
// err nil: the "duplicate" event is to be committed.
func (q *ScheduleSQL) Trigger(ctx context.Context, tx ScheduleTx, name string, now int64, unique func(*store.Schedule, *store.NewJob) error) (id int64, queue, kind string, dup, err error) {
	s, err := ScanSchedule(tx.QueryRowContext(ctx, q.Select, name))
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", "", nil, notFound(name)
	}
	if err != nil {
		return 0, "", "", nil, err
	}
	nj := store.NewJob{Queue: s.Queue, Kind: s.Kind, Priority: s.Priority, VisibleAt: now, CreatedAt: now,
		Payload: s.Payload, Key: fmt.Sprintf("%st%d", store.ScheduleKeyPrefix(name), now)}
	if unique != nil {
		if err := unique(&s, &nj); err != nil {
			return 0, "", "", nil, err
		}
	}
	ids, dups, err := tx.InsertJobs(ctx, []store.NewJob{nj})
	if err != nil {
		return 0, "", "", nil, err
	}
	var ue *store.UniqueError
	if errors.As(dups[0], &ue) {
		if err := q.addEvent(ctx, tx, name, now, "duplicate", now, 0, ue.ID, 1, duplicateDetail(ue)); err != nil {
			return 0, "", "", nil, err
		}
		return ue.ID, s.Queue, s.Kind, ue, nil
	}
	if dups[0] != nil {
		return 0, "", "", nil, dups[0]
	}
	if _, err := tx.ExecContext(ctx, q.Triggered, name, now, ids[0]); err != nil {
		return 0, "", "", nil, err
	}
	if err := q.addEvent(ctx, tx, name, now, "triggered", now, 0, ids[0], 1, ""); err != nil {
		return 0, "", "", nil, err
	}
	return ids[0], s.Queue, s.Kind, nil, nil
}
