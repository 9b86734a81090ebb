package litequeue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// Progress and output of a handler, and watching them.

func init() {
	tests = append(tests, []struct {
		name string
		fn   func(t *testing.T, b conformanceBackend)
	}{
		{"ProgressIsCoalescedPerIntervalAndTheLastValueWritten", testProgressCoalesced},
		{"BadProgressAndOutputAreClearErrors", testProgressBadInput},
		{"ProgressAndOutputTextIsCheckedLikeOtherText", testProgressText},
		{"OutputAndProgressStayWithADeadLetter", testOutputOnDeadLetter},
		{"WatchProgressSeesThisProcessAtOnceAndCloses", testWatchInProcess},
		{"WatchProgressPollsAnotherProcess", testWatchOtherProcess},
		{"WatchProgressNeverGoesBackToAnOlderWrite", testWatchNeverGoesBack},
		{"WatchProgressOpenedMidRunStartsFromTheLatestReport", testWatchMidRun},
		{"WatchProgressClosesWithTheQueue", testWatchClose},
	}...)
}

// chanGate is a step a handler waits at until the test opens it.
type chanGate chan struct{}

func (g chanGate) wait(t *testing.T) {
	select {
	case <-g:
	case <-time.After(WaitLimit):
		t.Error("chanGate never opened")
	}
}

func testProgressCoalesced(t *testing.T, b conformanceBackend) {
	h := setup(t, b, func(o *litequeue.Options) { o.CompletedRetention = time.Hour })
	firstWritten, loopDone, finish := make(chanGate), make(chan struct{}), make(chanGate)
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		if err := d.SetProgress(0.1, "start"); err != nil {
			return err
		}
		firstWritten.wait(t)
		for i := range 1000 { // a hot loop: coalesced into one write per interval
			if err := d.SetProgress(0.2+float64(i)/2000, fmt.Sprintf("row %d", i)); err != nil {
				return err
			}
		}
		close(loopDone)
		finish.wait(t)
		if err := d.SetProgressMessage("writing the file"); err != nil {
			return err
		}
		return d.SetOutput(map[string]int{"rows": 1000})
	})
	h.start(t)
	ctx := context.Background()
	id, err := h.Q.Enqueue(ctx, Email{To: "x"}, nil)
	require.NoError(t, err)

	h.Ev.Wait(t, litequeue.EventProgress, id, 1)
	j, err := h.Q.Job(ctx, id)
	require.NoError(t, err)
	require.NotNil(t, j.Progress, "the first report is written at once")
	require.Equal(t, 0.1, j.Progress.Fraction)
	require.Equal(t, "start", j.Progress.Message)
	require.True(t, j.Progress.UpdatedAt.Equal(Start))
	close(firstWritten)
	<-loopDone

	h.Clock.Add(litequeue.DefaultProgressInterval - time.Nanosecond)
	j, err = h.Q.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "start", j.Progress.Message, "no second write within the interval")
	require.Equal(t, 1, h.Ev.Count(litequeue.EventProgress, id))
	h.Clock.Add(time.Nanosecond)
	h.Ev.Wait(t, litequeue.EventProgress, id, 2)
	j, err = h.Q.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "row 999", j.Progress.Message, "the last value of the interval wins")
	require.InDelta(t, 0.2+999.0/2000, j.Progress.Fraction, 1e-12)
	require.Equal(t, 2, h.Ev.Count(litequeue.EventProgress, id), "1000 reports made one write")

	close(finish)
	h.Ev.Wait(t, litequeue.EventSucceeded, id, 1)
	j, err = h.Q.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateCompleted, j.State)
	require.Equal(t, "writing the file", j.Progress.Message, "the final report is written without waiting for the interval")
	require.InDelta(t, 0.2+999.0/2000, j.Progress.Fraction, 1e-12, "a message alone keeps the fraction")
	require.JSONEq(t, `{"rows":1000}`, string(j.Output))
	require.Equal(t, 3, h.Ev.Count(litequeue.EventProgress, id))
}

