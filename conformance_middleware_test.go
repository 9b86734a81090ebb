package litequeue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// Per-kind timeouts and handler middleware.

func init() {
	tests = append(tests, []struct {
		name string
		fn   func(t *testing.T, b conformanceBackend)
	}{
		{"KindTimeoutReplacesTheQueueTimeout", testKindTimeout},
		{"NegativeKindTimeoutMeansNone", testKindNoTimeout},
		{"MiddlewareWrapsEveryHandlerInOrder", testMiddleware},
	}...)
}

// Export is a job type with its own attempt timeout.
type Export struct {
	Name string `json:"name"`
}

func (Export) Kind() string { return "conformance_export" }

func (Export) Timeout() time.Duration { return 5 * time.Second }

// Forever is a job type that asks for no timeout at all.
type Forever struct{}

func (Forever) Kind() string { return "conformance_forever" }

func (Forever) Timeout() time.Duration { return -1 }

func testKindTimeout(t *testing.T, b conformanceBackend) {
	cfg := queue(litequeue.NoRetry())
	cfg.Timeout = time.Minute
	h := setup(t, b, queues(cfg))
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Export]) error {
		<-ctx.Done()
		return context.Cause(ctx)
	})
	h.start(t)
	id, err := h.Q.Enqueue(context.Background(), Export{Name: "x"}, nil)
	require.NoError(t, err)
	h.Ev.Wait(t, litequeue.EventStarted, id, 1)
	h.Clock.Add(5*time.Second - time.Nanosecond)
	require.Zero(t, h.Ev.Count(litequeue.EventDead, id), "not before the kind's timeout")
	h.Clock.Add(time.Nanosecond)
	ev := h.Ev.Wait(t, litequeue.EventDead, id, 1)
	var te *litequeue.TimeoutError
	require.ErrorAs(t, ev.Err, &te)
	require.Equal(t, 5*time.Second, te.Timeout, "the kind's timeout, not the queue's minute")
}

func testKindNoTimeout(t *testing.T, b conformanceBackend) {
	cfg := queue(litequeue.NoRetry())
	cfg.Timeout = time.Second
	h := setup(t, b, queues(cfg))
	release := make(chan struct{})
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Forever]) error {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-release:
			return nil
		}
	})
	h.start(t)
	id, err := h.Q.Enqueue(context.Background(), Forever{}, nil)
	require.NoError(t, err)
	h.Ev.Wait(t, litequeue.EventStarted, id, 1)
	h.Clock.Add(10 * time.Second) // ten times the queue's timeout, within the lease
	close(release)
	h.Ev.Wait(t, litequeue.EventSucceeded, id, 1)
	require.Zero(t, h.Ev.Count(litequeue.EventDead, id))
}

type traceKey struct{}

func testMiddleware(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.FixedRetry(2, time.Second))))
	var mu sync.Mutex
	var trace []string
	log := func(s string) {
		mu.Lock()
		trace = append(trace, s)
		mu.Unlock()
	}
	var seen []litequeue.AttemptInfo
	h.Q.Use(func(next litequeue.HandlerFunc) litequeue.HandlerFunc {
		return func(ctx context.Context, a litequeue.AttemptInfo) error {
			mu.Lock()
			seen = append(seen, a)
			mu.Unlock()
			log("outer>")
			err := next(context.WithValue(ctx, traceKey{}, fmt.Sprintf("span-%d-%d", a.ID, a.Attempt)), a)
			log("<outer")
			return err
		}
	}, func(next litequeue.HandlerFunc) litequeue.HandlerFunc {
		return func(ctx context.Context, a litequeue.AttemptInfo) error {
			log("inner>")
			err := next(ctx, a)
			log("<inner")
			if err != nil {
				return fmt.Errorf("attempt %d of %s: %w", a.Attempt, a.Kind, err)
			}
			return nil
		}
	})
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		log("handler " + ctx.Value(traceKey{}).(string))
		if d.Attempt == 1 {
			return errors.New("first try fails")
		}
		return nil
	})
	h.start(t)
	require.Panics(t, func() { h.Q.Use(func(next litequeue.HandlerFunc) litequeue.HandlerFunc { return next }) },
		"middleware is added before Start")
	id, err := h.Q.Enqueue(context.Background(), Email{To: "x"}, nil)
	require.NoError(t, err)
	ev := h.Ev.Wait(t, litequeue.EventRetrying, id, 1)
	require.EqualError(t, ev.Err, "attempt 1 of conformance_email: first try fails", "middleware sees and may wrap the error")
	h.Clock.Add(time.Second)
	h.Ev.Wait(t, litequeue.EventSucceeded, id, 1)
	mu.Lock()
	defer mu.Unlock()
	span := func(n int) string { return fmt.Sprintf("handler span-%d-%d", id, n) }
	require.Equal(t, []string{"outer>", "inner>", span(1), "<inner", "<outer", "outer>", "inner>", span(2), "<inner", "<outer"}, trace)
	require.Len(t, seen, 2)
	for i, a := range seen {
		require.Equal(t, id, a.ID)
		require.Equal(t, Email{}.Kind(), a.Kind)
		require.Equal(t, litequeue.DefaultQueue, a.Queue)
		require.Equal(t, i+1, a.Attempt)
		require.Equal(t, 2, a.MaxAttempts)
		require.True(t, a.EnqueuedAt.Equal(Start))
	}
}
