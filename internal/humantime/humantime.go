// Package humantime says how long ago or how far ahead a time is, in the
// short form the dashboard and lqinspect show: "in 4m", "12s ago", "3d2h".
// It holds any two times a queue stores, more than 292 years apart (more
// than a time.Duration) too, without overflow.
package humantime

import (
	"math"
	"strconv"
	"time"
)

// Rel says when t is relative to now: "in 4m", "12s ago" or "now".
func Rel(t, now time.Time) string {
	span := Span(t, now)
	switch t.Compare(now) {
	case 1:
		return "in " + span
	case -1:
		return span + " ago"
	}
	return "now"
}

// Span is Duration of the time between t and now, whichever is later,
// without the overflow of t.Sub(now): times more than 292 years apart are
// shown in days and hours.
func Span(t, now time.Time) string {
	if t.Before(now) {
		t, now = now, t
	}
	if d := t.Sub(now); d < time.Duration(math.MaxInt64) {
		return Duration(d)
	}
	secs := t.Unix() - now.Unix() // at most 584 billion years apart: no overflow
	s := strconv.FormatInt(secs/86400, 10) + "d"
	if h := secs % 86400 / 3600; h > 0 {
		s += strconv.FormatInt(h, 10) + "h"
	}
	return s
}

// Age is Duration of an age computed with time.Time.Sub, which saturates:
// the largest duration reads "over 292y".
func Age(d time.Duration) string {
	if d == math.MaxInt64 {
		return "over 292y"
	}
	return Duration(d)
}

var units = []struct {
	d    time.Duration
	name string
}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}}

// Duration formats d with at most its two largest units: "4m", "4m12s",
// "3d2h", "350ms".
func Duration(d time.Duration) string {
	if d == math.MinInt64 {
		d++ // -d would be d again
	}
	if d < 0 {
		return "-" + Duration(-d)
	}
	for i, u := range units {
		if d < u.d {
			continue
		}
		s := strconv.FormatInt(int64(d/u.d), 10) + u.name
		if i+1 < len(units) {
			next := units[i+1]
			if r := d % u.d / next.d; r > 0 {
				s += strconv.FormatInt(int64(r), 10) + next.name
			}
		}
		return s
	}
	if r := d.Round(time.Millisecond); r > 0 {
		return r.String()
	}
	if d == 0 {
		return "0s"
	}
	return "<1ms"
}
