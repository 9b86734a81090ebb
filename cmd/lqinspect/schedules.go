package main

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // schedule times in their own zone on a machine without a zone database

	"github.com/litequeue/litequeue"
)

// defaultRuns is how many next runs of each schedule the listing shows, and
// defaultHistory how many events history shows, unless --runs or --limit
// says.
const (
	defaultRuns    = 3
	defaultHistory = 20
)

func (a *app) schedules(args []string) error {
	fs := a.newFlags("schedules", "FILE [pause NAME | resume NAME | trigger NAME | history NAME]", `
List the recurring jobs stored in the queue file: for each, its timing
(cron expression or interval, and time zone), the job it enqueues, whether
it is paused or ended (past its end date or run limit), its next run
times, its last run and that job's outcome, and how many occurrences it
missed (skipped while no process ran it); --json adds its bounds and how
many times it ran. Run times
are shown to the second in the schedule's own time zone, with its offset
(2026-03-29T03:30:00+02:00 for Europe/Berlin); --json gives them in UTC.

A schedule runs in every process that has started the queue; lqinspect
only reads and changes the stored schedule:

  pause NAME    stop enqueueing until resumed (passing occurrences are not missed)
  resume NAME   resume from the next occurrence after now
  trigger NAME  enqueue one occurrence now, leaving the schedule as it was
  history NAME  the schedule's newest events, newest first: registrations,
                changes, enqueued and skipped occurrences (--limit of them,
                default 20; stderr says when more are kept); occurrences
                in the schedule's time zone

The last outcome is pending, running, completed (kept by retention), dead,
cancelled, or done when the job's row is gone (it succeeded and was not
retained, or was purged).`)
	fs.jsonFlag()
	fs.fileFlags(true)
	runs := fs.Int("runs", defaultRuns, "listing: how many next runs of each schedule to show")
	limit := fs.Int("limit", defaultHistory, "history: how many of the newest events to show; 0 for all the queue keeps")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("missing FILE")
	}
	path := pos[0]
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if len(pos) == 1 {
		switch {
		case given["limit"]:
			return usagef("--limit counts the events of history NAME; for how many next runs to list, use --runs")
		case *runs < 0:
			return usagef("--runs %d is negative", *runs)
		}
		return a.listSchedules(fs, path, *runs)
	}
	if given["runs"] {
		return usagef("--runs is for the listing (lqinspect schedules FILE --runs N); %s takes no --runs", pos[1])
	}
	verb := pos[1]
	if len(pos) != 3 {
		if len(pos) == 2 && slices.Contains([]string{"pause", "resume", "trigger", "history"}, verb) {
			return usagef("%s needs the NAME of a schedule", verb)
		}
		return usagef("want FILE, or FILE followed by pause, resume, trigger or history and a NAME; got %s", strings.Join(pos, " "))
	}
	name := pos[2]
	switch verb {
	case "history":
		return a.scheduleHistory(fs, path, name, *limit)
	case "pause", "resume", "trigger":
	default:
		if m := suggest(verb, []string{"pause", "resume", "trigger", "history"}); len(m) > 0 {
			return usagef("%q is not an action of schedules; did you mean %q?", verb, m[0])
		}
		return usagef("%q is not an action of schedules (pause, resume, trigger or history)", verb)
	}
	f, err := a.open(path, fs, true)
	if err != nil {
		return err
	}
	defer f.Close()
	ctx, cancel := f.writeCtx(a.ctx)
	defer cancel()
	var id int64
	switch verb {
	case "pause":
		err = f.q.PauseSchedule(ctx, name)
	case "resume":
		err = f.q.ResumeSchedule(ctx, name)
	case "trigger":
		id, err = f.q.TriggerSchedule(ctx, name)
	}
	if err != nil {
		return f.lockedError(err)
	}
	if fs.json {
		out := map[string]any{"schedule": name, "action": verb}
		if id != 0 {
			out["job_id"] = id
		}
		return writeJSON(a.stdout, out)
	}
	switch verb {
	case "trigger":
		_, err = fmt.Fprintf(a.stdout, "triggered %s: enqueued job %d\n", safeLine(name), id)
	default:
		_, err = fmt.Fprintf(a.stdout, "%sd %s\n", verb, safeLine(name))
	}
	return err
}

