package litequeue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// Schedule is a recurring job: a cron expression or a fixed interval, and
// the job each occurrence enqueues. Schedules live in the queue's file under
// their Name; every process that Starts the queue runs them, and each
// occurrence is enqueued exactly once whatever the number of processes.
//
// Time zones and daylight saving time (the rule, for cron schedules):
//   - A schedule that names its hours (“30 2 * * *”, “0 9 * * 1”, @daily)
//     runs each matching wall-clock time once. On the night the clocks jump
//     forward, a time they skip (02:30 when 02:00 becomes 03:00) runs at the
//     moment it would have been, shifted by the jump (03:30); on the night
//     they fall back, a time that comes twice runs the first time only.
//   - A schedule whose hour field is “*” (“*/15 * * * *”, @hourly) follows
//     real time: the repeated hour of the fall-back night runs again, every
//     step in both passes (“*/30”: 01:00, 01:30 EDT, 01:00, 01:30 EST), and
//     the skipped hour of the spring-forward night has nothing to run.
//   - Every and “@every D” are fixed intervals of real time, unaffected by
//     time zones.
type Schedule struct {
	// Name identifies the schedule: registering a schedule of an existing
	// name updates it. Required; at most MaxNameLen bytes.
	Name string
	// Cron is a standard five-field cron expression (minute hour
	// day-of-month month day-of-week) or a descriptor: @yearly, @monthly,
	// @weekly, @daily (@midnight), @hourly, "@every 1h30m". Set Cron or
	// Every, not both.
	Cron string
	// Every is a fixed interval of at least MinScheduleInterval: the first
	// occurrence is Every after the schedule is first registered.
	Every time.Duration
	// TimeZone is the IANA time zone the Cron expression is read in, such
	// as "Europe/Berlin". Default "" means UTC. "Local" is refused: it
	// means a different zone on each machine.
	TimeZone string
	// Job is the job each occurrence enqueues, stored as its JSON encoding
	// at registration. Its type's RetryPolicy method, if any, applies as
	// for any job. Its UniqueOptions, if any, are read at registration and
	// stored with the schedule: each occurrence (and TriggerSchedule) is
	// enqueued under them as Enqueue would enqueue the job — a twin that
	// blocks it is reported with an EventDuplicate and a "duplicate" event
	// in the schedule's history naming the twin, and nothing is enqueued
	// for that occurrence. Required.
	Job Job
	// Queue overrides the job type's QueueName. Empty means the job's own.
	Queue string
	// Priority of the enqueued jobs (lower runs first). Default 0.
	Priority int
	// Missed says what happens to occurrences that passed while no process
	// ran the schedule (all stopped, the machine asleep). Default
	// MissedRunOnce.
	Missed MissedPolicy
	// CatchUp is the most missed occurrences MissedCatchUp enqueues, 1 to
	// MaxCatchUp. Only with MissedCatchUp.
	CatchUp int
	// Overlap says whether an occurrence is enqueued while a job of the
	// schedule is still pending or running. Default OverlapAllow.
	Overlap OverlapPolicy
	// Grace is how late an occurrence may be enqueued and still count as
	// on time, for MissedSkip. Default DefaultScheduleGrace (1 minute).
	Grace time.Duration
	// RunImmediately makes the schedule's first occurrence the moment it is
	// first registered, instead of the first time Cron or Every gives; the
	// occurrences after it follow the timing. A schedule that exists
	// already and has not enqueued a job yet runs at the registration that
	// sets it; one that ran is not run again (every process registers its
	// schedules at each start). That first occurrence is never skipped as
	// missed, whatever Missed says.
	RunImmediately bool
	// EndAt, when not zero, ends the schedule after that moment: no
	// occurrence later than EndAt is enqueued, and once the next one would
	// be, the schedule has ended (ScheduleInfo.Ended) and enqueues nothing
	// more. It may lie in the past (the schedule is then ended); times
	// outside 1678–2262 are refused.
	EndAt time.Time
	// MaxRuns, when above zero, ends the schedule once it enqueued that
	// many occurrences (an occurrence whose unique twin stood for it counts
	// too; skipped, missed and triggered ones do not). Negative is an
	// error. The count (ScheduleInfo.RunCount) is stored with the schedule,
	// shared by every process and kept across restarts and redefinitions.
	// Raising MaxRuns or moving EndAt of an ended schedule starts it again
	// from its next occurrence after now.
	MaxRuns int
}

