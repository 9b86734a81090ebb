package humantime

import (
	"math"
	"testing"
	"time"
)

func TestRelHoldsEveryStoredTime(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		t    time.Time
		want string
	}{
		{now, "now"},
		{now.Add(90 * time.Second), "in 1m30s"},
		{now.Add(-50 * time.Hour), "2d2h ago"},
		{time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC), "119128d12h ago"},
		{time.Unix(0, math.MaxInt64), "in 86238d11h"},
	} {
		if got := Rel(c.t, now); got != c.want {
			t.Errorf("Rel(%v) = %q, want %q", c.t, got, c.want)
		}
	}
	if got := Age(math.MaxInt64); got != "over 292y" {
		t.Errorf("Age(max) = %q", got)
	}
	if got := Age(-time.Duration(math.MaxInt64) - 1); got[0] != '-' {
		t.Errorf("Age(min) = %q", got)
	}
}
