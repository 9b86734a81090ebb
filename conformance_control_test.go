package litequeue_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// Live control: pause/resume, cancelling running jobs, snooze.

func init() {
	tests = append(tests, []struct {
		name string
		fn   func(t *testing.T, b conformanceBackend)
	}{
		{"PauseHoldsClaimsUntilResumeAndRunningJobsFinish", testPause},
		{"PauseSurvivesReopenAndHoldsTheDirectHandOff", testPauseReopen},
		{"PauseByAnotherQueueHoldsClaimsInTheStore", testPauseOther},
		{"PauseAndResumeBadInput", testPauseBadInput},
		{"CancelRunningJobCancelsItsContextAndKeepsItCancelled", testCancelRunning},
		{"CancelledHandlerThatIgnoresItsContextHasItsResultDropped", testCancelIgnored},
		{"CancelFromAnotherQueueIsNoticedAtTheLeaseExtension", testCancelOtherQueue},
		{"CancelFromAnotherQueueIsNoticedByThePoll", testCancelOtherQueuePolled},
		{"CancelRefusesFinishedJobsAndPurgeCancelledDeletes", testCancelFinished},
		{"SnoozeReschedulesWithoutUsingAnAttempt", testSnooze},
		{"SnoozePastMaxSnoozesFailsAsAnAttempt", testSnoozeLimit},
		{"SnoozeWithANegativeDurationFails", testSnoozeNegative},
	}...)
}

// gate is a channel handlers wait on; open closes it once.
type gate struct {
	ch   chan struct{}
	once sync.Once
}

func newGate(t *testing.T) *gate {
	g := &gate{ch: make(chan struct{})}
	t.Cleanup(g.open)
	return g
}

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

// index returns the position of the first event of typ for job id (0: any)
// in the recorded order, or -1.
func (e *Events) index(typ litequeue.EventType, id int64) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, ev := range e.all {
		if ev.Type == typ && (id == 0 || ev.JobID == id) {
			return i
		}
	}
	return -1
}

func state(t *testing.T, q *litequeue.Queue, id int64) litequeue.State {
	t.Helper()
	j, err := q.Job(context.Background(), id)
	require.NoError(t, err)
	return j.State
}

func statsOf(t *testing.T, q *litequeue.Queue, name string) litequeue.QueueStats {
	t.Helper()
	all, err := q.Stats(context.Background())
	require.NoError(t, err)
	for _, s := range all {
		if s.Queue == name {
			return s
		}
	}
	return litequeue.QueueStats{Queue: name}
}

// A paused queue starts nothing new — jobs claimed but not started go back,
// due jobs and scheduled ones coming due wait — while the running handler
// finishes; Resume starts them.
func testPause(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(litequeue.QueueConfig{Name: litequeue.DefaultQueue, Concurrency: 1, Retry: litequeue.NoRetry()}))
	g := newGate(t)
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		if d.Job.To == "first" {
			<-g.ch
		}
		return nil
	})
	h.start(t)
	ctx := context.Background()
	first, err := h.Q.Enqueue(ctx, Email{To: "first"}, nil)
	require.NoError(t, err)
	h.Ev.Wait(t, litequeue.EventStarted, first, 1)
	second, err := h.Q.Enqueue(ctx, Email{To: "second"}, nil)
	require.NoError(t, err)
	later, err := h.Q.Enqueue(ctx, Email{To: "later"}, &litequeue.EnqueueOptions{Delay: time.Minute})
	require.NoError(t, err)

	require.NoError(t, h.Q.Pause(ctx, litequeue.DefaultQueue))
	require.NoError(t, h.Q.Pause(ctx, litequeue.DefaultQueue), "pausing a paused queue is no error")
	require.Equal(t, 1, h.Ev.Count(litequeue.EventPaused, 0), "only the first pause changes anything")
	require.Equal(t, litequeue.StateReady, state(t, h.Q, second), "a job claimed but not started goes back")
	st := statsOf(t, h.Q, litequeue.DefaultQueue)
	require.True(t, st.Paused)
	require.True(t, st.PausedAt.Equal(h.Clock.Now()))
	require.Equal(t, 1, st.Running)

	g.open() // the running handler finishes
	h.Ev.Wait(t, litequeue.EventSucceeded, first, 1)
	h.Clock.Add(2 * time.Minute) // "later" comes due while paused
	third, err := h.Q.Enqueue(ctx, Email{To: "third"}, nil)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateReady, state(t, h.Q, third), "no direct hand-off while paused")
	h.Q.Notify()

	require.NoError(t, h.Q.Resume(ctx, litequeue.DefaultQueue))
	for _, id := range []int64{second, later, third} {
		h.Ev.Wait(t, litequeue.EventSucceeded, id, 1)
		require.Greater(t, h.Ev.index(litequeue.EventStarted, id), h.Ev.index(litequeue.EventResumed, 0),
			"job %d started only after Resume", id)
	}
	require.False(t, statsOf(t, h.Q, litequeue.DefaultQueue).Paused)
	require.NoError(t, h.Q.Resume(ctx, litequeue.DefaultQueue), "resuming a running queue is no error")
	require.Equal(t, 1, h.Ev.Count(litequeue.EventResumed, 0))
}

