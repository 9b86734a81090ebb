package store

import (
	"bytes"
	"context"
	"errors"
	"strings"
)

// Schedules is the storage of durable schedules (recurring jobs), part of
// every Backend.
//
// Rules every implementation keeps:
//   - FireSchedule is one transaction: it checks that the schedule still has
//     the NextAt and Revision the caller planned from and is not paused
//     (else it changes nothing and reports Stale), enqueues the firing's
//     jobs (keys set by the caller) as Insert does, records the history and
//     moves NextAt — so processes racing on one occurrence enqueue one job.
//     A job whose key a live job holds is not inserted; its IDs entry is the
//     holder's and New is false. A job whose Unique a twin blocks is not
//     inserted either: its IDs entry is the twin's, New is false, Dups
//     holds the *UniqueError, the history records a "duplicate" event
//     naming the twin, and LastAt and LastJob stay. A replaced twin is
//     reported on the job's Unique.Replaced, as Insert reports it.
//   - The overlap check is made inside that transaction: a schedule has a
//     live job when a pending or running job's key starts with
//     ScheduleKeyPrefix(name). OverlapWait with a live job: nothing is
//     enqueued, NextAt stays, Waiting is set (with a "waiting" event the
//     first time) and Held reported. OverlapSkip with a live job: the
//     jobs are not enqueued, a "skipped" event records them, NextAt moves,
//     OverlapHit is reported; MissedCount does not count them.
//   - Each schedule keeps its newest ScheduleHistoryKeep events.
//   - Times are int64 Unix nanoseconds from the caller's Clock.
type Schedules interface {
	// UpsertSchedule stores def under def.Name. A new schedule is inserted
	// as given (NextAt, Anchor; Revision 1) with a "registered" event
	// whose detail is detail. An existing one with the same definition
	// (SameDefinition) is left alone: ScheduleUnchanged, nothing written.
	// Otherwise its definition is replaced, Revision raised and Waiting
	// cleared, with an "updated" event; NextAt and Anchor are replaced only
	// when its timing changed (SameTiming). Paused is never changed. prev
	// is the stored schedule before, if any.
	UpsertSchedule(ctx context.Context, def Schedule, now int64, detail string) (prev *Schedule, change ScheduleChange, err error)
	// RemoveSchedule deletes a schedule and its history
	// (ErrScheduleNotFound). Jobs it enqueued stay.
	RemoveSchedule(ctx context.Context, name string) error
	// PauseSchedule sets Paused (raising Revision, with a "paused" or
	// "resumed" event); when resuming it sets NextAt to next and clears
	// Waiting. Setting the state it has changes nothing.
	// ErrScheduleNotFound for an unknown name.
	PauseSchedule(ctx context.Context, name string, paused bool, next, now int64) error
	// Schedules returns every schedule by name (name non-empty: that one)
	// with LastState, the state of its LastJob.
	Schedules(ctx context.Context, name string) ([]Schedule, error)
	// FireSchedule runs one firing (see the rules above).
	FireSchedule(ctx context.Context, f Firing) (FireResult, error)
	// TriggerSchedule enqueues one extra occurrence now, with the key
	// ScheduleKeyPrefix(name)+"t"+now, whatever the overlap policy and
	// pause (unique, if not nil, sets the job's Unique from the stored
	// schedule, in the transaction; its error aborts), sets LastAt and LastJob
	// and records a "triggered" event; NextAt stays. When a twin blocks the
	// job, nothing is enqueued, a "duplicate" event names the twin, and the
	// twin's id is returned with its *UniqueError (committed: the event
	// stays). ErrScheduleNotFound for an unknown name.
	TriggerSchedule(ctx context.Context, name string, now int64, unique func(*Schedule, *NewJob) error) (id int64, queue, kind string, err error)
	// ScheduleHistory returns a schedule's newest events, newest first; limit
	// <= 0 means all that are kept.
	ScheduleHistory(ctx context.Context, name string, limit int) ([]ScheduleEvent, error)
}

// ErrScheduleNotFound: no schedule has the name.
var ErrScheduleNotFound = errors.New("litequeue: schedule not found")

// ScheduleHistoryKeep is how many events each schedule keeps.
const ScheduleHistoryKeep = 200

// Missed-occurrence policies (Schedule.Missed).
const (
	MissedRunOnce = 0
	MissedSkip    = 1
	MissedCatchUp = 2
)

// Overlap policies (Schedule.Overlap, Firing.Overlap).
const (
	OverlapAllow = 0
	OverlapSkip  = 1
	OverlapWait  = 2
)

