package conformance

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
		fn   func(t *testing.T, b Backend)
	}{
		{"SuccessWhoseWriteFailsIsWrittenAgainNotRunAgain", testKeptSuccess},
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

func testKeptSuccess(t *testing.T, b Backend) {
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
	h.start(t)
	restore := b.FailJobDeletes(t, h.Addr)
	id, err := h.Q.Enqueue(ctx, Email{To: "x"}, nil)
	require.NoError(t, err)
	select {
	case <-failed:
	case <-time.After(WaitLimit):
		t.Fatal("the success was written although the database refuses deletes")
	}
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
