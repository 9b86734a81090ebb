package litequeue_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// What a handler's error becomes in the database: the same text on every
// backend, valid, bounded, and never a reason for a job to run forever.

func init() {
	tests = append(tests, []struct {
		name string
		fn   func(t *testing.T, b conformanceBackend)
	}{
		{"LongHandlerErrorIsStoredCappedAndMarked", testLongError},
		{"HandlerErrorWithNULAndInvalidUTF8IsStoredValidAndMarked", testInvalidErrorText},
		{"OutcomeTheStoreKeepsRefusingBecomesADeadLetter", testRefusedOutcome},
	}...)
}

// invalidTextMark ends a stored error in which invalid UTF-8 or NUL bytes
// were replaced (see litequeue.MaxErrorBytes).
const invalidTextMark = " [invalid UTF-8 or NUL bytes replaced by U+FFFD]"

func testLongError(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.NoRetry())))
	long := "upstream said: " + strings.Repeat("x", 1<<20)
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error { return errors.New(long) })
	h.start(t)
	ctx := context.Background()
	id, err := h.Q.Enqueue(ctx, Email{To: "x"}, nil)
	require.NoError(t, err)
	ev := h.Ev.Wait(t, litequeue.EventDead, id, 1)
	require.Equal(t, long, ev.Err.Error(), "the event keeps the handler's whole error")
	j, err := h.Q.DeadLetter(ctx, id)
	require.NoError(t, err)
	require.LessOrEqual(t, len(j.LastError), litequeue.MaxErrorBytes)
	require.Greater(t, len(j.LastError), litequeue.MaxErrorBytes-64, "the cap keeps as much as it may")
	require.True(t, strings.HasPrefix(j.LastError, "upstream said: xxx"), "stored: %.40q", j.LastError)
	require.True(t, strings.HasSuffix(j.LastError, fmt.Sprintf("…[truncated, %d bytes]", len(long))), "stored: …%q", j.LastError[max(len(j.LastError)-60, 0):])
	require.Len(t, j.Attempts, 1)
	require.Equal(t, j.LastError, j.Attempts[0].Error, "the history holds the same capped text")
}

func testInvalidErrorText(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.FixedRetry(2, time.Second))))
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		return errors.New("bad\x00byte\xff end")
	})
	h.start(t)
	ctx := context.Background()
	id, err := h.Q.Enqueue(ctx, Email{To: "x"}, nil)
	require.NoError(t, err)
	// PostgreSQL refuses NUL and invalid UTF-8 in text: the outcome is
	// written only because the queue made the text valid first.
	h.Ev.Wait(t, litequeue.EventRetrying, id, 1)
	want := "bad\uFFFDbyte\uFFFD end" + invalidTextMark
	j, err := h.Q.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateScheduled, j.State)
	require.Equal(t, want, j.LastError)
	require.True(t, utf8.ValidString(j.LastError))
	h.Clock.Add(time.Second)
	h.Ev.Wait(t, litequeue.EventDead, id, 1)
	j, err = h.Q.DeadLetter(ctx, id)
	require.NoError(t, err)
	require.Equal(t, want, j.LastError)
	require.Len(t, j.Attempts, 2)
	for _, a := range j.Attempts {
		require.Equal(t, want, a.Error)
	}
}

// testRefusedOutcome: the database refuses a failed attempt's outcome for
// what it holds (not a failing device), every time. The queue writes it a
// bounded number of times, then makes the job a dead letter whose reason
// says so — it does not keep the job running and write forever, and the
// handler does not run again.
func testRefusedOutcome(t *testing.T, b conformanceBackend) {
	if b.RefuseAttemptErrors == nil {
		t.Skip("the backend cannot make its database refuse an attempt record")
	}
	const marker = "poisonmarker"
	logs := newLogRecorder()
	causes := make(chan error, 1)
	cfg := queue(litequeue.FixedRetry(3, time.Second))
	cfg.OnDead = func(dead litequeue.JobInfo, cause error) (litequeue.Job, *litequeue.EnqueueOptions) {
		causes <- cause
		return nil, nil
	}
	h := setup(t, b, func(o *litequeue.Options) {
		o.Queues = []litequeue.QueueConfig{cfg}
		o.Logger = slog.New(logs)
	})
	t.Cleanup(b.RefuseAttemptErrors(t, h.Addr, marker))
	var runs atomic.Int64
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		runs.Add(1)
		return errors.New("upstream broke: " + marker)
	})
	h.start(t)
	ctx := context.Background()
	id, err := h.Q.Enqueue(ctx, Email{To: "x"}, nil)
	require.NoError(t, err)
	logs.wait(t, "recording a failure failed")
	// Each claim writes the kept outcome again first.
	deadline := time.Now().Add(WaitLimit)
	for h.Ev.Count(litequeue.EventDead, id) == 0 {
		require.True(t, time.Now().Before(deadline), "the refused outcome is written again and again")
		h.Q.Notify()
		select {
		case <-logs.ch:
		case <-h.Ev.ch:
		case <-time.After(10 * time.Millisecond):
		}
	}
	ev := h.Ev.Wait(t, litequeue.EventDead, id, 1)
	require.ErrorIs(t, ev.Err, litequeue.ErrOutcomeRefused)
	require.Equal(t, litequeue.DecisionGiveUp, ev.Decision)
	require.ErrorIs(t, <-causes, litequeue.ErrOutcomeRefused, "OnDead's cause")
	j, err := h.Q.DeadLetter(ctx, id)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(j.DeadReason, "outcome refused:"), "reason %q", j.DeadReason)
	require.Equal(t, 1, j.Attempt)
	require.Len(t, j.Attempts, 1)
	require.Equal(t, litequeue.DecisionGiveUp, j.Attempts[0].Decision)
	require.Contains(t, j.Attempts[0].Error, "refused by the test")
	require.Contains(t, j.LastError, "refused by the test")
	require.Equal(t, int64(1), runs.Load(), "the handler ran again")
	require.Len(t, logs.containing("kept refusing"), 1)
}