// scheduleJSON is a schedule as --json prints it.
type scheduleJSON struct {
	Name        string      `json:"name"`
	Cron        string      `json:"cron,omitempty"`
	Every       string      `json:"every,omitempty"`
	TimeZone    string      `json:"time_zone"`
	Queue       string      `json:"queue"`
	Kind        string      `json:"kind"`
	Payload     any         `json:"payload"`
	Priority    int         `json:"priority"`
	Missed      string      `json:"missed_policy"`
	Overlap     string      `json:"overlap_policy"`
	Paused      bool        `json:"paused"`
	Waiting     bool        `json:"waiting"`
	Overdue     bool        `json:"overdue"`
	NextRuns    []time.Time `json:"next_runs"`
	LastRun     *time.Time  `json:"last_run"`
	LastJobID   int64       `json:"last_job_id,omitempty"`
	LastOutcome string      `json:"last_outcome,omitempty"`
	MissedCount int64       `json:"missed_count"`
	// The bounds (see litequeue.Schedule) and the runs so far.
	RunImmediately bool       `json:"run_immediately,omitempty"`
	EndAt          *time.Time `json:"end_at,omitempty"`
	MaxRuns        int        `json:"max_runs,omitempty"`
	RunCount       int64      `json:"run_count"`
	Ended          bool       `json:"ended,omitempty"`
}

func missedPolicy(s litequeue.ScheduleInfo) string {
	if s.Missed == litequeue.MissedCatchUp {
		return "catch-up " + strconv.Itoa(s.CatchUp)
	}
	return s.Missed.String()
}

// runsOf returns the schedule's next n runs: its stored next occurrence
// first, even when past (no process ran it yet), then those after it.
func runsOf(s litequeue.ScheduleInfo, now time.Time, n int) []time.Time {
	if s.Paused || n <= 0 {
		return nil
	}
	from := now
	if s.NextRun.Before(now) {
		from = s.NextRun.Add(-time.Nanosecond)
	}
	runs := s.NextRuns(from, n)
	for i := range runs {
		runs[i] = runs[i].UTC()
	}
	return runs
}

// scheduleState is paused, waiting (an occurrence waits for the previous
// job), ended (past its end date or run limit), overdue (the next
// occurrence passed: no process runs the queue) or active.
func scheduleState(s litequeue.ScheduleInfo, now time.Time) string {
	switch {
	case s.Paused:
		return "paused"
	case s.Waiting:
		return "waiting"
	case s.Ended:
		return "ended"
	case s.NextRun.Before(now):
		return "overdue"
	}
	return "active"
}

// zoneOf returns the time zone s runs in, for showing its times as its
// cron expression reads them; UTC for an interval schedule, and for a zone
// this machine cannot load (the embedded database knows every IANA zone, so
// only a name newer than this build's).
func zoneOf(s litequeue.ScheduleInfo) *time.Location {
	if s.TimeZone == "" || s.TimeZone == "UTC" {
		return time.UTC
	}
	loc, err := time.LoadLocation(s.TimeZone)
	if err != nil {
		return time.UTC
	}
	return loc
}

func (a *app) listSchedules(fs *flagSet, path string, runs int) error {
	f, err := a.open(path, fs, false)
	if err != nil {
		return err
	}
	defer f.Close()
	all, err := f.q.Schedules(a.ctx)
	if err != nil {
		return err
	}
	now := f.now()
	if fs.json {
		out := make([]scheduleJSON, len(all))
		for i, s := range all {
			j := scheduleJSON{Name: s.Name, Cron: s.Cron, TimeZone: s.TimeZone, Queue: s.Queue, Kind: s.Kind,
				Payload: s.Payload, Priority: s.Priority, Missed: missedPolicy(s), Overlap: s.Overlap.String(),
				Paused: s.Paused, Waiting: s.Waiting, Overdue: scheduleState(s, now) == "overdue",
				NextRuns: runsOf(s, now, runs), LastJobID: s.LastJobID, LastOutcome: s.LastOutcome, MissedCount: s.MissedCount,
				RunImmediately: s.RunImmediately, MaxRuns: s.MaxRuns, RunCount: s.RunCount, Ended: s.Ended}
			if !s.EndAt.IsZero() {
				e := s.EndAt.UTC()
				j.EndAt = &e
			}
			if s.Every != 0 {
				j.Every = s.Every.String()
			}
			if !s.LastRun.IsZero() {
				t := s.LastRun.UTC()
				j.LastRun = &t
			}
			if j.NextRuns == nil {
				j.NextRuns = []time.Time{}
			}
			out[i] = j
		}
		return writeList(a.stdout, out)
	}
	rows := make([][]string, len(all))
	for i, s := range all {
		when := s.Cron
		if s.Every != 0 {
			when = "every " + s.Every.String()
		}
		if s.TimeZone != "UTC" {
			when += " " + s.TimeZone
		}
		loc := zoneOf(s)
		next := none
		if rs := runsOf(s, now, runs); len(rs) > 0 {
			ts := make([]string, len(rs))
			for k, t := range rs {
				ts[k] = t.In(loc).Format(time.RFC3339)
			}
			next = strings.Join(ts, ", ") + " (" + relTime(rs[0], now) + ")"
		}
		last := none
		if !s.LastRun.IsZero() {
			last = fmt.Sprintf("%s job %d %s", s.LastRun.In(loc).Format(time.RFC3339), s.LastJobID, s.LastOutcome)
		}
		rows[i] = []string{s.Name, when, s.Kind + "@" + s.Queue, scheduleState(s, now), next, last, strconv.FormatInt(s.MissedCount, 10)}
	}
	return table(a.stdout, "no schedules", []string{"NAME", "WHEN", "JOB", "STATE", "NEXT RUNS", "LAST RUN", "MISSED"}, rows)
}

