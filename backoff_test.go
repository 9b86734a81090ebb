package litequeue

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func exponential(base time.Duration, factor float64, maxWait time.Duration) Backoff {
	return Backoff{Kind: BackoffExponential, Base: base, Factor: factor, Max: maxWait}
}

// TestBackoffCeiling has one row per rule of the contract for None, Fixed and
// Exponential, and one per "never panics" case.
func TestBackoffCeiling(t *testing.T) {
	tests := []struct {
		name string
		b    Backoff
		n    int
		want time.Duration
	}{
		// None.
		{"none waits 0", NoBackoff(), 1, 0},
		{"none waits 0 on a later attempt", NoBackoff(), 7, 0},
		{"zero Backoff behaves as none", Backoff{}, 3, 0},
		{"zero Backoff ignores stray fields", Backoff{Delay: time.Second, Base: time.Second, Factor: 2, Max: time.Minute}, 3, 0},
		{"unknown kind behaves as none", Backoff{Kind: "linear", Delay: time.Second}, 2, 0},

		// Fixed.
		{"fixed waits Delay on the first attempt", FixedBackoff(500 * time.Millisecond), 1, 500 * time.Millisecond},
		{"fixed waits Delay every time", FixedBackoff(500 * time.Millisecond), 40, 500 * time.Millisecond},
		{"fixed negative Delay acts as 0", FixedBackoff(-time.Second), 2, 0},
		{"fixed MinInt64 Delay acts as 0", FixedBackoff(math.MinInt64), 2, 0},
		{"fixed MaxInt64 Delay", FixedBackoff(math.MaxInt64), 2, math.MaxInt64},
		{"fixed ignores exponential fields", Backoff{Kind: BackoffFixed, Delay: time.Second, Base: time.Hour, Factor: 3, Max: time.Hour}, 5, time.Second},

		// Exponential: min(Max, Base × Factor^(n−1)).
		{"exponential attempt 1 waits Base", ExponentialBackoff(), 1, time.Second},
		{"exponential attempt 2 waits Base×Factor", ExponentialBackoff(), 2, 2 * time.Second},
		{"exponential attempt 9 waits Base×Factor^8", ExponentialBackoff(), 9, 256 * time.Second},
		{"exponential attempt 10 is capped at Max", ExponentialBackoff(), 10, 300 * time.Second},
		{"exponential factor 3", exponential(10*time.Millisecond, 3, time.Hour), 4, 270 * time.Millisecond},
		{"exponential fractional factor shrinks", exponential(time.Second, 0.5, time.Hour), 3, 250 * time.Millisecond},
		{"exponential ignores Delay", Backoff{Kind: BackoffExponential, Delay: time.Hour, Base: time.Second, Factor: 2, Max: time.Minute}, 1, time.Second},

		// Never panics.
		{"attempt 0 behaves as 1", ExponentialBackoff(), 0, time.Second},
		{"attempt -1 behaves as 1", ExponentialBackoff(), -1, time.Second},
		{"attempt MinInt behaves as 1", ExponentialBackoff(), math.MinInt, time.Second},
		{"power overflow saturates to Max", ExponentialBackoff(), math.MaxInt, 300 * time.Second},
		{"power overflow with huge factor saturates to Max", exponential(time.Second, 1e308, time.Hour), 3, time.Hour},
		{"NaN factor degenerates to constant Base", exponential(time.Second, math.NaN(), time.Hour), 5, time.Second},
		{"+Inf factor degenerates to constant Base", exponential(time.Second, math.Inf(1), time.Hour), 5, time.Second},
		{"-Inf factor degenerates to constant Base", exponential(time.Second, math.Inf(-1), time.Hour), 5, time.Second},
		{"zero factor degenerates to constant Base", exponential(time.Second, 0, time.Hour), 5, time.Second},
		{"negative factor degenerates to constant Base", exponential(time.Second, -2, time.Hour), 5, time.Second},
		{"degenerate constant Base is still capped at Max", exponential(time.Hour, math.NaN(), time.Minute), 5, time.Minute},
		{"infinite intermediate falls back to Max", exponential(math.MaxInt64, 1e308, time.Hour), 2, time.Hour},
		{"zero Base yields 0", exponential(0, 2, time.Hour), 3, 0},
		{"negative Base acts as zero", exponential(-time.Second, 2, time.Hour), 3, 0},
		{"zero Max yields 0", exponential(time.Second, 2, 0), 3, 0},
		{"negative Max acts as zero", exponential(time.Second, 2, -time.Hour), 3, 0},
		{"underflow to below 1ns is 0, never negative", exponential(time.Second, 1e-300, time.Hour), 3, 0},
		{"Base above Max is capped at Max", exponential(time.Hour, 2, time.Minute), 1, time.Minute},
		{"MaxInt64 Max with huge float does not overflow", exponential(math.MaxInt64, 2, math.MaxInt64), 2, math.MaxInt64},
		{"MaxInt64 Base and Max at attempt 1", exponential(math.MaxInt64, 2, math.MaxInt64), 1, math.MaxInt64},
		{"MaxInt64 Max with overflowing power", exponential(time.Second, 2, math.MaxInt64), math.MaxInt, math.MaxInt64},
		{"constant Base above 2^53ns is exact", exponential(1<<53+1, math.NaN(), math.MaxInt64), 4, 1<<53 + 1},
		{"first attempt Base just below MaxInt64 Max is exact", exponential(math.MaxInt64-1, 2, math.MaxInt64), 1, math.MaxInt64 - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, b := range []Backoff{tt.b, withJitter(tt.b)} {
				require.NotPanics(t, func() {
					assert.Equal(t, tt.want, b.Ceiling(tt.n), "Ceiling(%d) of %+v", tt.n, b)
				})
			}
			// Without jitter the wait is the ceiling itself.
			noJitter := tt.b
			noJitter.Jitter = false
			assert.Equal(t, tt.want, noJitter.DelayFor(tt.n), "DelayFor(%d)", tt.n)
			// With jitter it stays in [0, Ceiling].
			j := withJitter(tt.b)
			for range 50 {
				d := j.DelayFor(tt.n)
				assert.GreaterOrEqual(t, d, time.Duration(0))
				assert.LessOrEqual(t, d, tt.want)
			}
		})
	}
}