// MissedPolicy says what a schedule does with occurrences that passed while
// no process ran it. Whatever the policy, the occurrences not enqueued are
// counted (ScheduleInfo.MissedCount), logged at level Warn and recorded in
// the schedule's history as one "skipped" event per batch: never a flood,
// never a silent skip.
type MissedPolicy int

const (
	// MissedRunOnce (the default) enqueues the latest missed occurrence
	// once, at once, and skips the others.
	MissedRunOnce MissedPolicy = iota
	// MissedSkip enqueues none of the occurrences missed by more than the
	// schedule's Grace, and waits for the next one.
	MissedSkip
	// MissedCatchUp enqueues the latest Schedule.CatchUp missed occurrences,
	// oldest first, and skips the older ones.
	MissedCatchUp
)

func (p MissedPolicy) String() string {
	switch p {
	case MissedRunOnce:
		return "run-once"
	case MissedSkip:
		return "skip"
	case MissedCatchUp:
		return "catch-up"
	}
	return fmt.Sprintf("MissedPolicy(%d)", int(p))
}

// OverlapPolicy says whether an occurrence is enqueued while a job of the
// same schedule (an earlier occurrence, or one triggered by hand) is still
// pending or running.
type OverlapPolicy int

const (
	// OverlapAllow (the default) enqueues every occurrence regardless.
	OverlapAllow OverlapPolicy = iota
	// OverlapSkip skips the occurrence (recorded in the history as
	// "skipped") and waits for the next.
	OverlapSkip
	// OverlapWait holds the occurrence until the previous job finished,
	// then enqueues it (as on time); occurrences that come due meanwhile are
	// missed and go by the Missed policy. While it holds one, the scheduler
	// looks again after half the time it has waited so far, from 1 second
	// up to ScheduleWaitCheck, and at once when another process writes.
	OverlapWait
)

func (p OverlapPolicy) String() string {
	switch p {
	case OverlapAllow:
		return "allow"
	case OverlapSkip:
		return "skip"
	case OverlapWait:
		return "wait"
	}
	return fmt.Sprintf("OverlapPolicy(%d)", int(p))
}

// Schedule defaults and limits.
const (
	DefaultScheduleGrace = time.Minute
	MaxCatchUp           = 100
	// ScheduleWaitCheck is the longest an occurrence held by OverlapWait
	// goes without looking again whether the previous job finished.
	ScheduleWaitCheck = time.Minute
)

// ScheduleChange says what RegisterSchedule did.
type ScheduleChange int

const (
	ScheduleUnchanged ScheduleChange = iota // the same definition was stored already
	ScheduleCreated                         // the schedule is new
	ScheduleUpdated                         // the stored definition differed and was replaced
)

func (c ScheduleChange) String() string {
	return [...]string{"unchanged", "created", "updated"}[c]
}

// Errors of schedules.
var (
	// ErrInvalidSchedule: a Schedule failed validation; the *ScheduleError
	// names the schedule and the field. Nothing was stored.
	ErrInvalidSchedule = errors.New("litequeue: invalid schedule")
	// ErrScheduleNotFound: no schedule has the name.
	ErrScheduleNotFound = store.ErrScheduleNotFound
)

// ScheduleError reports an invalid field of a Schedule. errors.Is(err,
// ErrInvalidSchedule) holds; Unwrap returns the cause.
type ScheduleError struct {
	Schedule string // the schedule's Name
	Field    string // the Schedule field at fault, e.g. "Cron"
	Err      error
}

func (e *ScheduleError) Error() string {
	return fmt.Sprintf("litequeue: schedule %q: %s: %v", e.Schedule, e.Field, e.Err)
}

func (e *ScheduleError) Unwrap() error { return e.Err }

// Is reports whether target is ErrInvalidSchedule.
func (e *ScheduleError) Is(target error) bool { return target == ErrInvalidSchedule }