// The pause is stored: a queue reopened on the database (a restart) is
// still paused, a queue with no jobs may be paused, and Enqueue does not
// hand a job of a paused queue to a worker.
func testPauseReopen(t *testing.T, b conformanceBackend) {
	addr := b.Fresh(t)
	first := open(t, b, addr, Start, nil)
	ctx := context.Background()
	require.NoError(t, first.Q.Pause(ctx, litequeue.DefaultQueue)) // no jobs, no handlers yet
	st := statsOf(t, first.Q, litequeue.DefaultQueue)
	require.True(t, st.Paused, "a paused queue without jobs is listed")
	require.Zero(t, st.Ready)
	require.NoError(t, first.Q.Close())

	h := open(t, b, addr, Start.Add(time.Minute), nil)
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error { return nil })
	h.start(t)
	id, err := h.Q.Enqueue(ctx, Email{To: "x"}, nil)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateReady, state(t, h.Q, id), "still paused after the restart")
	require.True(t, statsOf(t, h.Q, litequeue.DefaultQueue).Paused)
	require.NoError(t, h.Q.Resume(ctx, litequeue.DefaultQueue))
	h.Ev.Wait(t, litequeue.EventSucceeded, id, 1)
}

// A pause written by another queue on the database (another process) holds
// this queue's claims even before it noticed (polling is off here): the
// store checks the pause in the claim's transaction.
func testPauseOther(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error { return nil })
	h.start(t)
	ctx := context.Background()
	warm, err := h.Q.Enqueue(ctx, Email{To: "warm"}, nil)
	require.NoError(t, err)
	h.Ev.Wait(t, litequeue.EventSucceeded, warm, 1)

	other := open(t, b, h.Addr, Start, nil)
	require.NoError(t, other.Q.Pause(ctx, litequeue.DefaultQueue))
	id, err := h.Q.Enqueue(ctx, Email{To: "x"}, nil)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateReady, state(t, h.Q, id), "the enqueue's own claim took nothing")
	h.Q.Notify()
	require.NoError(t, other.Q.Resume(ctx, litequeue.DefaultQueue))
	h.Q.Notify() // polling is off: tell the idle workers
	h.Ev.Wait(t, litequeue.EventSucceeded, id, 1)

	// Paused here, resumed there: the next wake-up here re-reads the pause.
	require.NoError(t, h.Q.Pause(ctx, litequeue.DefaultQueue))
	id2, err := h.Q.Enqueue(ctx, Email{To: "y"}, nil)
	require.NoError(t, err)
	require.NoError(t, other.Q.Resume(ctx, litequeue.DefaultQueue))
	h.Q.Notify()
	h.Ev.Wait(t, litequeue.EventSucceeded, id2, 1)
}

