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
// matching wall time.
func FuzzCronNext(f *testing.F) {
	for _, s := range []string{"30 2 * * *", "*/15 * * * *", "@hourly", "0 9 * * 1-5", "@every 90m", "0 0 29 2 *", "30 1 * 11 SUN"} {
		f.Add(s, int64(1772949600), uint8(0))
	}
	zones := []string{"UTC", "America/New_York", "Australia/Lord_Howe", "Europe/Berlin", "Asia/Kolkata"}
	f.Fuzz(func(t *testing.T, expr string, unix int64, zone uint8) {
		tz := zones[int(zone)%len(zones)]
		tm, err := newTiming(expr, 0, tz, time.Unix(1767225600, 0))
		if err != nil || (tm.spec == nil && tm.every < MinScheduleInterval) {
			return
		}
		at := time.Unix(unix%(1<<33), 0) // years 1697–2242
		for range 20 {
			next := tm.next(at)
			if next.IsZero() {
				return
			}
			require.True(t, next.After(at), "%q in %s: next(%s) = %s", expr, tz, at, next)
			if tm.spec != nil {
				w := wall(next.In(tm.loc))
				// The wall time matches, or it is a skipped time moved by
				// the jump (at most three hours in any zone).
				matches := !tm.spec.Next(w.Add(-time.Second)).After(w)
				moved := !tm.spec.Next(w.Add(-3*time.Hour - time.Second)).After(w)
				require.True(t, matches || moved, "%q in %s: %s does not match", expr, tz, next)
			}
			at = next
		}
	})
}
