package litequeue

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// RetryPolicy decides whether a failed job runs again and how long it waits
// first.
//
// MaxAttempts counts the first try: 1 means the job runs once and is never
// retried. A job that has failed its last attempt goes to the dead letters.
//
// Defaults, side by side:
//
//	Source                                   MaxAttempts  Backoff
//	RetryPolicy{}, DefaultRetryPolicy(),
//	NoRetry()                                1            NoBackoff()
//	NewQueueConfig(name).Retry               1            NoBackoff()
//	ExponentialBackoff()                     —            Base 1s, Factor 2.0, Max 300s, Jitter true
//	ExponentialRetry(n)                      n            ExponentialBackoff()
//	FixedRetry(n, d)                         n            FixedBackoff(d)
//	ExponentialRetry(3), the usual start     3            exponential, Base 1s, Factor 2.0, Max 5m, Jitter true
//
// The first two rows are the trap: a queue whose QueueConfig names no retry
// policy does not retry at all — the first failure is final and the job goes
// to the dead letters. Set QueueConfig.Retry (or give the job a RetryPolicy
// method) to retry.
//
// Precedence at run time: a job's own RetryPolicy() method, when it returns a
// non-nil policy; otherwise its queue's QueueConfig.Retry.
//
// RetryPolicy is comparable with == and serializes to JSON with snake_case
// keys and Go duration strings, for example
//
//	{"max_attempts":5,"backoff":{"kind":"exponential","base":"1s","factor":2,"max":"5m0s","jitter":true}}
//	{"max_attempts":3,"backoff":{"kind":"fixed","delay":"500ms"}}
//
// For every valid policy (MaxAttempts >= 0 and a valid Backoff, see
// Backoff.MarshalJSON) json.Unmarshal(json.Marshal(p)) == p.
type RetryPolicy struct {
	// MaxAttempts is the total number of attempts, the first one included.
	// Zero or negative behaves as 1.
	MaxAttempts int
	// Backoff computes the wait before each retry.
	Backoff Backoff
}

// RetryDecision is what a RetryPolicy decides after a failed attempt.
type RetryDecision struct {
	// Retry is false when the job gives up.
	Retry bool
	// Delay is the wait before the next attempt when Retry is true; 0
	// otherwise.
	Delay time.Duration
}

// NewRetryPolicy returns a RetryPolicy of maxAttempts attempts (the first one
// included) waiting b between them.
func NewRetryPolicy(maxAttempts int, b Backoff) RetryPolicy {
	return RetryPolicy{MaxAttempts: maxAttempts, Backoff: b}
}

// NoRetry returns the policy that never retries: 1 attempt, NoBackoff().
func NoRetry() RetryPolicy { return RetryPolicy{MaxAttempts: 1, Backoff: NoBackoff()} }

// DefaultRetryPolicy returns the default policy, equal to NoRetry(): one
// attempt, no retries. It is what a queue without a configured policy uses.
func DefaultRetryPolicy() RetryPolicy { return NoRetry() }

// ExponentialRetry returns a policy of maxAttempts attempts with
// ExponentialBackoff() between them. ExponentialRetry(3) is the usual
// "retry a couple of times" setup.
func ExponentialRetry(maxAttempts int) RetryPolicy {
	return RetryPolicy{MaxAttempts: maxAttempts, Backoff: ExponentialBackoff()}
}

// FixedRetry returns a policy of maxAttempts attempts waiting delay between
// them.
func FixedRetry(maxAttempts int, delay time.Duration) RetryPolicy {
	return RetryPolicy{MaxAttempts: maxAttempts, Backoff: FixedBackoff(delay)}
}

// Attempts returns the effective number of attempts: MaxAttempts, or 1 when
// MaxAttempts is zero or negative.
func (p RetryPolicy) Attempts() int { return max(p.MaxAttempts, 1) }

// Decide returns the decision after failedAttempt (1 for the first try) has
// failed: give up when failedAttempt >= MaxAttempts, otherwise retry after
// Backoff.DelayFor(failedAttempt). It never panics; failedAttempt below 1
// behaves as 1.
func (p RetryPolicy) Decide(failedAttempt int) RetryDecision {
	return p.DecideRand(failedAttempt, nil)
}

// DecideRand is Decide drawing any jitter from r; a nil r acts as Decide.
func (p RetryPolicy) DecideRand(failedAttempt int, r *rand.Rand) RetryDecision {
	failedAttempt = max(failedAttempt, 1)
	if failedAttempt >= p.Attempts() {
		return RetryDecision{}
	}
	return RetryDecision{Retry: true, Delay: p.Backoff.DelayForRand(failedAttempt, r)}
}

// retryPolicyJSON is the JSON form of a RetryPolicy.
type retryPolicyJSON struct {
	MaxAttempts int     `json:"max_attempts"`
	Backoff     Backoff `json:"backoff"`
}

// MarshalJSON writes p as {"max_attempts":N,"backoff":{...}}; see
// Backoff.MarshalJSON for the backoff object. It returns a *PolicyError for a
// negative MaxAttempts or an invalid Backoff.
func (p RetryPolicy) MarshalJSON() ([]byte, error) {
	if p.MaxAttempts < 0 {
		return nil, errNegativeAttempts(p.MaxAttempts)
	}
	if err := p.Backoff.validate(); err != nil {
		return nil, inBackoff(err)
	}
	return json.Marshal(retryPolicyJSON(p))
}

// UnmarshalJSON reads p from a JSON object with the keys max_attempts and
// backoff; a missing key leaves its field zero, whatever p held before. JSON
// null leaves p unchanged.
//
// It returns a *PolicyError naming the offending field, and leaves p
// unchanged, for a key it does not know, a max_attempts that is negative or
// not a JSON integer, or any error of Backoff.UnmarshalJSON (its field then
// reads "backoff.delay" and so on).
func (p *RetryPolicy) UnmarshalJSON(data []byte) error {
	fields, err := decodeObject(data, "max_attempts", "backoff")
	if err != nil || fields == nil {
		return err
	}
	var out RetryPolicy
	if err := decodeField(fields, "max_attempts", &out.MaxAttempts); err != nil {
		return err
	}
	if out.MaxAttempts < 0 {
		return errNegativeAttempts(out.MaxAttempts)
	}
	if raw, ok := fields["backoff"]; ok {
		if err := out.Backoff.UnmarshalJSON(raw); err != nil {
			return inBackoff(err)
		}
	}
	*p = out
	return nil
}

func errNegativeAttempts(n int) error {
	return &PolicyError{Field: "max_attempts", Err: fmt.Errorf("negative max_attempts %d", n)}
}

// inBackoff prefixes the field of a Backoff's *PolicyError with "backoff".
func inBackoff(err error) error {
	var pe *PolicyError
	if !errors.As(err, &pe) {
		return &PolicyError{Field: "backoff", Err: err}
	}
	field := "backoff"
	if pe.Field != "" {
		field += "." + pe.Field
	}
	return &PolicyError{Field: field, Err: pe.Err}
}
