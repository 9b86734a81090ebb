package litequeue

import (
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
//	(a typical retrying setup)               3            ExponentialRetry(3): exponential, 1s × 2.0, max 5m, jitter
//
// The first two rows are the trap: a queue whose QueueConfig names no retry
// policy does not retry at all — the first failure is final. Set
// QueueConfig.Retry (or give the job a RetryPolicy method) to retry.
//
// The contract this type follows was written for a Rust library whose
// retry(...) attribute defaults to 3 attempts with exponential backoff
// (base 1s, factor 2.0, max 5m, jitter). Go has no attributes; those defaults
// are exactly ExponentialRetry(3).
//
// Precedence at run time: a job's own RetryPolicy() method, when it returns a
// non-nil policy; otherwise its queue's QueueConfig.Retry.
//
// RetryPolicy is comparable with == and serializes to JSON with snake_case
// keys and Go duration strings, for example
//
//	{"max_attempts":5,"backoff":{"kind":"exponential","base":"1s","factor":2,"max":"5m0s","jitter":true}}
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
