package litequeue

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// timing computes a schedule's occurrences: a cron expression in a time
// zone, or a fixed interval from an anchor.
type timing struct {
	spec     *cron.SpecSchedule // cron schedules; its Location is UTC (wall-clock arithmetic)
	everyHr  bool               // the hour field matches every hour: follow real time
	loc      *time.Location
	every    time.Duration // interval schedules
	anchor   time.Time
	schedule string // the cron expression, for messages
}

// MinScheduleInterval is the shortest Schedule.Every accepted.
const MinScheduleInterval = time.Second

// allHours is the Hour bit mask of a cron field that matches every hour.
const allHours = 1<<24 - 1

// parseCron parses expr with robfig/cron's standard parser: five fields
// (minute hour day-of-month month day-of-week) or a descriptor (@hourly,
// @daily, @weekly, @monthly, @yearly, @every D). An "@every D" descriptor
// comes back as every > 0.
func parseCron(expr string) (spec *cron.SpecSchedule, every time.Duration, err error) {
	t := strings.TrimSpace(expr)
	if strings.HasPrefix(t, "TZ=") || strings.HasPrefix(t, "CRON_TZ=") {
		return nil, 0, errors.New("a time zone prefix is not accepted here; set Schedule.TimeZone instead")
	}
	if d, ok := strings.CutPrefix(t, "@every "); ok {
		// robfig/cron rounds intervals below a second up to one; say so
		// instead.
		every, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil {
			return nil, 0, fmt.Errorf("interval of @every: %v", err)
		}
		if every < MinScheduleInterval {
			return nil, 0, fmt.Errorf("interval %s of %q is shorter than %s", every, t, MinScheduleInterval)
		}
		return nil, every, nil
	}
	s, err := cron.ParseStandard(t)
	if err != nil {
		return nil, 0, err
	}
	switch s := s.(type) {
	case *cron.SpecSchedule:
		c := *s
		c.Location = time.UTC
		return &c, 0, nil
	case cron.ConstantDelaySchedule:
		return nil, s.Delay, nil
	}
	return nil, 0, fmt.Errorf("unsupported schedule type %T", s)
}

// newTiming makes the timing of a stored or registered schedule.
func newTiming(cronExpr string, every time.Duration, tz string, anchor time.Time) (*timing, error) {
	loc, err := loadZone(tz)
	if err != nil {
		return nil, err
	}
	t := &timing{loc: loc, every: every, anchor: anchor, schedule: cronExpr}
	if cronExpr != "" {
		spec, e, err := parseCron(cronExpr)
		if err != nil {
			return nil, err
		}
		if e > 0 {
			t.every = e
		} else {
			t.spec = spec
			t.everyHr = spec.Hour&allHours == allHours
		}
	}
	return t, nil
}

// loadZone loads an IANA time zone; "" is UTC. "Local" is refused: it would
// mean a different zone on each machine sharing the queue.
func loadZone(tz string) (*time.Location, error) {
	switch tz {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		return nil, errors.New(`"Local" differs between machines; name an IANA zone such as "Europe/Berlin"`)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q (use an IANA name such as \"America/New_York\"): %v", tz, err)
	}
	return loc, nil
}

// next returns the first occurrence strictly after after, or the zero time
// if there is none (a cron expression that matches no date in five years).
func (t *timing) next(after time.Time) time.Time {
	if t.spec == nil {
		// anchor + k*every, the smallest such time after after.
		if after.Before(t.anchor) {
			return t.anchor
		}
		k := after.Sub(t.anchor)/t.every + 1
		if k > (maxStoredTime.Sub(t.anchor))/t.every {
			return time.Time{}
		}
		return t.anchor.Add(k * t.every)
	}
	start := wall(after.In(t.loc))
	// Near a change of the zone's offset a wall time may come twice: look
	// back far enough to see the first of them again.
	if offsetAt(after.Add(-3*time.Hour), t.loc) != offsetAt(after.Add(3*time.Hour), t.loc) {
		start = start.Add(-3 * time.Hour)
	}
	// Wall times come in order, their instants not always: in a repeated
	// hour an hour-* schedule's 01:00 runs a second time after the first
	// pass's 01:30. So keep the earliest instant found, and stop at the
	// first wall time that cannot run before it.
	var best, limit time.Time
	w := start
	for range 100000 {
		w = t.spec.Next(w)
		if w.IsZero() || (!best.IsZero() && w.After(limit)) {
			break
		}
		for _, at := range t.instants(w) {
			if at.After(after) && (best.IsZero() || at.Before(best)) {
				best = at
				// A wall time runs no earlier than itself read at the
				// largest offset around.
				limit = time.Unix(best.Unix()+int64(maxOffsetAround(best, t.loc)), int64(best.Nanosecond())).UTC()
			}
		}
	}
	return best
}