// ScheduleInfo is a stored schedule and its state.
type ScheduleInfo struct {
	Name      string
	Cron      string        // "" for an interval schedule
	Every     time.Duration // 0 for a cron schedule
	TimeZone  string
	Queue     string
	Kind      string
	Payload   json.RawMessage
	Priority  int
	Missed    MissedPolicy
	CatchUp   int
	Overlap   OverlapPolicy
	Grace     time.Duration
	Paused    bool
	Waiting   bool      // an occurrence waits for the previous job (OverlapWait)
	NextRun   time.Time // the next occurrence not yet handled (maybe past, if no process runs)
	LastRun   time.Time // the occurrence of the last job enqueued; zero if none
	LastJobID int64     // 0 if none
	// LastOutcome is the state of the last job: "" (none yet), "pending",
	// "running", "completed", "dead", "cancelled", or "done" when its row
	// is gone (it succeeded, or was purged).
	LastOutcome string
	MissedCount int64 // occurrences skipped because they were missed
	Revision    int64 // raised by every change of definition or pause state
	Created     time.Time
	Updated     time.Time
	// Unique is the uniqueness of the schedule's jobs, read from the job's
	// UniqueOptions at registration; nil for none.
	Unique *UniqueOptions
	// RunImmediately, EndAt and MaxRuns are the definition's (see
	// Schedule); RunCount is how many occurrences it enqueued; Ended says
	// it has none left (past EndAt, or MaxRuns reached): NextRun is then
	// zero.
	RunImmediately bool
	EndAt          time.Time
	MaxRuns        int
	RunCount       int64
	Ended          bool

	timing *timing
}

// NextRuns returns the next n occurrences after from (none for a paused
// schedule).
func (s ScheduleInfo) NextRuns(from time.Time, n int) []time.Time {
	if s.Paused || s.timing == nil || s.Ended {
		return nil
	}
	if s.MaxRuns > 0 {
		n = min(n, s.MaxRuns-int(s.RunCount))
	}
	var out []time.Time
	at := s.NextRun
	if at.Before(from) {
		at = s.timing.next(from)
	}
	for len(out) < n && !at.IsZero() && (s.EndAt.IsZero() || !at.After(s.EndAt)) {
		out = append(out, at)
		at = s.timing.next(at)
	}
	return out
}

// ScheduleEvent is one record of a schedule's history. Type is one of
// "registered", "updated", "paused", "resumed", "enqueued" (Occurrence,
// JobID; Detail "late" when past the grace), "triggered", "skipped"
// (Count occurrences from Occurrence to Last, Detail says why), "waiting"
// (OverlapWait holds Occurrence), "duplicate" (the job's uniqueness:
// JobID is the twin that blocked the occurrence; nothing was enqueued) and
// "ended" (no occurrence is left: Detail says whether the end date passed
// or the run limit was reached).
type ScheduleEvent struct {
	ID         int64
	Time       time.Time
	Type       string
	Occurrence time.Time
	Last       time.Time
	JobID      int64
	Count      int64
	Detail     string
}

func nanoTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// occurrenceKey is the idempotency key of a schedule's occurrence at at.
func occurrenceKey(name string, at time.Time) string {
	return fmt.Sprintf("%s%d", store.ScheduleKeyPrefix(name), at.UnixNano())
}

