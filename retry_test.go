package litequeue

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRetryPolicyDecide has one row per rule of Decide.
func TestRetryPolicyDecide(t *testing.T) {
	fixed := FixedRetry(3, 500*time.Millisecond)
	tests := []struct {
		name string
		p    RetryPolicy
		n    int
		want RetryDecision
	}{
		{"retries after DelayFor(n) while n < MaxAttempts", fixed, 1, RetryDecision{Retry: true, Delay: 500 * time.Millisecond}},
		{"retries on the last attempt but one", fixed, 2, RetryDecision{Retry: true, Delay: 500 * time.Millisecond}},
		{"gives up when n == MaxAttempts", fixed, 3, RetryDecision{}},
		{"gives up when n > MaxAttempts", fixed, 4, RetryDecision{}},
		{"gives up at n = MaxInt", fixed, math.MaxInt, RetryDecision{}},
		{"n 0 behaves as 1", fixed, 0, RetryDecision{Retry: true, Delay: 500 * time.Millisecond}},
		{"n MinInt behaves as 1", fixed, math.MinInt, RetryDecision{Retry: true, Delay: 500 * time.Millisecond}},
		{"n 0 with one attempt gives up as 1 does", NoRetry(), 0, RetryDecision{}},
		{"MaxAttempts 1 never retries", NoRetry(), 1, RetryDecision{}},
		{"MaxAttempts 0 behaves as 1", NewRetryPolicy(0, FixedBackoff(time.Second)), 1, RetryDecision{}},
		{"MaxAttempts negative behaves as 1", NewRetryPolicy(-5, FixedBackoff(time.Second)), 1, RetryDecision{}},
		{"MaxAttempts MinInt behaves as 1", NewRetryPolicy(math.MinInt, FixedBackoff(time.Second)), 0, RetryDecision{}},
		{"zero policy never retries", RetryPolicy{}, 1, RetryDecision{}},
		{"none backoff retries at once", NewRetryPolicy(3, NoBackoff()), 1, RetryDecision{Retry: true}},
		{"exponential uses the attempt's ceiling", NewRetryPolicy(5, exponential(time.Second, 2, time.Minute)), 3, RetryDecision{Retry: true, Delay: 4 * time.Second}},
		{"negative fixed delay retries at once", FixedRetry(3, -time.Second), 1, RetryDecision{Retry: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.p.Decide(tt.n))
			assert.Equal(t, tt.want, tt.p.DecideRand(tt.n, rand.New(rand.NewPCG(1, 2))))
		})
	}
}

// TestRetryPolicyDecideJitteredDelay checks a jittered retry waits within
// [0, Ceiling(n)] of the attempt.
func TestRetryPolicyDecideJitteredDelay(t *testing.T) {
	p := ExponentialRetry(10)
	r := rand.New(rand.NewPCG(1, 2))
	for n := 1; n < 10; n++ {
		d := p.DecideRand(n, r)
		require.True(t, d.Retry, "attempt %d", n)
		assert.GreaterOrEqual(t, d.Delay, time.Duration(0))
		assert.LessOrEqual(t, d.Delay, p.Backoff.Ceiling(n))
	}
	assert.Equal(t, RetryDecision{}, p.Decide(10))
}

// TestZeroRetryPolicyBehavesAsNoRetry compares the two over many attempts.
func TestZeroRetryPolicyBehavesAsNoRetry(t *testing.T) {
	for _, n := range []int{math.MinInt, -1, 0, 1, 2, 3, 100, math.MaxInt} {
		assert.Equal(t, NoRetry().Decide(n), RetryPolicy{}.Decide(n), "attempt %d", n)
	}
	assert.Equal(t, NoRetry().Attempts(), RetryPolicy{}.Attempts())
}

func TestRetryPolicyAttempts(t *testing.T) {
	for _, tt := range []struct{ max, want int }{{math.MinInt, 1}, {-1, 1}, {0, 1}, {1, 1}, {5, 5}} {
		assert.Equal(t, tt.want, RetryPolicy{MaxAttempts: tt.max}.Attempts(), "MaxAttempts %d", tt.max)
	}
}