// Schedule is a stored schedule. Cron is a cron expression read in TZ, or
// "" for an interval schedule of Every nanoseconds whose occurrences are
// Anchor + k*Every.
type Schedule struct {
	Name        string
	Cron        string
	Every       int64
	Anchor      int64
	TZ          string
	Queue, Kind string
	Payload     []byte
	Priority    int
	Missed      int // MissedRunOnce, MissedSkip, MissedCatchUp
	CatchUp     int
	Overlap     int // OverlapAllow, OverlapSkip, OverlapWait
	Grace       int64
	Paused      bool
	Waiting     bool  // an occurrence waits for the previous job (OverlapWait)
	NextAt      int64 // the next occurrence not yet handled
	Revision    int64 // raised by every change of definition or pause
	LastAt      int64 // the occurrence of the last job enqueued; 0: none
	LastJob     int64 // its id; 0: none
	LastState   int   // of LastJob: -1 none, -2 the row is gone, else its State
	MissedCount int64 // occurrences skipped as missed
	CreatedAt   int64
	UpdatedAt   int64
	// Unique is the uniqueness of the schedule's jobs, encoded by the
	// caller ("" for none): part of the definition.
	Unique string
	// EndAt, when not 0, is the last moment an occurrence may have;
	// MaxRuns, when not 0, the most occurrences the schedule enqueues
	// (RunCount so far, triggers not counted); RunFirst makes the first
	// occurrence the registration (see ScheduleSQL.Upsert). Once a
	// schedule ended its NextAt is NeverAt.
	EndAt    int64
	MaxRuns  int64
	RunCount int64
	RunFirst bool
}

// NeverAt is the NextAt of a schedule that has no occurrence left.
const NeverAt = 1<<63 - 1

// SameTiming reports whether s and o have the same cron, interval and zone.
func (s *Schedule) SameTiming(o *Schedule) bool {
	return s.Cron == o.Cron && s.Every == o.Every && s.TZ == o.TZ
}

// SameDefinition reports whether s and o define the same schedule: timing,
// job and policies.
func (s *Schedule) SameDefinition(o *Schedule) bool {
	return s.SameTiming(o) && s.Queue == o.Queue && s.Kind == o.Kind && bytes.Equal(s.Payload, o.Payload) &&
		s.Priority == o.Priority && s.Missed == o.Missed && s.CatchUp == o.CatchUp && s.Overlap == o.Overlap && s.Grace == o.Grace &&
		s.Unique == o.Unique && s.EndAt == o.EndAt && s.MaxRuns == o.MaxRuns && s.RunFirst == o.RunFirst
}

// ScheduleChange says what UpsertSchedule did.
type ScheduleChange int8

const (
	ScheduleUnchanged ScheduleChange = iota
	ScheduleCreated
	ScheduleUpdated
)

// Firing is one advance of a schedule, planned at Now from NextAt and
// Revision: the occurrences to enqueue (Jobs, keys set, VisibleAt the
// occurrence) and the missed ones skipped.
type Firing struct {
	Name     string
	Revision int64
	NextAt   int64 // the planned-from next occurrence
	NewNext  int64 // the next occurrence after this firing
	Now      int64
	Jobs     []NewJob
	Late     []bool // Jobs[i] was enqueued after the schedule's grace: its event's detail is "late"
	// Skipped missed occurrences: how many, the first and the last, and the
	// detail of their "skipped" event. MissedCount grows by Skipped.
	Skipped             int64
	SkipFirst, SkipLast int64
	SkipDetail          string
	Overlap             int
	// MaxRuns and RunCount are the schedule's as planned from: when the
	// jobs this firing enqueues (or finds a twin for) bring RunCount to
	// MaxRuns, NextAt becomes NeverAt instead of NewNext. A firing that
	// leaves NextAt at NeverAt records an "ended" event, with EndDetail
	// when not the run limit.
	MaxRuns, RunCount int64
	EndDetail         string
}

// FireResult is what FireSchedule did.
type FireResult struct {
	Stale      bool    // the schedule changed, is paused or gone, or another process fired it: nothing done
	Held       bool    // overlap wait with a live job: nothing enqueued, NextAt kept
	OverlapHit bool    // overlap skip with a live job: the jobs were skipped
	IDs        []int64 // the jobs of Firing.Jobs that were enqueued or found live
	New        []bool  // IDs[i] was inserted by this firing
	Dups       []error // Dups[i]: the *UniqueError of a job its twin blocked; nil otherwise
	Ended      bool    // the schedule has no occurrence left (its "ended" event was recorded)
}

// ScheduleEvent is one record of a schedule's history. Zero times mean none.
type ScheduleEvent struct {
	ID         int64
	At         int64
	Type       string // registered, updated, paused, resumed, enqueued, triggered, skipped, waiting, duplicate, ended
	Occurrence int64
	Last       int64
	JobID      int64
	Count      int64
	Detail     string
}

// ScheduleKeyPrefix is the start of the idempotency keys of a schedule's
// jobs: "lq-schedule:", the name with '%' and ':' escaped, and ':'. An
// occurrence's key adds its Unix nanoseconds; a trigger's adds "t" and its.
func ScheduleKeyPrefix(name string) string {
	name = strings.ReplaceAll(name, "%", "%25")
	name = strings.ReplaceAll(name, ":", "%3A")
	return "lq-schedule:" + name + ":"
}

// ScheduleKeyEnd is the smallest string after every key with the prefix
// ScheduleKeyPrefix(name): keys of the schedule are in [prefix, end).
func ScheduleKeyEnd(name string) string {
	return strings.TrimSuffix(ScheduleKeyPrefix(name), ":") + ";"
}