func withJitter(b Backoff) Backoff {
	b.Jitter = true
	return b
}

// TestBackoffJitterOnlyForExponential checks that Jitter changes nothing for
// None and Fixed, whose wait is deterministic.
func TestBackoffJitterOnlyForExponential(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, b := range []Backoff{
		{Kind: BackoffNone, Jitter: true},
		{Kind: BackoffFixed, Delay: time.Second, Jitter: true},
	} {
		for n := range 20 {
			assert.Equal(t, b.Ceiling(n), b.DelayForRand(n, r), "%+v attempt %d", b, n)
		}
	}
}

// TestBackoffJitterIsFullJitter draws 10,000 waits from a seeded source and
// checks they fall in [0, Ceiling], average Ceiling/2 within 5%, and are not
// all the same.
func TestBackoffJitterIsFullJitter(t *testing.T) {
	b := ExponentialBackoff()
	const n, draws = 4, 10_000
	ceiling := b.Ceiling(n)
	require.Equal(t, 8*time.Second, ceiling)

	r := rand.New(rand.NewPCG(1, 2))
	var sum float64
	distinct := map[time.Duration]bool{}
	for range draws {
		d := b.DelayForRand(n, r)
		require.GreaterOrEqual(t, d, time.Duration(0))
		require.LessOrEqual(t, d, ceiling)
		sum += float64(d)
		distinct[d] = true
	}
	mean := sum / draws
	half := float64(ceiling) / 2
	assert.InEpsilon(t, half, mean, 0.05, "mean %v, want about %v", time.Duration(mean), time.Duration(half))
	assert.Greater(t, len(distinct), draws/2, "jittered waits should vary")
}

// TestBackoffJitterSameSeedSameSequence checks that DelayForRand and
// DecideRand are reproducible from a seed.
func TestBackoffJitterSameSeedSameSequence(t *testing.T) {
	seq := func(seed uint64) (waits []time.Duration, decisions []RetryDecision) {
		r := rand.New(rand.NewPCG(seed, 2))
		p := ExponentialRetry(100)
		for n := 1; n <= 50; n++ {
			waits = append(waits, p.Backoff.DelayForRand(n, r))
			decisions = append(decisions, p.DecideRand(n, r))
		}
		return waits, decisions
	}
	w1, d1 := seq(1)
	w2, d2 := seq(1)
	assert.Equal(t, w1, w2)
	assert.Equal(t, d1, d2)
	w3, _ := seq(3)
	assert.NotEqual(t, w1, w3, "a different seed should give a different sequence")
}