// TestRetryDefaults has one row per row of the defaults table in
// RetryPolicy's doc and the README (the QueueConfig row belongs to the queue
// and is tested there).
func TestRetryDefaults(t *testing.T) {
	exp := Backoff{Kind: BackoffExponential, Base: time.Second, Factor: 2.0, Max: 300 * time.Second, Jitter: true}
	tests := []struct {
		name string
		got  RetryPolicy
		want RetryPolicy
	}{
		{"RetryPolicy{} is the zero value", RetryPolicy{}, RetryPolicy{MaxAttempts: 0, Backoff: Backoff{}}},
		{"DefaultRetryPolicy() is 1 attempt, NoBackoff()", DefaultRetryPolicy(), RetryPolicy{MaxAttempts: 1, Backoff: NoBackoff()}},
		{"NoRetry() is 1 attempt, NoBackoff()", NoRetry(), RetryPolicy{MaxAttempts: 1, Backoff: Backoff{Kind: BackoffNone}}},
		{"DefaultRetryPolicy() equals NoRetry()", DefaultRetryPolicy(), NoRetry()},
		{"ExponentialBackoff() is 1s, 2.0, 300s, jitter", RetryPolicy{Backoff: ExponentialBackoff()}, RetryPolicy{Backoff: exp}},
		{"ExponentialRetry(n) is n attempts, ExponentialBackoff()", ExponentialRetry(7), RetryPolicy{MaxAttempts: 7, Backoff: exp}},
		{"FixedRetry(n, d) is n attempts, FixedBackoff(d)", FixedRetry(4, 250*time.Millisecond), RetryPolicy{MaxAttempts: 4, Backoff: Backoff{Kind: BackoffFixed, Delay: 250 * time.Millisecond}}},
		{"NewRetryPolicy keeps its arguments", NewRetryPolicy(9, FixedBackoff(time.Minute)), RetryPolicy{MaxAttempts: 9, Backoff: FixedBackoff(time.Minute)}},
		{"the Rust retry(...) attribute defaults are ExponentialRetry(3)", ExponentialRetry(3),
			RetryPolicy{MaxAttempts: 3, Backoff: Backoff{Kind: BackoffExponential, Base: time.Second, Factor: 2.0, Max: 5 * time.Minute, Jitter: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.True(t, tt.want == tt.got, "want %+v, got %+v", tt.want, tt.got)
		})
	}
	assert.Equal(t, 1, RetryPolicy{}.Attempts(), "the zero policy makes one attempt")
}

func TestRetryPolicyJSONDocuments(t *testing.T) {
	tests := []struct {
		p    RetryPolicy
		json string
	}{
		{ExponentialRetry(5), `{"max_attempts":5,"backoff":{"kind":"exponential","base":"1s","factor":2,"max":"5m0s","jitter":true}}`},
		{FixedRetry(3, 500*time.Millisecond), `{"max_attempts":3,"backoff":{"kind":"fixed","delay":"500ms"}}`},
		{NoRetry(), `{"max_attempts":1,"backoff":{"kind":"none"}}`},
		{RetryPolicy{}, `{"max_attempts":0,"backoff":{}}`},
		{NewRetryPolicy(2, exponential(0, 0, 0)), `{"max_attempts":2,"backoff":{"kind":"exponential","base":"0s","factor":0,"max":"0s","jitter":false}}`},
		{NewRetryPolicy(2, FixedBackoff(0)), `{"max_attempts":2,"backoff":{"kind":"fixed","delay":"0s"}}`},
		// Fields foreign to the kind are written only when non-zero.
		{NewRetryPolicy(2, Backoff{Kind: BackoffFixed, Delay: time.Second, Max: time.Minute, Jitter: true}),
			`{"max_attempts":2,"backoff":{"kind":"fixed","delay":"1s","max":"1m0s","jitter":true}}`},
		{NewRetryPolicy(2, Backoff{Delay: time.Second, Factor: 1.5}), `{"max_attempts":2,"backoff":{"delay":"1s","factor":1.5}}`},
	}
	for _, tt := range tests {
		t.Run(tt.json, func(t *testing.T) {
			got, err := json.Marshal(tt.p)
			require.NoError(t, err)
			assert.Equal(t, tt.json, string(got))

			var back RetryPolicy
			require.NoError(t, json.Unmarshal([]byte(tt.json), &back))
			assert.True(t, tt.p == back, "want %+v, got %+v", tt.p, back)
		})
	}
}

func TestRetryPolicyJSONMissingFieldsAreZero(t *testing.T) {
	p := ExponentialRetry(5) // pre-filled: decoding must not merge into it
	require.NoError(t, json.Unmarshal([]byte(`{"backoff":{"kind":"exponential","base":"2s"}}`), &p))
	assert.Equal(t, RetryPolicy{Backoff: Backoff{Kind: BackoffExponential, Base: 2 * time.Second}}, p)

	require.NoError(t, json.Unmarshal([]byte(`{}`), &p))
	assert.Equal(t, RetryPolicy{}, p)

	var b Backoff
	require.NoError(t, json.Unmarshal([]byte(`{"kind":"fixed","delay":null}`), &b))
	assert.Equal(t, Backoff{Kind: BackoffFixed}, b, "null is as missing")
}

func TestRetryPolicyJSONNullLeavesValue(t *testing.T) {
	p := FixedRetry(3, time.Second)
	require.NoError(t, json.Unmarshal([]byte(`null`), &p))
	assert.Equal(t, FixedRetry(3, time.Second), p)
}

// TestRetryPolicyJSONRoundTripsConstructors covers every constructor.
func TestRetryPolicyJSONRoundTripsConstructors(t *testing.T) {
	for _, p := range []RetryPolicy{
		{}, NoRetry(), DefaultRetryPolicy(), ExponentialRetry(3), ExponentialRetry(0),
		FixedRetry(3, 500*time.Millisecond), FixedRetry(1, 0),
		NewRetryPolicy(4, NoBackoff()), NewRetryPolicy(4, Backoff{}), NewRetryPolicy(4, ExponentialBackoff()),
		NewRetryPolicy(math.MaxInt, FixedBackoff(math.MaxInt64)),
		NewRetryPolicy(2, Backoff{Kind: BackoffExponential, Base: math.MaxInt64, Factor: math.MaxFloat64, Max: math.MaxInt64}),
		NewRetryPolicy(2, Backoff{Kind: BackoffExponential, Base: 1, Factor: math.SmallestNonzeroFloat64, Max: 1}),
	} {
		assertRoundTrip(t, p)
	}
}

// TestRetryPolicyJSONRoundTripsRandomValidValues draws valid policies, with
// every field set at random whatever the kind, from a seeded source.
func TestRetryPolicyJSONRoundTripsRandomValidValues(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	kinds := []BackoffKind{"", BackoffNone, BackoffFixed, BackoffExponential}
	duration := func() time.Duration {
		switch r.IntN(4) {
		case 0:
			return 0
		case 1:
			return time.Duration(r.Int64N(int64(time.Hour)))
		case 2:
			return math.MaxInt64 - time.Duration(r.IntN(3))
		default:
			return time.Duration(r.Int64())
		}
	}
	factor := func() float64 {
		switch r.IntN(4) {
		case 0:
			return 0
		case 1:
			return r.Float64() * 10
		case 2:
			return -r.NormFloat64() * 1e300
		default:
			return math.Float64frombits(r.Uint64()&^(0x7ff<<52) | uint64(r.IntN(0x7ff))<<52) // any finite
		}
	}
	for range 2000 {
		p := RetryPolicy{
			MaxAttempts: []int{0, r.IntN(10), r.Int()}[r.IntN(3)],
			Backoff: Backoff{
				Kind:   kinds[r.IntN(len(kinds))],
				Delay:  duration(),
				Base:   duration(),
				Factor: factor(),
				Max:    duration(),
				Jitter: r.IntN(2) == 1,
			},
		}
		assertRoundTrip(t, p)
	}
}

func assertRoundTrip(t *testing.T, p RetryPolicy) {
	t.Helper()
	data, err := json.Marshal(p)
	require.NoError(t, err, "%+v", p)
	var back RetryPolicy
	require.NoError(t, json.Unmarshal(data, &back), "%s", data)
	require.True(t, p == back, "round trip of %+v through %s gave %+v", p, data, back)

	bdata, err := json.Marshal(p.Backoff)
	require.NoError(t, err)
	var b Backoff
	require.NoError(t, json.Unmarshal(bdata, &b), "%s", bdata)
	require.True(t, p.Backoff == b, "round trip of %+v through %s gave %+v", p.Backoff, bdata, b)
}

// TestRetryPolicyJSONRejects has one row per rejection; each error is a
// *PolicyError naming the field.
func TestRetryPolicyJSONRejects(t *testing.T) {
	tests := []struct {
		name, json, field, says string
	}{
		{"unknown kind", `{"max_attempts":3,"backoff":{"kind":"linear"}}`, "backoff.kind", `unknown kind "linear"`},
		{"kind not a string", `{"backoff":{"kind":1}}`, "backoff.kind", "cannot unmarshal"},
		{"unparseable delay", `{"backoff":{"kind":"fixed","delay":"soon"}}`, "backoff.delay", "invalid duration"},
		{"duration without unit", `{"backoff":{"kind":"fixed","delay":"500"}}`, "backoff.delay", "missing unit"},
		{"negative delay", `{"backoff":{"kind":"fixed","delay":"-1s"}}`, "backoff.delay", "negative duration"},
		{"negative base", `{"backoff":{"kind":"exponential","base":"-1ms"}}`, "backoff.base", "negative duration"},
		{"negative max", `{"backoff":{"kind":"exponential","max":"-5m"}}`, "backoff.max", "negative duration"},
		{"bare number delay", `{"backoff":{"kind":"fixed","delay":500}}`, "backoff.delay", `a Go duration string such as "500ms" is expected`},
		{"bare number base", `{"backoff":{"kind":"exponential","base":1000000000}}`, "backoff.base", `such as "500ms" is expected`},
		{"bare number max", `{"backoff":{"kind":"exponential","max":3e11}}`, "backoff.max", `such as "500ms" is expected`},
		{"overflowing duration", `{"backoff":{"kind":"fixed","delay":"3000000h"}}`, "backoff.delay", "invalid duration"},
		{"factor not a number", `{"backoff":{"kind":"exponential","factor":"2"}}`, "backoff.factor", "cannot unmarshal"},
		{"factor out of float64 range", `{"backoff":{"kind":"exponential","factor":1e400}}`, "backoff.factor", "cannot unmarshal"},
		{"jitter not a bool", `{"backoff":{"kind":"exponential","jitter":"yes"}}`, "backoff.jitter", "cannot unmarshal"},
		{"negative max_attempts", `{"max_attempts":-1}`, "max_attempts", "negative max_attempts"},
		{"fractional max_attempts", `{"max_attempts":1.5}`, "max_attempts", "cannot unmarshal"},
		{"max_attempts not a number", `{"max_attempts":"3"}`, "max_attempts", "cannot unmarshal"},
		{"unknown policy field", `{"max_attempts":3,"retries":2}`, "retries", "unknown field"},
		{"unknown backoff field", `{"backoff":{"kind":"fixed","Delay":"1s"}}`, "backoff.Delay", "unknown field"},
		{"backoff not an object", `{"backoff":"fixed"}`, "backoff", "a JSON object is expected"},
		{"policy not an object", `[1]`, "", "a JSON object is expected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := FixedRetry(2, time.Second)
			err := json.Unmarshal([]byte(tt.json), &p)
			var pe *PolicyError
			require.True(t, errors.As(err, &pe), "want a *PolicyError, got %v", err)
			assert.Equal(t, tt.field, pe.Field)
			assert.Contains(t, err.Error(), tt.says)
			if tt.field != "" {
				assert.Contains(t, err.Error(), tt.field+": ")
			}
			assert.Equal(t, FixedRetry(2, time.Second), p, "a rejected document leaves the value unchanged")
		})
	}
}