// validateSchedule checks s and returns its stored form, with the timing
// from now.
func (q *Queue) validateSchedule(s Schedule, now time.Time) (store.Schedule, *timing, error) {
	bad := func(field string, err error) error {
		return &ScheduleError{Schedule: s.Name, Field: field, Err: err}
	}
	if err := validName("schedule", s.Name); err != nil {
		return store.Schedule{}, nil, bad("Name", err)
	}
	switch {
	case s.Cron == "" && s.Every == 0:
		return store.Schedule{}, nil, bad("Cron", errors.New("neither Cron nor Every is set; set one"))
	case s.Cron != "" && s.Every != 0:
		return store.Schedule{}, nil, bad("Every", errors.New("both Cron and Every are set; set one"))
	case s.Cron == "" && s.Every < MinScheduleInterval:
		hint := ""
		if s.Every > 0 && s.Every < time.Microsecond {
			hint = fmt.Sprintf(" (did you mean %d * time.Second?)", int64(s.Every))
		}
		return store.Schedule{}, nil, bad("Every", fmt.Errorf("interval %s is not positive or shorter than %s%s", s.Every, MinScheduleInterval, hint))
	}
	if _, err := loadZone(s.TimeZone); err != nil {
		return store.Schedule{}, nil, bad("TimeZone", err)
	}
	tz := s.TimeZone
	if tz == "" {
		tz = "UTC"
	}
	t, err := newTiming(s.Cron, s.Every, tz, now)
	if err != nil {
		return store.Schedule{}, nil, bad("Cron", fmt.Errorf("invalid cron expression %q: %v", s.Cron, err))
	}
	next := t.next(now)
	if next.IsZero() {
		return store.Schedule{}, nil, bad("Cron", fmt.Errorf("cron expression %q matches no date in the next five years", s.Cron))
	}
	switch {
	case s.Missed < MissedRunOnce || s.Missed > MissedCatchUp:
		return store.Schedule{}, nil, bad("Missed", fmt.Errorf("unknown policy %d", int(s.Missed)))
	case s.Missed == MissedCatchUp && (s.CatchUp < 1 || s.CatchUp > MaxCatchUp):
		return store.Schedule{}, nil, bad("CatchUp", fmt.Errorf("%d is outside 1..%d", s.CatchUp, MaxCatchUp))
	case s.Missed != MissedCatchUp && s.CatchUp != 0:
		return store.Schedule{}, nil, bad("CatchUp", fmt.Errorf("set only with MissedCatchUp (Missed is %s)", s.Missed))
	case s.Overlap < OverlapAllow || s.Overlap > OverlapWait:
		return store.Schedule{}, nil, bad("Overlap", fmt.Errorf("unknown policy %d", int(s.Overlap)))
	case s.Grace < 0:
		return store.Schedule{}, nil, bad("Grace", fmt.Errorf("negative grace %s; use 0 for the default (%s)", s.Grace, DefaultScheduleGrace))
	case s.MaxRuns < 0:
		return store.Schedule{}, nil, bad("MaxRuns", fmt.Errorf("negative run limit %d; use 0 for none", s.MaxRuns))
	case !s.EndAt.IsZero() && (s.EndAt.After(maxRunAt) || s.EndAt.Before(minRunAt)):
		return store.Schedule{}, nil, bad("EndAt", fmt.Errorf("%s is outside the years 1678–2262 that the queue can store", s.EndAt))
	}
	if s.Queue != "" {
		if err := validName("queue", s.Queue); err != nil {
			return store.Schedule{}, nil, bad("Queue", err)
		}
	}
	nj, err := q.prepare(s.Job, &EnqueueOptions{Queue: s.Queue, Priority: s.Priority})
	if err != nil {
		return store.Schedule{}, nil, bad("Job", err)
	}
	uniq, err := encodeUnique(uniqueOptionsOf(s.Job, nil))
	if err != nil {
		return store.Schedule{}, nil, bad("Job", err)
	}
	st := store.Schedule{
		Name: s.Name, Cron: s.Cron, Every: int64(s.Every), Anchor: now.UnixNano(), TZ: tz,
		Queue: nj.Queue, Kind: nj.Kind, Payload: nj.Payload, Priority: s.Priority,
		Missed: int(s.Missed), CatchUp: s.CatchUp, Overlap: int(s.Overlap), Grace: int64(s.Grace), NextAt: next.UnixNano(),
		Unique: uniq, MaxRuns: int64(s.MaxRuns), RunFirst: s.RunImmediately,
	}
	if !s.EndAt.IsZero() {
		st.EndAt = max(s.EndAt.UnixNano(), 1)
		if st.NextAt > st.EndAt && !s.RunImmediately {
			st.NextAt = store.NeverAt
		}
	}
	if t.spec != nil {
		st.Anchor = 0 // a cron schedule has no anchor; "@every D" counts from now like Every
	}
	return st, t, nil
}