func testProgressBadInput(t *testing.T, b conformanceBackend) {
	h := setup(t, b, func(o *litequeue.Options) { o.CompletedRetention = time.Hour })
	errs := make(chan []error, 1)
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		errs <- []error{
			d.SetProgress(1.5, ""),
			d.SetProgress(-0.1, ""),
			d.SetProgress(math.NaN(), ""),
			d.SetProgress(0.5, strings.Repeat("x", litequeue.MaxProgressMessageLen+1)),
			d.SetOutput(strings.Repeat("x", litequeue.MaxOutputBytes)),
			d.SetOutput(func() {}),
			d.SetProgress(1, "done"),
			d.SetOutput([]int{1, 2}),
		}
		return nil
	})
	h.start(t)
	ctx := context.Background()
	id, err := h.Q.Enqueue(ctx, Email{To: "x"}, nil)
	require.NoError(t, err)
	got := <-errs
	for i := range 4 {
		require.ErrorIs(t, got[i], litequeue.ErrInvalidProgress, "report %d", i)
	}
	require.Contains(t, got[0].Error(), "outside [0, 1]")
	require.ErrorIs(t, got[4], litequeue.ErrInvalidOutput)
	require.Contains(t, got[4].Error(), "over MaxOutputBytes")
	require.ErrorIs(t, got[5], litequeue.ErrInvalidOutput)
	require.NoError(t, got[6])
	require.NoError(t, got[7])
	h.Ev.Wait(t, litequeue.EventSucceeded, id, 1)
	j, err := h.Q.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 1.0, j.Progress.Fraction, "rejected reports recorded nothing")
	require.Equal(t, "done", j.Progress.Message)
	require.JSONEq(t, `[1,2]`, string(j.Output))
}

// A progress message holding NUL or invalid UTF-8 (text PostgreSQL cannot
// store, and SQLite would store other than given), and an output whose
// strings hold invalid UTF-8 (which encoding/json would replace silently),
// are refused at the call with a clear error, on both backends alike, and
// nothing of them is recorded.
func testProgressText(t *testing.T, b conformanceBackend) {
	h := setup(t, b, func(o *litequeue.Options) { o.CompletedRetention = time.Hour })
	errs := make(chan []error, 1)
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		errs <- []error{
			d.SetProgress(1, "done \x1b[31m\ttab"), // controls other than NUL are text like any
			d.SetOutput(map[string]string{"ok": "nul\x00 is \\u0000 in JSON"}),
			d.SetProgressMessage("nul\x00byte"),
			d.SetProgress(0.5, "bad\xffbyte"),
			d.SetProgressMessage(string([]byte{0xc3})),
			d.SetOutput("bad\xffbyte"),
			d.SetOutput(map[string]string{"k\xff": "v"}),
			d.SetOutput(json.RawMessage("\"raw\xffbyte\"")),
		}
		return nil
	})
	h.start(t)
	ctx := context.Background()
	id, err := h.Q.Enqueue(ctx, Email{To: "x"}, nil)
	require.NoError(t, err)
	got := <-errs
	require.NoError(t, got[0])
	require.NoError(t, got[1])
	for i := 2; i < 5; i++ {
		require.ErrorIs(t, got[i], litequeue.ErrInvalidProgress, "report %d", i)
	}
	require.Contains(t, got[2].Error(), "NUL")
	require.Contains(t, got[3].Error(), "UTF-8")
	for i := 5; i < len(got); i++ {
		require.ErrorIs(t, got[i], litequeue.ErrInvalidOutput, "output %d", i)
		require.Contains(t, got[i].Error(), "UTF-8", "output %d", i)
	}
	h.Ev.Wait(t, litequeue.EventSucceeded, id, 1)
	j, err := h.Q.Job(ctx, id)
	require.NoError(t, err)
	require.NotNil(t, j.Progress)
	require.Equal(t, 1.0, j.Progress.Fraction, "refused reports recorded nothing")
	require.Equal(t, "done \x1b[31m\ttab", j.Progress.Message)
	require.JSONEq(t, `{"ok":"nul\u0000 is \\u0000 in JSON"}`, string(j.Output))
}