func testPauseBadInput(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	ctx := context.Background()
	require.ErrorIs(t, h.Q.Pause(ctx, ""), litequeue.ErrInvalidJob)
	require.ErrorIs(t, h.Q.Resume(ctx, ""), litequeue.ErrInvalidJob)
	require.NoError(t, h.Q.Resume(ctx, "never-paused"))
	require.NoError(t, h.Q.Close())
	require.ErrorIs(t, h.Q.Pause(ctx, "q"), litequeue.ErrClosed)
}

// Cancelling a running job cancels its handler's context with
// ErrJobCancelled; the job ends cancelled: not retried, no dead letter.
func testCancelRunning(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.FixedRetry(3, time.Second))))
	causes := make(chan error, 1)
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	})
	h.start(t)
	ctx := context.Background()
	id, err := h.Q.Enqueue(ctx, Email{To: "x"}, &litequeue.EnqueueOptions{Key: "k"})
	require.NoError(t, err)
	h.Ev.Wait(t, litequeue.EventStarted, id, 1)
	n, err := h.Q.Cancel(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	select {
	case cause := <-causes:
		require.ErrorIs(t, cause, litequeue.ErrJobCancelled)
	case <-time.After(WaitLimit):
		t.Fatal("the handler's context was not cancelled")
	}
	ev := h.Ev.Wait(t, litequeue.EventCancelled, id, 1)
	require.ErrorIs(t, ev.Err, litequeue.ErrJobCancelled)
	require.Equal(t, 1, ev.Attempt)
	j, err := h.Q.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateCancelled, j.State)
	require.Equal(t, 1, j.Attempt)
	require.True(t, j.FinishedAt.Equal(h.Clock.Now()))
	require.Zero(t, h.Ev.Count(litequeue.EventRetrying, id))
	require.Zero(t, h.Ev.Count(litequeue.EventDead, id))
	require.Equal(t, 1, statsOf(t, h.Q, litequeue.DefaultQueue).Cancelled)
	listed, err := h.Q.Jobs(ctx, litequeue.JobFilter{States: []litequeue.State{litequeue.StateCancelled}})
	require.NoError(t, err)
	require.Len(t, listed, 1)
	// The key is free again.
	again, err := h.Q.Enqueue(ctx, Email{To: "x"}, &litequeue.EnqueueOptions{Key: "k", Delay: time.Hour})
	require.NoError(t, err)
	require.NotEqual(t, id, again)
}

// A handler that ignores its context runs on after the cancel, but its
// success is dropped: the job stays cancelled.
func testCancelIgnored(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.NoRetry())))
	g := newGate(t)
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		<-g.ch
		return nil
	})
	h.start(t)
	ctx := context.Background()
	id, err := h.Q.Enqueue(ctx, Email{To: "x"}, nil)
	require.NoError(t, err)
	h.Ev.Wait(t, litequeue.EventStarted, id, 1)
	_, err = h.Q.Cancel(ctx, id)
	require.NoError(t, err)
	g.open()
	h.Ev.Wait(t, litequeue.EventCancelled, id, 1)
	require.NoError(t, h.Q.Stop(ctx)) // every outcome written
	require.Zero(t, h.Ev.Count(litequeue.EventSucceeded, id))
	require.Equal(t, litequeue.StateCancelled, state(t, h.Q, id))
}

