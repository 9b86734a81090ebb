package web

import (
	"regexp"
	"testing"
	"time"
)

func TestDurationTicksAreRoundSteps(t *testing.T) {
	for _, c := range []struct {
		top   time.Duration
		step  time.Duration
		count int
	}{
		{0, time.Millisecond, 1},
		{-time.Second, time.Millisecond, 1},
		{7750 * time.Millisecond, 2 * time.Second, 4},
		{31 * time.Second, 10 * time.Second, 4},
		{time.Minute, 15 * time.Second, 4},
		{90 * time.Minute, 30 * time.Minute, 3},
		{25 * time.Hour, 6 * time.Hour, 5},
		{100 * 24 * time.Hour, 28 * 24 * time.Hour, 4},
		{1000 * 24 * time.Hour, 224 * 24 * time.Hour, 5},
		{3 * time.Millisecond, time.Millisecond, 3},
	} {
		step, n := durationTicks(c.top, 5)
		if step != c.step || n != c.count {
			t.Errorf("durationTicks(%v, 5) = %v × %d, want %v × %d", c.top, step, n, c.step, c.count)
		}
		if c.top > 0 && step*time.Duration(n) < c.top {
			t.Errorf("durationTicks(%v, 5): the axis ends at %v, below the top", c.top, step*time.Duration(n))
		}
	}
}

func TestTickLabelUsesTheLargestWholeUnit(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0", 500 * time.Millisecond: "500ms", 15 * time.Second: "15s", 2 * time.Minute: "2m",
		6 * time.Hour: "6h", 7 * 24 * time.Hour: "7d", 90 * time.Second: "90s", 1500 * time.Microsecond: "1.5ms",
	} {
		if got := tickLabel(d); got != want {
			t.Errorf("tickLabel(%v) = %q, want %q", d, got, want)
		}
	}
}

// The retry plan's axis is labelled in round steps: a plan whose longest
// wait is 7.75 s gets 0, 2s, 4s, 6s, 8s, not 7.75 s divided by four.
func TestPlanChartAxisHasRoundTicks(t *testing.T) {
	steps := []planStep{
		{Attempt: 1, Retry: true, Ceiling: 1250 * time.Millisecond, Cumulative: 1250 * time.Millisecond},
		{Attempt: 2, Retry: true, Ceiling: 2500 * time.Millisecond, Cumulative: 3750 * time.Millisecond},
		{Attempt: 3, Retry: true, Ceiling: 4 * time.Second, Cumulative: 7750 * time.Millisecond},
	}
	svg := string(planChart(steps, false))
	re := regexp.MustCompile(`<text class="axis" [^>]*text-anchor="end">([^<]*)</text>`)
	var labels []string
	for _, m := range re.FindAllStringSubmatch(svg, -1) {
		labels = append(labels, m[1])
	}
	want := []string{"0", "2s", "4s", "6s", "8s"}
	if len(labels) != len(want) {
		t.Fatalf("axis labels %q, want %q", labels, want)
	}
	for i := range want {
		if labels[i] != want[i] {
			t.Fatalf("axis labels %q, want %q", labels, want)
		}
	}
}