func testOutputOnDeadLetter(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.NoRetry())))
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		if err := d.SetProgress(0.5, "half the rows"); err != nil {
			return err
		}
		if err := d.SetOutput(map[string]any{"bad_row": 17}); err != nil {
			return err
		}
		return errors.New("row 17 does not parse")
	})
	h.start(t)
	ctx := context.Background()
	id, err := h.Q.Enqueue(ctx, Email{To: "x"}, nil)
	require.NoError(t, err)
	ch, err := h.Q.WatchProgress(ctx, id)
	require.NoError(t, err)
	h.Ev.Wait(t, litequeue.EventDead, id, 1)
	var last litequeue.Progress
	for {
		p, ok := next(t, ch)
		if !ok {
			break
		}
		last = p
	}
	require.Equal(t, litequeue.StateDead, last.State, "the last value is the death")
	j, err := h.Q.DeadLetter(ctx, id)
	require.NoError(t, err)
	require.JSONEq(t, `{"bad_row":17}`, string(j.Output))
	require.Equal(t, 0.5, j.Progress.Fraction)
	require.Equal(t, "half the rows", j.Progress.Message)
}

// next reads the channel's next value, failing after WaitLimit.
func next(t *testing.T, ch <-chan litequeue.Progress) (litequeue.Progress, bool) {
	t.Helper()
	select {
	case p, ok := <-ch:
		return p, ok
	case <-time.After(WaitLimit):
		t.Fatal("no progress value arrived")
		return litequeue.Progress{}, false
	}
}

func testWatchInProcess(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	reported, finish := make(chan struct{}), make(chanGate)
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		if err := d.SetProgress(0.25, "a quarter"); err != nil {
			return err
		}
		if err := d.SetProgress(0.3, "a bit more"); err != nil {
			return err
		}
		close(reported)
		finish.wait(t)
		return nil
	})
	ctx := context.Background()
	_, err := h.Q.WatchProgress(ctx, 12345)
	require.ErrorIs(t, err, litequeue.ErrNotFound)

	id, err := h.Q.Enqueue(ctx, Email{To: "x"}, nil)
	require.NoError(t, err)
	ch, err := h.Q.WatchProgress(ctx, id)
	require.NoError(t, err)
	p, ok := next(t, ch)
	require.True(t, ok)
	require.Equal(t, litequeue.StateReady, p.State)
	h.start(t)
	<-reported
	// The clock does not move: nothing but the in-process report can bring
	// this value (the row may hold only the first report).
	p, ok = next(t, ch)
	require.True(t, ok)
	require.Equal(t, litequeue.StateRunning, p.State)
	require.Equal(t, 0.3, p.Fraction, "a slow reader gets the latest value")
	require.Equal(t, "a bit more", p.Message)
	close(finish)
	p, ok = next(t, ch)
	require.True(t, ok)
	require.Equal(t, litequeue.StateCompleted, p.State)
	require.Equal(t, 0.3, p.Fraction)
	_, ok = next(t, ch)
	require.False(t, ok, "the channel closes when the job finished")
}

// registerTwoReports registers on h a handler that reports 0.3 "importing"
// (written at once), then, once second is called, 0.8 "summing up"
// (coalesced: the clock stands still, so the row keeps 0.3 until the
// handler returns); second returns once it was made. The handler returns
// when end is called, or when the test ends, so that a failed check does
// not leave it waiting.
func registerTwoReports(t *testing.T, h *Harness) (second, end func()) {
	firstWritten, reported, finish := make(chanGate), make(chan struct{}), make(chanGate)
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		if err := d.SetProgress(0.3, "importing"); err != nil {
			return err
		}
		firstWritten.wait(t)
		if err := d.SetProgress(0.8, "summing up"); err != nil {
			return err
		}
		close(reported)
		finish.wait(t)
		return nil
	})
	var once sync.Once
	end = func() { once.Do(func() { close(finish) }) }
	t.Cleanup(end)
	return func() { close(firstWritten); <-reported }, end
}