// maxOffsetAround returns the largest offset of loc within 36 hours of at,
// sampled as instants samples them.
func maxOffsetAround(at time.Time, loc *time.Location) int {
	m := offsetAt(at, loc)
	for _, h := range []time.Duration{-36, -24, -12, 12, 24, 36} {
		m = max(m, offsetAt(at.Add(h*time.Hour), loc))
	}
	return m
}

// instants returns the moments, in order, at which the matching wall time w
// (a wall-clock reading held in UTC) runs, by the documented rule: a
// schedule that names its hours runs each wall time once — the first time a
// repeated wall time comes, and a wall time the clock skips at the moment
// it would have been, shifted by the jump; a schedule whose hour field
// matches every hour follows real time — a repeated wall time runs each
// time it comes, a skipped one never.
func (t *timing) instants(w time.Time) []time.Time {
	u := w.Unix()
	var offs []int
	for _, h := range []int64{-36, -24, -12, 0, 12, 24, 36} {
		if o := offsetAt(time.Unix(u+h*3600, 0), t.loc); !slices.Contains(offs, o) {
			offs = append(offs, o)
		}
	}
	var ts []time.Time
	for _, o := range offs {
		at := time.Unix(u-int64(o), int64(w.Nanosecond())).In(t.loc)
		if wall(at).Equal(w) && !slices.ContainsFunc(ts, at.Equal) {
			ts = append(ts, at)
		}
	}
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	switch {
	case len(ts) == 0 && t.everyHr:
		return nil
	case len(ts) == 0:
		// In a gap: the offset before the jump is the smaller one.
		return []time.Time{time.Unix(u-int64(slices.Min(offs)), int64(w.Nanosecond())).In(t.loc)}
	case !t.everyHr:
		return ts[:1]
	}
	return ts
}

// wall returns t's wall-clock reading in its location, held in UTC.
func wall(t time.Time) time.Time {
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	return time.Date(y, mo, d, h, mi, s, t.Nanosecond(), time.UTC)
}

func offsetAt(t time.Time, loc *time.Location) int {
	_, o := t.In(loc).Zone()
	return o
}

// dueSlots returns the occurrences from first (the stored next occurrence)
// up to now, at most keep of the latest of them, the number of those before
// them, and the first occurrence after now. It counts without keeping every
// slot, so a schedule asleep for a long time costs time, not memory.
func (t *timing) dueSlots(first, now time.Time, keep int) (latest []time.Time, dropped int64, earliestDropped, lastDropped time.Time, next time.Time) {
	if first.After(now) {
		return nil, 0, time.Time{}, time.Time{}, first
	}
	if t.spec == nil {
		// Arithmetic: occurrences first + k*every.
		n := int64(now.Sub(first)/t.every) + 1
		for i := max(0, n-int64(keep)); i < n; i++ {
			latest = append(latest, first.Add(time.Duration(i)*t.every))
		}
		dropped = n - int64(len(latest))
		if dropped > 0 {
			earliestDropped = first
			lastDropped = first.Add(time.Duration(dropped-1) * t.every)
		}
		return latest, dropped, earliestDropped, lastDropped, t.next(now)
	}
	at := first
	for !at.IsZero() && !at.After(now) {
		latest = append(latest, at)
		if len(latest) > keep {
			if dropped == 0 {
				earliestDropped = latest[0]
			}
			lastDropped = latest[0]
			dropped++
			latest = latest[1:] // amortized: append reallocates at about 2*keep
		}
		at = t.next(at)
	}
	return latest, dropped, earliestDropped, lastDropped, at
}