// summary describes a definition for the history and the log.
func summary(s *store.Schedule) string {
	when := "cron " + s.Cron
	if s.Cron == "" {
		when = "every " + time.Duration(s.Every).String()
	}
	out := fmt.Sprintf("%s tz %s; job %s on queue %s, priority %d, payload %s; missed %s, overlap %s",
		when, s.TZ, s.Kind, s.Queue, s.Priority, s.Payload, describeMissed(MissedPolicy(s.Missed), s.CatchUp), OverlapPolicy(s.Overlap))
	if s.Unique != "" {
		out += "; unique " + s.Unique
	}
	if s.RunFirst {
		out += "; runs at once"
	}
	if s.EndAt != 0 {
		out += "; ends " + time.Unix(0, s.EndAt).UTC().Format(time.RFC3339)
	}
	if s.MaxRuns != 0 {
		out += fmt.Sprintf("; at most %d runs", s.MaxRuns)
	}
	return out
}

func describeMissed(p MissedPolicy, n int) string {
	if p == MissedCatchUp {
		return fmt.Sprintf("catch-up %d", n)
	}
	return p.String()
}

// diff lists the fields of the definition o that differ from s.
func diff(s, o *store.Schedule) string {
	var d []string
	add := func(field string, a, b any) {
		if fmt.Sprint(a) != fmt.Sprint(b) {
			d = append(d, fmt.Sprintf("%s %v -> %v", field, a, b))
		}
	}
	add("cron", s.Cron, o.Cron)
	add("every", time.Duration(s.Every), time.Duration(o.Every))
	add("tz", s.TZ, o.TZ)
	add("queue", s.Queue, o.Queue)
	add("kind", s.Kind, o.Kind)
	add("payload", string(s.Payload), string(o.Payload))
	add("priority", s.Priority, o.Priority)
	add("missed", describeMissed(MissedPolicy(s.Missed), s.CatchUp), describeMissed(MissedPolicy(o.Missed), o.CatchUp))
	add("overlap", OverlapPolicy(s.Overlap), OverlapPolicy(o.Overlap))
	add("grace", time.Duration(s.Grace), time.Duration(o.Grace))
	add("unique", s.Unique, o.Unique)
	add("run immediately", s.RunFirst, o.RunFirst)
	add("end", nanoTime(s.EndAt).UTC(), nanoTime(o.EndAt).UTC())
	add("max runs", s.MaxRuns, o.MaxRuns)
	return strings.Join(d, "; ")
}

// scheduleTiming returns a stored schedule's timing.
func scheduleTiming(s *store.Schedule) (*timing, error) {
	return newTiming(s.Cron, time.Duration(s.Every), s.TZ, time.Unix(0, s.Anchor))
}

// RegisterSchedule stores s, or updates the stored schedule of its name, and
// returns what it did. Registering the same definition again changes
// nothing (every process of an application registers its schedules at
// startup; that is the normal case). A changed definition replaces the
// stored one, is logged (level Info, with the changed fields) and recorded
// in the history; the next occurrence is recomputed only when the timing
// (Cron, Every, TimeZone) changed. Registration never pauses or resumes a
// schedule: a schedule paused by an operator stays paused across restarts.
//
// Errors: a *ScheduleError (errors.Is ErrInvalidSchedule) naming the
// schedule and the field for invalid input — an unparsable cron expression,
// an unknown time zone, an interval below MinScheduleInterval, a job that
// does not encode as JSON — with nothing stored; ErrClosed, ErrReadOnly.
func (q *Queue) RegisterSchedule(ctx context.Context, s Schedule) (ScheduleChange, error) {
	if err := q.writable(); err != nil {
		return ScheduleUnchanged, err
	}
	now := q.clock.Now()
	def, _, err := q.validateSchedule(s, now)
	if err != nil {
		return ScheduleUnchanged, err
	}
	prev, stored, err := q.store.UpsertSchedule(ctx, def, now.UnixNano(), summary(&def))
	if err != nil {
		return ScheduleUnchanged, wrapf("litequeue: register schedule %q: %w", s.Name, err)
	}
	change := ScheduleChange(stored)
	switch change {
	case ScheduleCreated:
		q.log.Info("litequeue: schedule registered", LogSchedule, s.Name, "definition", summary(&def),
			"next", time.Unix(0, def.NextAt))
	case ScheduleUpdated:
		q.log.Info("litequeue: schedule updated", LogSchedule, s.Name, "changes", diff(prev, &def))
	}
	if change != ScheduleUnchanged {
		q.wakeScheduler()
	}
	return change, nil
}