// Another queue on the database (another process) cancels a running job:
// with polling off its worker notices at its next lease extension.
func testCancelOtherQueue(t *testing.T, b conformanceBackend) {
	const vis = 30 * time.Second
	a := setup(t, b, queues(litequeue.QueueConfig{Name: litequeue.DefaultQueue, Retry: litequeue.FixedRetry(3, time.Second), VisibilityTimeout: vis}))
	causes := make(chan error, 1)
	litequeue.Register(a.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil // a success, too late to count
	})
	a.start(t)
	ctx := context.Background()
	id, err := a.Q.Enqueue(ctx, Email{To: "x"}, nil)
	require.NoError(t, err)
	a.Ev.Wait(t, litequeue.EventStarted, id, 1)
	other := open(t, b, a.Addr, Start, nil)
	n, err := other.Q.Cancel(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, litequeue.StateCancelled, state(t, a.Q, id), "cancelled at once in the database")
	a.Clock.Add(vis / 3) // the lease extension round
	select {
	case cause := <-causes:
		require.ErrorIs(t, cause, litequeue.ErrJobCancelled)
	case <-time.After(WaitLimit):
		t.Fatal("the handler's context was not cancelled")
	}
	a.Ev.Wait(t, litequeue.EventCancelled, id, 1)
	require.Zero(t, a.Ev.Count(litequeue.EventSucceeded, id))
	require.Zero(t, a.Ev.Count(litequeue.EventStale, id), "a cancel is reported as such, not as a lost lease")
	require.Equal(t, litequeue.StateCancelled, state(t, a.Q, id))
}

// With polling on, the worker notices another queue's cancel within the
// poll interval, without a lease extension (a bounded real-time wait).
func testCancelOtherQueuePolled(t *testing.T, b conformanceBackend) {
	a := setup(t, b, func(o *litequeue.Options) {
		o.PollInterval = 5 * time.Millisecond
		o.Queues = []litequeue.QueueConfig{queue(litequeue.NoRetry())}
	})
	causes := make(chan error, 1)
	litequeue.Register(a.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	})
	a.start(t)
	ctx := context.Background()
	id, err := a.Q.Enqueue(ctx, Email{To: "x"}, nil)
	require.NoError(t, err)
	a.Ev.Wait(t, litequeue.EventStarted, id, 1)
	other := open(t, b, a.Addr, Start, nil)
	_, err = other.Q.Cancel(ctx, id)
	require.NoError(t, err)
	select {
	case cause := <-causes:
		require.ErrorIs(t, cause, litequeue.ErrJobCancelled)
	case <-time.After(WaitLimit):
		t.Fatal("the handler's context was not cancelled")
	}
	a.Ev.Wait(t, litequeue.EventCancelled, id, 1)
}

func testCancelFinished(t *testing.T, b conformanceBackend) {
	h := setup(t, b, func(o *litequeue.Options) {
		o.CompletedRetention = time.Hour
		o.Queues = []litequeue.QueueConfig{queue(litequeue.NoRetry())}
	})
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		if d.Job.To == "fail" {
			return errors.New("boom")
		}
		return nil
	})
	h.start(t)
	ctx := context.Background()
	done, err := h.Q.Enqueue(ctx, Email{To: "ok"}, nil)
	require.NoError(t, err)
	dead, err := h.Q.Enqueue(ctx, Email{To: "fail"}, nil)
	require.NoError(t, err)
	h.Ev.Wait(t, litequeue.EventSucceeded, done, 1)
	h.Ev.Wait(t, litequeue.EventDead, dead, 1)
	pending, err := h.Q.Enqueue(ctx, Email{To: "later"}, &litequeue.EnqueueOptions{Delay: time.Hour})
	require.NoError(t, err)
	for _, id := range []int64{done, dead} {
		n, err := h.Q.Cancel(ctx, pending, id)
		require.ErrorIs(t, err, litequeue.ErrWrongState)
		require.Zero(t, n)
	}
	require.Equal(t, litequeue.StateScheduled, state(t, h.Q, pending), "all or nothing")
	n, err := h.Q.Cancel(ctx, pending)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 1, h.Ev.Count(litequeue.EventCancelled, pending))
	_, err = h.Q.Cancel(ctx, pending)
	require.ErrorIs(t, err, litequeue.ErrWrongState)
	require.ErrorContains(t, err, "cancelled already")

	_, err = h.Q.PurgeCancelled(ctx, -time.Second)
	require.Error(t, err)
	h.Clock.Add(time.Minute)
	n, err = h.Q.PurgeCancelled(ctx, time.Hour)
	require.NoError(t, err)
	require.Zero(t, n, "cancelled a minute ago: younger than an hour")
	n, err = h.Q.PurgeCancelled(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = h.Q.Job(ctx, pending)
	require.ErrorIs(t, err, litequeue.ErrNotFound)
}

