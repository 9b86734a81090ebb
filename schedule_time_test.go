package litequeue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// occurrences lists a timing's occurrences in (from, to].
func occurrences(t *testing.T, tm *timing, from, to time.Time) []string {
	t.Helper()
	var out []string
	for at := tm.next(from); !at.IsZero() && !at.After(to); at = tm.next(at) {
		out = append(out, at.Format("2006-01-02 15:04 MST"))
		require.Less(t, len(out), 10000, "runaway")
	}
	return out
}

func mustTiming(t *testing.T, cronExpr string, tz string) *timing {
	t.Helper()
	tm, err := newTiming(cronExpr, 0, tz, time.Time{})
	require.NoError(t, err)
	return tm
}

func TestCronSpringForwardRunsSkippedTimeOnceShifted(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	// 2026-03-08: clocks go from 02:00 EST to 03:00 EDT.
	from := time.Date(2026, 3, 6, 12, 0, 0, 0, ny)
	to := time.Date(2026, 3, 9, 12, 0, 0, 0, ny)
	require.Equal(t, []string{
		"2026-03-07 02:30 EST",
		"2026-03-08 03:30 EDT", // 02:30 does not exist: shifted by the jump, once
		"2026-03-09 02:30 EDT",
	}, occurrences(t, mustTiming(t, "30 2 * * *", "America/New_York"), from, to))

	// Two wall times that land on one moment run once.
	require.Equal(t, []string{
		"2026-03-07 02:30 EST", "2026-03-07 03:30 EST",
		"2026-03-08 03:30 EDT",
		"2026-03-09 02:30 EDT", "2026-03-09 03:30 EDT",
	}, occurrences(t, mustTiming(t, "30 2,3 * * *", "America/New_York"), from, to))
}

func TestCronFallBackRunsRepeatedTimeOnce(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	// 2026-11-01: clocks go from 02:00 EDT back to 01:00 EST.
	from := time.Date(2026, 10, 31, 12, 0, 0, 0, ny)
	to := time.Date(2026, 11, 2, 12, 0, 0, 0, ny)
	require.Equal(t, []string{
		"2026-11-01 01:30 EDT", // the first 01:30 only
		"2026-11-02 01:30 EST",
	}, occurrences(t, mustTiming(t, "30 1 * * *", "America/New_York"), from, to))
}

func TestCronEveryHourFollowsRealTimeAcrossDST(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	fall := occurrences(t, mustTiming(t, "30 * * * *", "America/New_York"),
		time.Date(2026, 11, 1, 0, 0, 0, 0, ny), time.Date(2026, 11, 1, 3, 0, 0, 0, ny))
	require.Equal(t, []string{"2026-11-01 00:30 EDT", "2026-11-01 01:30 EDT", "2026-11-01 01:30 EST", "2026-11-01 02:30 EST"}, fall)
	spring := occurrences(t, mustTiming(t, "@hourly", "America/New_York"),
		time.Date(2026, 3, 8, 0, 30, 0, 0, ny), time.Date(2026, 3, 8, 4, 30, 0, 0, ny))
	require.Equal(t, []string{"2026-03-08 01:00 EST", "2026-03-08 03:00 EDT", "2026-03-08 04:00 EDT"}, spring)
}