// LogSchedule is the log key of a schedule's name.
const LogSchedule = "schedule"

// RemoveSchedule deletes the named schedule and its history
// (ErrScheduleNotFound if there is none). Jobs it already enqueued stay. A
// process that registers the schedule again at its next start brings it
// back: remove it from the code too.
func (q *Queue) RemoveSchedule(ctx context.Context, name string) error {
	if err := q.writable(); err != nil {
		return err
	}
	if err := q.store.RemoveSchedule(ctx, name); err != nil {
		return wrapf("litequeue: remove schedule: %w", err)
	}
	q.log.Info("litequeue: schedule removed", LogSchedule, name)
	q.wakeScheduler()
	return nil
}

// PauseSchedule stops the named schedule from enqueueing until
// ResumeSchedule; occurrences that pass meanwhile are not run and not
// counted as missed. Pausing a paused schedule does nothing.
// ErrScheduleNotFound if there is none.
func (q *Queue) PauseSchedule(ctx context.Context, name string) error {
	return q.setPaused(ctx, name, true)
}

// ResumeSchedule resumes a paused schedule from its next occurrence after
// now. Resuming a running schedule does nothing. ErrScheduleNotFound if
// there is none.
func (q *Queue) ResumeSchedule(ctx context.Context, name string) error {
	return q.setPaused(ctx, name, false)
}

func (q *Queue) setPaused(ctx context.Context, name string, paused bool) error {
	if err := q.writable(); err != nil {
		return err
	}
	st := q.store
	now := q.clock.Now()
	var next int64
	if !paused {
		ss, err := st.Schedules(ctx, name)
		if err != nil {
			return wrapf("litequeue: resume schedule: %w", err)
		}
		if len(ss) == 0 {
			return wrapf("litequeue: resume schedule: %w: %q", ErrScheduleNotFound, name)
		}
		t, err := scheduleTiming(&ss[0])
		if err != nil {
			return fmt.Errorf("litequeue: resume schedule %q: stored definition: %w", name, err)
		}
		next = t.next(now).UnixNano()
		if ended(&ss[0], next) {
			next = store.NeverAt
		}
	}
	verb := map[bool]string{true: "pause", false: "resume"}[paused]
	if err := st.PauseSchedule(ctx, name, paused, next, now.UnixNano()); err != nil {
		return wrapf("litequeue: %s schedule: %w", verb, err)
	}
	q.log.Info("litequeue: schedule "+verb+"d", LogSchedule, name)
	q.wakeScheduler()
	return nil
}

// TriggerSchedule enqueues one extra occurrence of the named schedule now,
// whatever its overlap policy and even when paused, and returns the job's
// id. The schedule's next occurrence stays as it was.
//
// Errors: ErrScheduleNotFound if there is none; when the schedule's job is
// unique (see Schedule.Job) and a twin blocks it, what Enqueue returns for
// the job: the twin's id with a *UniqueError (errors.Is ErrDuplicate), or
// id 0 and ErrUniqueRejected with ConflictReject; nothing is enqueued, an
// EventDuplicate is emitted and the history records a "duplicate" event.
func (q *Queue) TriggerSchedule(ctx context.Context, name string) (int64, error) {
	if err := q.writable(); err != nil {
		return 0, err
	}
	now := q.clock.Now()
	var u *UniqueOptions
	var nj store.NewJob
	id, queue, kind, err := q.store.TriggerSchedule(ctx, name, now.UnixNano(), func(s *store.Schedule, j *store.NewJob) error {
		var err error
		if u, err = scheduleUnique(s, j); err != nil {
			return err
		}
		if err := occurrenceMeta(j, j.VisibleAt); err != nil {
			return err
		}
		nj = *j
		return nil
	})
	var ue *UniqueError
	if errors.As(err, &ue) {
		q.log.Info("litequeue: schedule trigger is a duplicate; nothing enqueued", LogSchedule, name, LogJobID, ue.ID)
		q.emit(Event{Type: EventDuplicate, JobID: ue.ID, Queue: queue, Kind: kind, Err: err})
		if u != nil && u.OnConflict == ConflictReject {
			return 0, wrapf("litequeue: trigger schedule %q: %w: %w", name, ErrUniqueRejected, ue)
		}
		return ue.ID, wrapf("litequeue: trigger schedule %q: %w", name, err)
	}
	if err != nil {
		return 0, wrapf("litequeue: trigger schedule: %w", err)
	}
	q.log.Info("litequeue: schedule triggered", LogSchedule, name, LogJobID, id)
	if nj.Unique != nil && nj.Unique.Replaced != 0 {
		q.emit(Event{Type: EventReplaced, JobID: nj.Unique.Replaced, Queue: queue, Kind: kind})
	}
	q.emit(Event{Type: EventEnqueued, JobID: id, Queue: queue, Kind: kind})
	q.wake(queue)
	return id, nil
}

