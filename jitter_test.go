package litequeue

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A queue draws retry jitter from Options.Rand: with a seeded source its
// delays are exactly those the policy draws from the same seed.
func TestSeededRandGivesReproducibleRetryDelays(t *testing.T) {
	policy := ExponentialRetry(5) // full jitter
	h := setup(t, func(o *Options) {
		o.Rand = rand.New(rand.NewPCG(7, 11))
		o.Queues = []QueueConfig{{Name: DefaultQueue, Retry: policy}}
	})
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		return errors.New("always fails")
	})
	h.start(t)
	id, err := h.q.Enqueue(context.Background(), SendEmail{To: "x"}, nil)
	require.NoError(t, err)
	want := rand.New(rand.NewPCG(7, 11))
	for attempt := 1; attempt < policy.MaxAttempts; attempt++ {
		ev := h.ev.wait(t, EventRetrying, id, attempt)
		dec := policy.DecideRand(attempt, want)
		require.Equal(t, dec.Delay, ev.Delay, "attempt %d", attempt)
		h.tc.waitTimer(t, ev.Time.Add(ev.Delay))
		h.clock.Add(ev.Delay)
	}
	h.ev.wait(t, EventDead, id, 1)
	require.Equal(t, policy.MaxAttempts, h.ev.count(EventStarted, id))
}

// Full jitter draws from the closed range [0, Ceiling]: the ceiling itself
// is one of the waits (seen here with a ceiling of 1ns, where it is half of
// them).
func TestFullJitterDrawsTheCeilingToo(t *testing.T) {
	b := Backoff{Kind: BackoffExponential, Base: time.Nanosecond, Factor: 2, Max: time.Nanosecond, Jitter: true}
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[time.Duration]int{}
	for range 64 {
		seen[b.DelayForRand(1, r)]++
	}
	require.Len(t, seen, 2, "want both 0 and 1ns: %v", seen)
	require.Positive(t, seen[time.Nanosecond])
}