// A minute step in an hour-* schedule keeps its beat through both passes of
// the repeated hour of a fall-back night: every occurrence comes once per
// pass, in real-time order, a step apart.
func TestCronMinuteStepsKeepTheirBeatThroughTheRepeatedHour(t *testing.T) {
	for _, c := range []struct {
		expr, zone string
		from, to   time.Time // UTC, occurrences in (from, to]
		want       []string
	}{{
		// 2026-11-01 06:00 UTC: 02:00 EDT becomes 01:00 EST.
		expr: "*/30 * * * *", zone: "America/New_York",
		from: utc(2026, 11, 1, 4, 0), to: utc(2026, 11, 1, 7, 30),
		want: []string{
			"2026-11-01 00:30 EDT", "2026-11-01 01:00 EDT", "2026-11-01 01:30 EDT",
			"2026-11-01 01:00 EST", "2026-11-01 01:30 EST", "2026-11-01 02:00 EST", "2026-11-01 02:30 EST",
		},
	}, {
		// 2026-04-04 16:00 UTC: 03:00 AEDT becomes 02:00 AEST.
		expr: "*/30 * * * *", zone: "Australia/Melbourne",
		from: utc(2026, 4, 4, 14, 0), to: utc(2026, 4, 4, 17, 30),
		want: []string{
			"2026-04-05 01:30 AEDT", "2026-04-05 02:00 AEDT", "2026-04-05 02:30 AEDT",
			"2026-04-05 02:00 AEST", "2026-04-05 02:30 AEST", "2026-04-05 03:00 AEST", "2026-04-05 03:30 AEST",
		},
	}, {
		// 2026-10-25 01:00 UTC: 03:00 CEST becomes 02:00 CET.
		expr: "*/15 * * * *", zone: "Europe/Berlin",
		from: utc(2026, 10, 24, 23, 30), to: utc(2026, 10, 25, 2, 15),
		want: []string{
			"2026-10-25 01:45 CEST", "2026-10-25 02:00 CEST", "2026-10-25 02:15 CEST", "2026-10-25 02:30 CEST", "2026-10-25 02:45 CEST",
			"2026-10-25 02:00 CET", "2026-10-25 02:15 CET", "2026-10-25 02:30 CET", "2026-10-25 02:45 CET",
			"2026-10-25 03:00 CET", "2026-10-25 03:15 CET",
		},
	}, {
		expr: "0 * * * *", zone: "America/New_York",
		from: utc(2026, 11, 1, 4, 0), to: utc(2026, 11, 1, 8, 0),
		want: []string{"2026-11-01 01:00 EDT", "2026-11-01 01:00 EST", "2026-11-01 02:00 EST", "2026-11-01 03:00 EST"},
	}, {
		expr: "30 * * * *", zone: "America/New_York",
		from: utc(2026, 11, 1, 4, 0), to: utc(2026, 11, 1, 8, 30),
		want: []string{"2026-11-01 00:30 EDT", "2026-11-01 01:30 EDT", "2026-11-01 01:30 EST", "2026-11-01 02:30 EST", "2026-11-01 03:30 EST"},
	}} {
		t.Run(c.zone+" "+c.expr, func(t *testing.T) {
			tm := mustTiming(t, c.expr, c.zone)
			require.Equal(t, c.want, occurrences(t, tm, c.from, c.to))
			// Each is next of the one before, a beat apart in real time,
			// also asked from any moment in between.
			step := 30 * time.Minute
			switch c.expr {
			case "*/15 * * * *":
				step = 15 * time.Minute
			case "0 * * * *", "30 * * * *":
				step = time.Hour
			}
			first := tm.next(c.from)
			for at := first; at.Before(c.to); at = at.Add(step) {
				require.Equal(t, at.Add(step), tm.next(at), "next(%s)", at.In(tm.loc))
				require.Equal(t, at.Add(step), tm.next(at.Add(step/2)), "next(%s)", at.Add(step/2).In(tm.loc))
			}
		})
	}
}

func TestCronInOtherZonesAndDescriptors(t *testing.T) {
	syd, _ := time.LoadLocation("Australia/Sydney")
	// 2026-10-04 02:00 AEST becomes 03:00 AEDT.
	require.Equal(t, []string{"2026-10-03 02:15 AEST", "2026-10-04 03:15 AEDT", "2026-10-05 02:15 AEDT"},
		occurrences(t, mustTiming(t, "15 2 * * *", "Australia/Sydney"),
			time.Date(2026, 10, 3, 0, 0, 0, 0, syd), time.Date(2026, 10, 5, 12, 0, 0, 0, syd)))
	// Monday 09:00 in UTC, and @weekly (Sunday 00:00).
	from := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC) // a Monday
	require.Equal(t, []string{"2026-11-30 09:00 UTC", "2026-12-07 09:00 UTC"},
		occurrences(t, mustTiming(t, "0 9 * * MON", ""), from, from.Add(14*24*time.Hour-time.Hour)))
	require.Equal(t, []string{"2026-12-06 00:00 UTC", "2026-12-13 00:00 UTC"},
		occurrences(t, mustTiming(t, "@weekly", ""), from, from.Add(14*24*time.Hour)))
}

