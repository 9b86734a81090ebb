package web

import (
	"strconv"
	"time"
)

// Axis ticks for the dashboard's charts: round steps a reader can add up
// (5s, 10s, 30s, 1m, 2h, 1d), never a quarter of whatever the largest value
// happens to be.

// tickSteps are the steps an axis may take, smallest first.
var tickSteps = func() []time.Duration {
	var s []time.Duration
	for _, unit := range []time.Duration{time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond} {
		s = append(s, unit, 2*unit, 5*unit)
	}
	s = append(s, time.Second, 2*time.Second, 5*time.Second, 10*time.Second, 15*time.Second, 30*time.Second,
		time.Minute, 2*time.Minute, 5*time.Minute, 10*time.Minute, 15*time.Minute, 30*time.Minute,
		time.Hour, 2*time.Hour, 3*time.Hour, 6*time.Hour, 12*time.Hour,
		24*time.Hour, 2*24*time.Hour, 7*24*time.Hour, 14*24*time.Hour, 28*24*time.Hour)
	return s
}()

// durationTicks returns the step and the count of steps of an axis from 0
// that reaches top in at most maxTicks round steps (the axis ends at
// step×count ≥ top). A top of 0 or less gets one step of a millisecond;
// a top past the largest step times maxTicks gets a multiple of 28 days.
func durationTicks(top time.Duration, maxTicks int) (step time.Duration, count int) {
	if top <= 0 {
		return time.Millisecond, 1
	}
	maxTicks = max(maxTicks, 1)
	for _, s := range tickSteps {
		if n := ceilDiv(top, s); n <= int64(maxTicks) {
			return s, int(n)
		}
	}
	last := tickSteps[len(tickSteps)-1]
	step = last * time.Duration(ceilDiv(top, last*time.Duration(maxTicks)))
	return step, int(ceilDiv(top, step))
}

func ceilDiv(a, b time.Duration) int64 { return int64((a + b - 1) / b) }

// tickLabel writes a tick's duration in its largest whole unit: "0",
// "500ms", "15s", "2m", "6h", "7d"; a value no unit divides (not a tick
// durationTicks makes) falls back to time.Duration's String.
func tickLabel(d time.Duration) string {
	units := []struct {
		d      time.Duration
		suffix string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}}
	if d == 0 {
		return "0"
	}
	for _, u := range units {
		if d >= u.d && d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.suffix
		}
	}
	return d.String()
}
