package litequeue

import (
	"math"
	"math/rand/v2"
	"time"
)

// BackoffKind names one of the three backoff strategies. It is serialized as
// its string value ("none", "fixed", "exponential").
type BackoffKind string

// The backoff kinds. The empty kind behaves as BackoffNone.
const (
	BackoffNone        BackoffKind = "none"
	BackoffFixed       BackoffKind = "fixed"
	BackoffExponential BackoffKind = "exponential"
)

// Backoff computes the wait between a failed attempt and the next one.
//
// Backoff is a plain comparable value: two Backoffs are equal with == when
// every field is equal. Only the fields that belong to Kind are used; the others
// are kept as they are but ignored. The zero Backoff behaves as NoBackoff().
//
// Every method is total: it never panics, whatever the fields and the attempt
// number hold, and never returns a negative duration.
type Backoff struct {
	// Kind selects the strategy. Empty behaves as BackoffNone; an unknown
	// kind (possible only when built by hand, JSON rejects it) behaves as
	// BackoffNone too.
	Kind BackoffKind
	// Delay is the constant wait of BackoffFixed. Negative acts as 0.
	Delay time.Duration
	// Base is the first wait of BackoffExponential. Zero or negative yields
	// a wait of 0.
	Base time.Duration
	// Factor multiplies the wait after each failed attempt of
	// BackoffExponential. A non-finite or non-positive Factor degenerates to
	// a constant Base.
	Factor float64
	// Max caps the wait of BackoffExponential. Zero or negative yields a
	// wait of 0.
	Max time.Duration
	// Jitter, for BackoffExponential, draws the wait uniformly from
	// [0, Ceiling] ("full jitter") instead of waiting the ceiling itself.
	Jitter bool
}

// NoBackoff returns a Backoff that retries at once, with a wait of 0.
func NoBackoff() Backoff { return Backoff{Kind: BackoffNone} }

// FixedBackoff returns a Backoff that waits delay before every retry. A
// negative delay acts as 0.
func FixedBackoff(delay time.Duration) Backoff {
	return Backoff{Kind: BackoffFixed, Delay: delay}
}

// Default exponential backoff parameters, as returned by ExponentialBackoff.
const (
	DefaultBackoffBase   = time.Second
	DefaultBackoffFactor = 2.0
	DefaultBackoffMax    = 300 * time.Second
)

// ExponentialBackoff returns the default exponential Backoff: Base 1s,
// Factor 2.0, Max 300s (5m), Jitter true. Its ceilings are 1s, 2s, 4s, …,
// 256s, then capped at 5m from the tenth failed attempt on.
func ExponentialBackoff() Backoff {
	return Backoff{
		Kind:   BackoffExponential,
		Base:   DefaultBackoffBase,
		Factor: DefaultBackoffFactor,
		Max:    DefaultBackoffMax,
		Jitter: true,
	}
}

// Ceiling returns the wait after failedAttempt before any jitter is applied.
// It is deterministic. failedAttempt below 1 behaves as 1.
//
// For BackoffNone it is 0; for BackoffFixed it is Delay (0 when negative); for
// BackoffExponential it is min(Max, Base × Factor^(failedAttempt−1)), computed
// in float64: an overflowing, NaN or infinite intermediate gives Max, a
// non-finite or non-positive Factor gives a constant Base (capped at Max), and
// a zero or negative Base or Max gives 0. The result is never negative and,
// for BackoffExponential, never above Max.
func (b Backoff) Ceiling(failedAttempt int) time.Duration {
	if failedAttempt < 1 {
		failedAttempt = 1
	}
	switch b.Kind {
	case BackoffFixed:
		return max(b.Delay, 0)
	case BackoffExponential:
		return b.exponentialCeiling(failedAttempt)
	default:
		return 0
	}
}

func (b Backoff) exponentialCeiling(n int) time.Duration {
	if b.Base <= 0 || b.Max <= 0 {
		return 0
	}
	factor := b.Factor
	if math.IsNaN(factor) || math.IsInf(factor, 0) || factor <= 0 {
		factor = 1
	}
	if factor == 1 || n == 1 {
		// Base × Factor^0 or Base × 1^(n−1): exactly Base, without the float64
		// rounding that would change a Base above 2^53 ns.
		return min(b.Base, b.Max)
	}
	wait := float64(b.Base) * math.Pow(factor, float64(n-1))
	if math.IsNaN(wait) || math.IsInf(wait, 0) || wait >= float64(b.Max) {
		return b.Max
	}
	if wait <= 0 {
		// Factor in (0,1) can shrink the wait below one nanosecond.
		return 0
	}
	// wait < Max <= MaxInt64 here, so the conversion cannot overflow.
	return min(time.Duration(wait), b.Max)
}

// DelayFor returns the wait after failedAttempt. Without jitter it equals
// Ceiling; with Jitter (BackoffExponential only) it is drawn uniformly from
// [0, Ceiling] using the global math/rand/v2 source. Use DelayForRand for a
// seeded, reproducible draw.
func (b Backoff) DelayFor(failedAttempt int) time.Duration {
	return b.DelayForRand(failedAttempt, nil)
}

// DelayForRand is DelayFor drawing its jitter from r. A nil r uses the global
// math/rand/v2 source, exactly as DelayFor. The same seed gives the same
// sequence of waits. The result is always in [0, Ceiling(failedAttempt)].
func (b Backoff) DelayForRand(failedAttempt int, r *rand.Rand) time.Duration {
	ceiling := b.Ceiling(failedAttempt)
	if b.Kind != BackoffExponential || !b.Jitter || ceiling <= 0 {
		return ceiling
	}
	// Uniform over the closed range [0, ceiling]. ceiling+1 cannot overflow
	// unless ceiling is MaxInt64, where the half-open range is used instead.
	if ceiling == math.MaxInt64 {
		if r == nil {
			return time.Duration(rand.Int64N(int64(ceiling)))
		}
		return time.Duration(r.Int64N(int64(ceiling)))
	}
	if r == nil {
		return time.Duration(rand.Int64N(int64(ceiling) + 1))
	}
	return time.Duration(r.Int64N(int64(ceiling) + 1))
}