func TestIntervalOccurrencesAndDueSlots(t *testing.T) {
	anchor := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tm, err := newTiming("", 10*time.Minute, "UTC", anchor)
	require.NoError(t, err)
	require.Equal(t, anchor.Add(10*time.Minute), tm.next(anchor))
	require.Equal(t, anchor.Add(20*time.Minute), tm.next(anchor.Add(10*time.Minute)))
	require.Equal(t, anchor.Add(20*time.Minute), tm.next(anchor.Add(11*time.Minute)))

	// A week asleep: 1008 occurrences; the latest 3 are kept.
	first := anchor.Add(10 * time.Minute)
	now := anchor.Add(7*24*time.Hour + 5*time.Minute)
	latest, dropped, d0, d1, next := tm.dueSlots(first, now, 3)
	require.Len(t, latest, 3)
	require.Equal(t, int64(1008-3), dropped)
	require.Equal(t, first, d0)
	require.Equal(t, latest[0].Add(-10*time.Minute), d1)
	require.Equal(t, anchor.Add(7*24*time.Hour), latest[2])
	require.Equal(t, anchor.Add(7*24*time.Hour+10*time.Minute), next)

	// The same through the cron path.
	ct := mustTiming(t, "*/10 * * * *", "")
	latest2, dropped2, d02, d12, next2 := ct.dueSlots(first, now, 3)
	require.Equal(t, latest, latest2)
	require.Equal(t, dropped, dropped2)
	require.Equal(t, d0, d02)
	require.Equal(t, d1, d12)
	require.Equal(t, next, next2)
}

// FuzzCronNext checks, for any expression the parser accepts, in zones with
// and without daylight saving time, that next never panics and gives
// strictly increasing occurrences, each at most one jump away from a
// matching wall time, by the documented rule: a schedule whose hour field
// matches every hour runs exactly the moments whose wall time matches — so
// near a change of offset no such moment lies between two occurrences, and
// both passes of a repeated hour run — while a schedule that names its
// hours runs each wall time once: a matching moment between two
// occurrences is the second pass of a repeated hour.
func FuzzCronNext(f *testing.F) {
	for _, s := range []string{"30 2 * * *", "*/15 * * * *", "@hourly", "0 9 * * 1-5", "@every 90m", "0 0 29 2 *", "30 1 * 11 SUN", "*/30 * * * *", "*/20 1-2 * * *"} {
		f.Add(s, int64(1772949600), uint8(0)) // 2026-03-08 06:00 UTC: New York springs forward at 07:00
		f.Add(s, int64(1793502000), uint8(1)) // 2026-11-01 04:00 UTC: New York falls back at 06:00
		f.Add(s, int64(1792882800), uint8(3)) // 2026-10-24 22:00 UTC: Berlin falls back at 01:00
	}
	zones := []string{"UTC", "America/New_York", "Australia/Lord_Howe", "Europe/Berlin", "Asia/Kolkata"}
	f.Fuzz(func(t *testing.T, expr string, unix int64, zone uint8) {
		tz := zones[int(zone)%len(zones)]
		tm, err := newTiming(expr, 0, tz, time.Unix(1767225600, 0))
		if err != nil || (tm.spec == nil && tm.every < MinScheduleInterval) {
			return
		}
		matches := func(w time.Time) bool { return !tm.spec.Next(w.Add(-time.Second)).After(w) }
		at := time.Unix(unix%(1<<33), 0) // years 1697–2242
		walls := map[time.Time]bool{}
		for range 20 {
			next := tm.next(at)
			if next.IsZero() {
				return
			}
			require.True(t, next.After(at), "%q in %s: next(%s) = %s", expr, tz, at, next)
			if tm.spec == nil {
				at = next
				continue
			}
			w := wall(next.In(tm.loc))
			// The wall time matches, or it is a skipped time moved by
			// the jump (at most three hours in any zone).
			moved := !tm.spec.Next(w.Add(-3*time.Hour - time.Second)).After(w)
			require.True(t, matches(w) || moved, "%q in %s: %s does not match", expr, tz, next)
			if tm.everyHr {
				require.True(t, matches(w), "%q in %s: %s does not match; an hour-* schedule moves nothing", expr, tz, next)
			} else {
				require.False(t, walls[w], "%q in %s: wall time %s runs twice", expr, tz, w)
				walls[w] = true
			}
			// Near a change of offset, look at every minute in between.
			end := next
			if end.After(at.Add(6 * time.Hour)) {
				end = at.Add(6 * time.Hour)
			}
			if offsetAt(at, tm.loc) != offsetAt(end, tm.loc) && at.Second() == 0 {
				for m := at.Add(time.Minute); m.Before(end); m = m.Add(time.Minute) {
					mw := wall(m.In(tm.loc))
					if mw.Second() != 0 || !matches(mw) {
						continue
					}
					require.False(t, tm.everyHr, "%q in %s: %s matches but next(%s) = %s", expr, tz, m, at, next)
					d := time.Duration(offsetAt(m.Add(-3*time.Hour), tm.loc)-offsetAt(m, tm.loc)) * time.Second
					require.True(t, d > 0 && wall(m.Add(-d).In(tm.loc)).Equal(mw),
						"%q in %s: %s matches, is no second pass, but next(%s) = %s", expr, tz, m, at, next)
				}
			}
			at = next
		}
	})
}