func (a *app) scheduleHistory(fs *flagSet, path, name string, limit int) error {
	if limit < 0 {
		return usagef("--limit %d is negative", limit)
	}
	f, err := a.open(path, fs, false)
	if err != nil {
		return err
	}
	defer f.Close()
	all, err := f.q.Schedules(a.ctx)
	if err != nil {
		return err
	}
	known, loc := false, time.UTC
	var names []string
	for _, s := range all {
		if s.Name == name {
			known, loc = true, zoneOf(s)
		}
		names = append(names, s.Name)
	}
	if !known {
		msg := fmt.Sprintf("no schedule %q", name)
		if m := suggest(name, names); len(m) > 0 {
			msg += fmt.Sprintf("; did you mean %q?", m[0])
		}
		return fmt.Errorf("%s: %w", msg, litequeue.ErrScheduleNotFound)
	}
	ask := limit
	if limit > 0 {
		ask = limit + 1 // one more, to tell whether more are kept
	}
	events, err := f.q.ScheduleHistory(a.ctx, name, ask)
	if err != nil {
		return err
	}
	more := limit > 0 && len(events) > limit
	if more {
		events = events[:limit]
		// Never cut silently, with --json neither: stdout stays one JSON
		// document, stderr says there is more.
		defer fmt.Fprintf(a.stderr, "showing the newest %d events of %s; older ones are kept: --limit N for more, --limit 0 for all\n", limit, safeLine(name))
	}
	if fs.json {
		type eventJSON struct {
			Time       time.Time  `json:"time"`
			Type       string     `json:"type"`
			Occurrence *time.Time `json:"occurrence,omitempty"`
			Last       *time.Time `json:"last,omitempty"`
			JobID      int64      `json:"job_id,omitempty"`
			Count      int64      `json:"count,omitempty"`
			Detail     string     `json:"detail,omitempty"`
		}
		opt := func(t time.Time) *time.Time {
			if t.IsZero() {
				return nil
			}
			u := t.UTC()
			return &u
		}
		out := make([]eventJSON, len(events))
		for i, e := range events {
			out[i] = eventJSON{Time: e.Time.UTC(), Type: e.Type, Occurrence: opt(e.Occurrence), Last: opt(e.Last),
				JobID: e.JobID, Count: e.Count, Detail: e.Detail}
		}
		return writeList(a.stdout, out)
	}
	now := f.now()
	rows := make([][]string, len(events))
	for i, e := range events {
		occ := none
		switch {
		case !e.Last.IsZero() && !e.Last.Equal(e.Occurrence):
			occ = e.Occurrence.In(loc).Format(time.RFC3339) + " .. " + e.Last.In(loc).Format(time.RFC3339)
		case !e.Occurrence.IsZero():
			occ = e.Occurrence.In(loc).Format(time.RFC3339)
		}
		job := none
		if e.JobID != 0 {
			job = strconv.FormatInt(e.JobID, 10)
		}
		count := ""
		if e.Type == "skipped" {
			count = strconv.FormatInt(e.Count, 10)
		}
		rows[i] = []string{whenTime(e.Time, now), e.Type, occ, count, job, orNone(e.Detail)}
	}
	return table(a.stdout, "no events", []string{"TIME", "EVENT", "OCCURRENCE", "COUNT", "JOB", "DETAIL"}, rows)
}