// TestBackoffJSONRejectsStandalone checks a Backoff decoded on its own names
// the field without the "backoff." prefix.
func TestBackoffJSONRejectsStandalone(t *testing.T) {
	var b Backoff
	err := json.Unmarshal([]byte(`{"kind":"fixed","delay":500}`), &b)
	var pe *PolicyError
	require.True(t, errors.As(err, &pe), "want a *PolicyError, got %v", err)
	assert.Equal(t, "delay", pe.Field)
	assert.Contains(t, err.Error(), `"500ms" is expected`)
}

// TestRetryPolicyJSONMarshalRejectsInvalid checks that what UnmarshalJSON
// would reject is not written either.
func TestRetryPolicyJSONMarshalRejectsInvalid(t *testing.T) {
	tests := []struct {
		name  string
		p     RetryPolicy
		field string
	}{
		{"negative max_attempts", RetryPolicy{MaxAttempts: -1}, "max_attempts"},
		{"unknown kind", NewRetryPolicy(1, Backoff{Kind: "linear"}), "backoff.kind"},
		{"negative delay", FixedRetry(2, -time.Second), "backoff.delay"},
		{"negative base", NewRetryPolicy(2, exponential(-1, 2, time.Second)), "backoff.base"},
		{"negative max", NewRetryPolicy(2, exponential(1, 2, -time.Second)), "backoff.max"},
		{"NaN factor", NewRetryPolicy(2, exponential(1, math.NaN(), 1)), "backoff.factor"},
		{"infinite factor", NewRetryPolicy(2, exponential(1, math.Inf(-1), 1)), "backoff.factor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := json.Marshal(tt.p)
			var pe *PolicyError
			require.True(t, errors.As(err, &pe), "want a *PolicyError, got %v", err)
			assert.Equal(t, tt.field, pe.Field)
		})
	}
}