// TestBackoffJitterAtMaxInt64Ceiling covers the one ceiling where [0, Ceiling]
// cannot be drawn as Int64N(Ceiling+1).
func TestBackoffJitterAtMaxInt64Ceiling(t *testing.T) {
	b := withJitter(exponential(math.MaxInt64, 2, math.MaxInt64))
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 100 {
		require.NotPanics(t, func() {
			d := b.DelayForRand(n, r)
			assert.GreaterOrEqual(t, d, time.Duration(0))
		})
		require.NotPanics(t, func() { b.DelayFor(n) })
	}
}

// TestDelayForRandNilActsAsDelayFor checks both fall back to the same
// deterministic result without jitter and stay in range with it.
func TestDelayForRandNilActsAsDelayFor(t *testing.T) {
	fixed := FixedBackoff(time.Second)
	assert.Equal(t, fixed.DelayFor(2), fixed.DelayForRand(2, nil))
	b := ExponentialBackoff()
	for range 100 {
		d := b.DelayForRand(3, nil)
		require.GreaterOrEqual(t, d, time.Duration(0))
		require.LessOrEqual(t, d, 4*time.Second)
	}
}

// FuzzBackoff checks that no input panics, that 0 <= DelayFor <= Ceiling, and
// that an exponential Ceiling never exceeds Max (taken as 0 when negative).
func FuzzBackoff(f *testing.F) {
	type seed struct {
		kind        string
		delay, base int64
		factor      float64
		maxWait     int64
		jitter      bool
		n           int
	}
	for _, s := range []seed{
		{"exponential", 0, int64(time.Second), 2, int64(300 * time.Second), true, 1},
		{"exponential", 0, math.MaxInt64, 2, math.MaxInt64, true, math.MaxInt},
		{"exponential", 0, math.MaxInt64, 1e308, math.MaxInt64, false, 2},
		{"exponential", 0, int64(time.Second), math.NaN(), int64(time.Hour), true, 5},
		{"exponential", 0, int64(time.Second), math.Inf(1), int64(time.Hour), true, 5},
		{"exponential", 0, int64(time.Second), math.Inf(-1), int64(time.Hour), true, 5},
		{"exponential", 0, int64(time.Second), -2, int64(time.Hour), true, 5},
		{"exponential", 0, int64(time.Second), 0, int64(time.Hour), true, 5},
		{"exponential", 0, int64(time.Second), 1e-300, int64(time.Hour), true, 5},
		{"exponential", 0, -1, 2, -1, true, 0},
		{"exponential", 0, 0, 2, 0, true, -1},
		{"exponential", 0, math.MinInt64, 2, math.MinInt64, true, math.MinInt},
		{"fixed", math.MaxInt64, 0, 0, 0, true, 1},
		{"fixed", math.MinInt64, 0, 0, 0, false, 1},
		{"fixed", -1, 0, 0, 0, false, 0},
		{"none", 5, 5, 5, 5, true, 3},
		{"", 0, 0, 0, 0, false, 0},
		{"bogus", 1, 1, 1, 1, true, 1},
	} {
		f.Add(s.kind, s.delay, s.base, s.factor, s.maxWait, s.jitter, s.n)
	}
	f.Fuzz(func(t *testing.T, kind string, delay, base int64, factor float64, maxWait int64, jitter bool, n int) {
		b := Backoff{
			Kind:   BackoffKind(kind),
			Delay:  time.Duration(delay),
			Base:   time.Duration(base),
			Factor: factor,
			Max:    time.Duration(maxWait),
			Jitter: jitter,
		}
		ceiling := b.Ceiling(n)
		if ceiling < 0 {
			t.Fatalf("Ceiling(%d) = %v < 0 for %+v", n, ceiling, b)
		}
		if b.Kind == BackoffExponential && ceiling > max(b.Max, 0) {
			t.Fatalf("Ceiling(%d) = %v > Max %v for %+v", n, ceiling, b.Max, b)
		}
		if got := b.Ceiling(n); got != ceiling {
			t.Fatalf("Ceiling(%d) not deterministic: %v then %v", n, ceiling, got)
		}
		r := rand.New(rand.NewPCG(uint64(n), uint64(base)))
		for _, d := range []time.Duration{b.DelayFor(n), b.DelayForRand(n, r)} {
			if d < 0 || d > ceiling {
				t.Fatalf("DelayFor(%d) = %v outside [0, %v] for %+v", n, d, ceiling, b)
			}
		}
	})
}