// A snooze puts the job off without using an attempt: a job of a queue
// that never retries snoozes twice and then succeeds, on attempt 1 each
// time, with each snooze in its history.
func testSnooze(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.NoRetry())))
	var mu sync.Mutex
	var attempts []int
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		mu.Lock()
		attempts = append(attempts, d.Attempt)
		n := len(attempts)
		mu.Unlock()
		if n <= 2 {
			return litequeue.Snooze(time.Minute)
		}
		return nil
	})
	h.start(t)
	ctx := context.Background()
	id, err := h.Q.Enqueue(ctx, Email{To: "x"}, nil)
	require.NoError(t, err)
	for i := 1; i <= 2; i++ {
		ev := h.Ev.Wait(t, litequeue.EventSnoozed, id, i)
		require.Equal(t, time.Minute, ev.Delay)
		j, err := h.Q.Job(ctx, id)
		require.NoError(t, err)
		require.Equal(t, litequeue.StateScheduled, j.State)
		require.Equal(t, 0, j.Attempt, "the snoozed attempt was given back")
		require.True(t, j.VisibleAt.Equal(h.Clock.Now().Add(time.Minute)))
		require.Len(t, j.Attempts, i)
		require.Equal(t, litequeue.DecisionSnooze, j.Attempts[i-1].Decision)
		require.Equal(t, time.Minute, j.Attempts[i-1].Delay)
		h.Clock.Add(59 * time.Second)
		require.Equal(t, i, h.Ev.Count(litequeue.EventStarted, id), "not before its due time")
		h.Clock.Add(time.Second)
	}
	h.Ev.Wait(t, litequeue.EventSucceeded, id, 1)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int{1, 1, 1}, attempts)
}

// Past QueueConfig.MaxSnoozes a snooze is a failed attempt with a
// *SnoozeLimitError; the retry policy then applies.
func testSnoozeLimit(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(litequeue.QueueConfig{Name: litequeue.DefaultQueue, Retry: litequeue.NoRetry(), MaxSnoozes: 2}))
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		return litequeue.Snooze(0)
	})
	h.start(t)
	id, err := h.Q.Enqueue(context.Background(), Email{To: "x"}, nil)
	require.NoError(t, err)
	dead := h.Ev.Wait(t, litequeue.EventDead, id, 1)
	var limit *litequeue.SnoozeLimitError
	require.ErrorAs(t, dead.Err, &limit)
	require.Equal(t, 2, limit.Max)
	require.Equal(t, 2, h.Ev.Count(litequeue.EventSnoozed, id))
	require.Equal(t, 3, h.Ev.Count(litequeue.EventStarted, id))
	j, err := h.Q.DeadLetter(context.Background(), id)
	require.NoError(t, err)
	require.Contains(t, j.LastError, "MaxSnoozes")
	require.Len(t, j.Attempts, 3)
}

func testSnoozeNegative(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.NoRetry())))
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		return litequeue.Snooze(-time.Second)
	})
	h.start(t)
	id, err := h.Q.Enqueue(context.Background(), Email{To: "x"}, nil)
	require.NoError(t, err)
	dead := h.Ev.Wait(t, litequeue.EventDead, id, 1)
	require.ErrorIs(t, dead.Err, litequeue.ErrNegativeSnooze)
	require.Contains(t, dead.Err.Error(), "Snooze(-1s)")
	require.Zero(t, h.Ev.Count(litequeue.EventSnoozed, id))
}