// FuzzPolicyJSON checks UnmarshalJSON never panics and that whatever it
// accepts marshals and decodes again to an equal value.
func FuzzPolicyJSON(f *testing.F) {
	for _, s := range []string{
		`{"max_attempts":5,"backoff":{"kind":"exponential","base":"1s","factor":2,"max":"5m0s","jitter":true}}`,
		`{"max_attempts":3,"backoff":{"kind":"fixed","delay":"500ms"}}`,
		`{"max_attempts":1,"backoff":{"kind":"none"}}`,
		`{}`, `null`, `[]`, `"x"`, `{"backoff":null}`, `{"backoff":{}}`,
		`{"max_attempts":-1}`, `{"max_attempts":1e3}`, `{"max_attempts":9223372036854775808}`,
		`{"backoff":{"kind":"fixed","delay":500}}`,
		`{"backoff":{"kind":"fixed","delay":"-1s"}}`,
		`{"backoff":{"kind":"exponential","base":"2562047h47m16.854775807s","factor":1e308,"max":"2562047h47m16.854775807s"}}`,
		`{"backoff":{"kind":"exponential","factor":-0}}`,
		`{"backoff":{"kind":"bogus"}}`,
		`{"backoff":{"kind":"fixed","kind":"none"}}`,
		`{"max_attempts":2,"backoff":{"delay":"1s","factor":1.5,"jitter":true}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var p RetryPolicy
		if err := json.Unmarshal(data, &p); err != nil {
			return
		}
		out, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("decoded %q to %+v, which does not marshal: %v", data, p, err)
		}
		var again RetryPolicy
		if err := json.Unmarshal(out, &again); err != nil {
			t.Fatalf("re-decoding %s: %v", out, err)
		}
		if again != p {
			t.Fatalf("round trip of %+v through %s gave %+v", p, out, again)
		}
	})
}