// testWatchNeverGoesBack: the row holds an older report than the last one
// this process published (reports are written coalesced, and after they are
// published); the watcher's poll of the row must not show it again. Seen in
// the dashboard's browser test as a bar at 80% beside the 30% message.
func testWatchNeverGoesBack(t *testing.T, b conformanceBackend) {
	h := setup(t, b, func(o *litequeue.Options) { o.PollInterval = 5 * time.Millisecond })
	second, end := registerTwoReports(t, h)
	ctx := context.Background()
	id, err := h.Q.Enqueue(ctx, Email{To: "x"}, nil)
	require.NoError(t, err)
	ch, err := h.Q.WatchProgress(ctx, id)
	require.NoError(t, err)
	p, _ := next(t, ch)
	require.Equal(t, litequeue.StateReady, p.State)
	h.start(t)
	h.Ev.Wait(t, litequeue.EventProgress, id, 1)
	second()
	// The row holds 0.3 now, and will until the handler returns. Polls of
	// the row for 40 intervals must not bring it back once 0.8 was seen.
	seen := false
	deadline := time.After(40 * 5 * time.Millisecond)
	for done := false; !done; {
		select {
		case p := <-ch:
			require.Equal(t, litequeue.StateRunning, p.State, "%+v", p)
			if p.Fraction == 0.8 {
				seen = true
				require.Equal(t, "summing up", p.Message)
			} else {
				require.False(t, seen, "after 0.8 the watcher went back to %+v", p)
			}
		case <-deadline:
			done = true
		}
	}
	require.True(t, seen, "the in-process report reached the watcher")
	end()
	for {
		p, ok := next(t, ch)
		if !ok {
			break
		}
		require.Equal(t, 0.8, p.Fraction, "%+v", p)
	}
}

// testWatchMidRun: a watcher opened while the row holds an older report
// than this process's latest (coalesced, not written yet) starts from the
// latest.
func testWatchMidRun(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	second, end := registerTwoReports(t, h)
	ctx := context.Background()
	id, err := h.Q.Enqueue(ctx, Email{To: "x"}, nil)
	require.NoError(t, err)
	h.start(t)
	h.Ev.Wait(t, litequeue.EventProgress, id, 1)
	second()
	j, err := h.Q.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 0.3, j.Progress.Fraction, "the row still holds the first report")
	ch, err := h.Q.WatchProgress(ctx, id)
	require.NoError(t, err)
	p, ok := next(t, ch)
	require.True(t, ok)
	require.Equal(t, litequeue.StateRunning, p.State)
	require.Equal(t, 0.8, p.Fraction, "the first value is the latest report, not the row's")
	require.Equal(t, "summing up", p.Message)
	end()
	h.Ev.Wait(t, litequeue.EventSucceeded, id, 1)
}

func testWatchOtherProcess(t *testing.T, b conformanceBackend) {
	worker := setup(t, b, func(o *litequeue.Options) { o.CompletedRetention = time.Hour })
	reported, finish := make(chan struct{}), make(chanGate)
	litequeue.Register(worker.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		if err := d.SetProgress(0.5, "half"); err != nil {
			return err
		}
		close(reported)
		finish.wait(t)
		return nil
	})
	ctx := context.Background()
	id, err := worker.Q.Enqueue(ctx, Email{To: "x"}, nil)
	require.NoError(t, err)
	// Another queue on the same database, which polls every few
	// milliseconds of real time.
	app := open(t, b, worker.Addr, Start, func(o *litequeue.Options) { o.PollInterval = 5 * time.Millisecond })
	ch, err := app.Q.WatchProgress(ctx, id)
	require.NoError(t, err)
	p, _ := next(t, ch)
	require.Equal(t, litequeue.StateReady, p.State)
	worker.start(t)
	<-reported
	worker.Ev.Wait(t, litequeue.EventProgress, id, 1)
	for p.State != litequeue.StateRunning || p.Fraction != 0.5 {
		var ok bool
		p, ok = next(t, ch)
		require.True(t, ok)
	}
	require.Equal(t, "half", p.Message)
	close(finish)
	for {
		q, ok := next(t, ch)
		if !ok {
			break
		}
		p = q
	}
	require.Equal(t, litequeue.StateCompleted, p.State, "the last value is the job's end")
}

func testWatchClose(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	ctx := context.Background()
	id, err := h.Q.Enqueue(ctx, Email{To: "x"}, &litequeue.EnqueueOptions{Delay: time.Hour})
	require.NoError(t, err)
	ch, err := h.Q.WatchProgress(ctx, id)
	require.NoError(t, err)
	p, ok := next(t, ch)
	require.True(t, ok)
	require.Equal(t, litequeue.StateScheduled, p.State)
	require.NoError(t, h.Q.Close())
	_, ok = next(t, ch)
	require.False(t, ok, "Close closes the watchers' channels")
}
