package litequeue_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// The fault tests of the suite: a write the database refuses (a failing
// device, a full disk) costs neither a second run of a finished handler nor
// an attempt.

func init() {
	tests = append(tests, []struct {
		name string
		fn   func(t *testing.T, b conformanceBackend)
	}{
		{"SuccessWhoseWriteFailsIsWrittenAgainNotRunAgain", testKeptSuccess},
		{"KeptSuccessIsGivenUpAtStopAndTheJobRunsAgain", func(t *testing.T, b conformanceBackend) { testKeptSuccessAtStop(t, b, true) }},
		{"StopWhoseContextEndedDoesNotReleaseAKeptSuccess", func(t *testing.T, b conformanceBackend) { testKeptSuccessAtStop(t, b, false) }},
	}...)
}

// logSignal is a log handler that signals ch once for each record whose
// message contains msg.
type logSignal struct {
	msg string
	ch  chan struct{}
}

func (l logSignal) Enabled(context.Context, slog.Level) bool { return true }
func (l logSignal) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, l.msg) {
		select {
		case l.ch <- struct{}{}:
		default:
		}
	}
	return nil
}
func (l logSignal) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l logSignal) WithGroup(string) slog.Handler      { return l }

// startRefusingSuccess starts h, makes its database refuse deletes,
// enqueues a job and waits until failed says its success could not be
// written. It returns the job's id and the function that lets the database
// delete again.
func startRefusingSuccess(t *testing.T, b conformanceBackend, h *Harness, failed <-chan struct{}) (int64, func()) {
	t.Helper()
	h.start(t)
	restore := b.FailJobDeletes(t, h.Addr)
	id, err := h.Q.Enqueue(context.Background(), Email{To: "x"}, nil)
	require.NoError(t, err)
	select {
	case <-failed:
	case <-time.After(WaitLimit):
		t.Fatal("the success was written although the database refuses deletes")
	}
	return id, restore
}

func testKeptSuccess(t *testing.T, b conformanceBackend) {
	if b.FailJobDeletes == nil {
		t.Skip("the backend cannot make its database refuse deletes")
	}
	ctx := context.Background()
	failed := make(chan struct{}, 1)
	h := setup(t, b, func(o *litequeue.Options) {
		o.Logger = slog.New(logSignal{msg: "writing a success failed", ch: failed})
	})
	var runs atomic.Int64
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		runs.Add(1)
		return nil
	})
	id, restore := startRefusingSuccess(t, b, h, failed)
	j, err := h.Q.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateRunning, j.State, "the job keeps its lease while its success waits")
	require.Equal(t, 1, j.Attempt)

	// The database works again: the next claim writes the kept success.
	restore()
	h.Q.Notify()
	h.Ev.Wait(t, litequeue.EventSucceeded, id, 1)
	_, err = h.Q.Job(ctx, id)
	require.ErrorIs(t, err, litequeue.ErrNotFound, "the success was written")
	require.Equal(t, int64(1), runs.Load(), "the handler ran again")
	require.Zero(t, h.Ev.Count(litequeue.EventStale, id))
	require.Zero(t, h.Ev.Count(litequeue.EventDead, id))
}

// testKeptSuccessAtStop stops a queue that keeps a success the database
// refuses. patient: Stop's context has time (Stop must not wait for the
// write). Not patient: it has ended already, so Stop releases what still
// runs — but not the kept success: its handler finished, and releasing it
// would give its attempt back and run it again at once.
func testKeptSuccessAtStop(t *testing.T, b conformanceBackend, patient bool) {
	if b.FailJobDeletes == nil {
		t.Skip("the backend cannot make its database refuse deletes")
	}
	ctx := context.Background()
	failed, abandoned := make(chan struct{}, 1), make(chan struct{}, 1)
	var runs atomic.Int64
	mod := func(ch ...chan struct{}) func(o *litequeue.Options) {
		return func(o *litequeue.Options) {
			o.Queues = []litequeue.QueueConfig{queue(litequeue.FixedRetry(2, time.Second))}
			if len(ch) == 2 {
				o.Logger = slog.New(multiSignal{logSignal{"writing a success failed", ch[0]}, logSignal{"before Stop ended", ch[1]}})
			}
		}
	}
	h := setup(t, b, mod(failed, abandoned))
	handle := func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		runs.Add(1)
		return nil
	}
	litequeue.Register(h.Q, handle)
	id, restore := startRefusingSuccess(t, b, h, failed)

	// Stop while the database still refuses: Stop returns, and says the
	// success was given up; the job keeps its row, running under the lease.
	stopCtx, cancel := context.WithTimeout(ctx, WaitLimit)
	defer cancel()
	if !patient {
		cancel()
	}
	_ = h.Q.Stop(stopCtx) // it may report the failed final write
	if patient {
		require.NoError(t, stopCtx.Err(), "Stop waited for a success it cannot write")
	}
	select {
	case <-abandoned:
	default:
		t.Fatal("Stop did not log the success it gave up")
	}
	j, err := h.Q.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateRunning, j.State)
	restore()

	// Another process after the lease: the job runs again, as after a crash.
	h2 := open(t, b, h.Addr, j.VisibleAt.Add(time.Second), mod())
	litequeue.Register(h2.Q, handle)
	h2.start(t)
	h2.Ev.Wait(t, litequeue.EventSucceeded, id, 1)
	require.Equal(t, int64(2), runs.Load())
}

// multiSignal passes each record to every handler.
type multiSignal []logSignal

func (m multiSignal) Enabled(context.Context, slog.Level) bool { return true }
func (m multiSignal) Handle(ctx context.Context, r slog.Record) error {
	for _, l := range m {
		_ = l.Handle(ctx, r)
	}
	return nil
}
func (m multiSignal) WithAttrs([]slog.Attr) slog.Handler { return m }
func (m multiSignal) WithGroup(string) slog.Handler      { return m }