// Schedules returns every stored schedule, by name. It works on a
// read-only queue too.
func (q *Queue) Schedules(ctx context.Context) ([]ScheduleInfo, error) {
	ss, err := q.store.Schedules(ctx, "")
	if err != nil {
		return nil, wrapf("litequeue: schedules: %w", err)
	}
	out := make([]ScheduleInfo, len(ss))
	for i := range ss {
		out[i] = publicSchedule(&ss[i])
	}
	return out, nil
}

// ScheduleHistory returns the named schedule's newest events, newest first,
// at most limit (<= 0: all kept, the newest 200). An unknown name has no
// events.
func (q *Queue) ScheduleHistory(ctx context.Context, name string, limit int) ([]ScheduleEvent, error) {
	ev, err := q.store.ScheduleHistory(ctx, name, limit)
	if err != nil {
		return nil, wrapf("litequeue: schedule history: %w", err)
	}
	out := make([]ScheduleEvent, len(ev))
	for i, e := range ev {
		out[i] = ScheduleEvent{ID: e.ID, Time: nanoTime(e.At), Type: e.Type, Occurrence: nanoTime(e.Occurrence),
			Last: nanoTime(e.Last), JobID: e.JobID, Count: e.Count, Detail: e.Detail}
	}
	return out, nil
}

func publicSchedule(s *store.Schedule) ScheduleInfo {
	t, _ := scheduleTiming(s)
	u, _ := decodeUnique(s.Unique)
	tz := s.TZ
	outcome := ""
	switch s.LastState {
	case -2:
		outcome = "done"
	case 0:
		outcome = "pending"
	case 1:
		outcome = "running"
	case 2:
		outcome = "completed"
	case 3:
		outcome = "dead"
	case 4:
		outcome = "cancelled"
	}
	info := ScheduleInfo{
		Name: s.Name, Cron: s.Cron, Every: time.Duration(s.Every), TimeZone: tz, Queue: s.Queue, Kind: s.Kind,
		Payload: json.RawMessage(s.Payload), Priority: s.Priority, Missed: MissedPolicy(s.Missed), CatchUp: s.CatchUp,
		Overlap: OverlapPolicy(s.Overlap), Grace: time.Duration(s.Grace), Paused: s.Paused, Waiting: s.Waiting,
		NextRun: nanoTime(s.NextAt), LastRun: nanoTime(s.LastAt), LastJobID: s.LastJob, LastOutcome: outcome,
		MissedCount: s.MissedCount, Revision: s.Revision, Created: nanoTime(s.CreatedAt), Updated: nanoTime(s.UpdatedAt),
		Unique: u, timing: t,
		RunImmediately: s.RunFirst, EndAt: nanoTime(s.EndAt), MaxRuns: int(s.MaxRuns), RunCount: s.RunCount,
	}
	if s.NextAt == store.NeverAt && (s.EndAt != 0 || s.MaxRuns != 0) {
		info.Ended, info.NextRun = true, time.Time{}
	}
	return info
}

// wakeScheduler wakes this process's scheduler, if the queue runs.
func (q *Queue) wakeScheduler() {
	q.mu.Lock()
	run := q.run
	q.mu.Unlock()
	if run != nil {
		run.sched.wake()
	}
}
