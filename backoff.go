package litequeue

import (
	"encoding/json"
	"fmt"
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

// backoffJSON is the JSON form of a Backoff. A nil field is left out.
type backoffJSON struct {
	Kind   BackoffKind `json:"kind,omitempty"`
	Delay  *string     `json:"delay,omitempty"`
	Base   *string     `json:"base,omitempty"`
	Factor *float64    `json:"factor,omitempty"`
	Max    *string     `json:"max,omitempty"`
	Jitter *bool       `json:"jitter,omitempty"`
}

// MarshalJSON writes b as a JSON object with snake_case keys and durations as
// Go duration strings (time.Duration.String), for example
// {"kind":"fixed","delay":"500ms"}.
//
// The fields of b's kind are always written: delay for fixed; base, factor,
// max and jitter for exponential. A field that does not belong to the kind is
// written only when it is non-zero, so that every valid value, hand-built ones
// included, reads back equal: json.Unmarshal(json.Marshal(b)) == b. The empty
// kind is left out.
//
// A valid Backoff has an empty or known Kind, no negative duration and a
// finite Factor. MarshalJSON returns a *PolicyError for any other value
// rather than write something UnmarshalJSON would reject.
func (b Backoff) MarshalJSON() ([]byte, error) {
	if err := b.validate(); err != nil {
		return nil, err
	}
	owned := func(k BackoffKind) bool { return b.Kind == k }
	j := backoffJSON{Kind: b.Kind}
	j.Delay = durationField(b.Delay, owned(BackoffFixed))
	j.Base = durationField(b.Base, owned(BackoffExponential))
	j.Max = durationField(b.Max, owned(BackoffExponential))
	if owned(BackoffExponential) || b.Factor != 0 {
		j.Factor = &b.Factor
	}
	if owned(BackoffExponential) || b.Jitter {
		j.Jitter = &b.Jitter
	}
	return json.Marshal(j)
}

// durationField returns d as a duration string, or nil when d is zero and not
// owned by the Backoff's kind.
func durationField(d time.Duration, owned bool) *string {
	if d == 0 && !owned {
		return nil
	}
	s := d.String()
	return &s
}

// validate returns a *PolicyError naming the first field of b that JSON
// cannot carry.
func (b Backoff) validate() error {
	switch b.Kind {
	case "", BackoffNone, BackoffFixed, BackoffExponential:
	default:
		return &PolicyError{Field: "kind", Err: fmt.Errorf("unknown kind %q (want %q, %q or %q)",
			b.Kind, BackoffNone, BackoffFixed, BackoffExponential)}
	}
	for _, d := range []struct {
		field string
		value time.Duration
	}{{"delay", b.Delay}, {"base", b.Base}, {"max", b.Max}} {
		if d.value < 0 {
			return &PolicyError{Field: d.field, Err: fmt.Errorf("negative duration %v", d.value)}
		}
	}
	if math.IsNaN(b.Factor) || math.IsInf(b.Factor, 0) {
		return &PolicyError{Field: "factor", Err: fmt.Errorf("non-finite factor %v", b.Factor)}
	}
	return nil
}

// UnmarshalJSON reads b from a JSON object with the keys kind, delay, base,
// factor, max and jitter; a missing key leaves its field zero, whatever b
// held before. JSON null leaves b unchanged.
//
// It returns a *PolicyError naming the offending key, and leaves b unchanged,
// for: a key it does not know; a kind other than "none", "fixed",
// "exponential" or "" (the zero kind); a duration that is not a JSON string
// (such as a bare number: a Go duration string such as "500ms" is expected),
// does not parse with time.ParseDuration, or is negative; a factor that is
// not a JSON number; a jitter that is not a JSON boolean.
func (b *Backoff) UnmarshalJSON(data []byte) error {
	fields, err := decodeObject(data, "kind", "delay", "base", "factor", "max", "jitter")
	if err != nil || fields == nil {
		return err
	}
	var out Backoff
	if err := decodeField(fields, "kind", &out.Kind); err != nil {
		return err
	}
	if err := out.validate(); err != nil {
		return err
	}
	for _, d := range []struct {
		field string
		dst   *time.Duration
	}{{"delay", &out.Delay}, {"base", &out.Base}, {"max", &out.Max}} {
		if err := decodeDuration(fields, d.field, d.dst); err != nil {
			return err
		}
	}
	if err := decodeField(fields, "factor", &out.Factor); err != nil {
		return err
	}
	if err := decodeField(fields, "jitter", &out.Jitter); err != nil {
		return err
	}
	*b = out
	return nil
}
