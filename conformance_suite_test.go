package litequeue_test

// The conformance suite is the behaviour every litequeue backend passes: the
// delivery contract (enqueue, claim, leases, retries through the Clock, dead
// letters, idempotency keys, order, admin operations) written once against
// the public API, in the conformance_*_test.go files. TestConformance runs
// it on SQLite files (conformance_sqlite_test.go), TestConformancePostgres
// and its variants on PostgreSQL (conformance_postgres_test.go); a behaviour
// test added here runs on every backend.

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// conformanceBackend opens queues of one kind of store.
type conformanceBackend struct {
	// Fresh returns the address of a new, empty database for one test (a
	// file path, a URL) and removes it when the test ends.
	Fresh func(t *testing.T) string
	// Open opens a queue on the database at addr with opts; the suite
	// closes it.
	Open func(t *testing.T, addr string, opts *litequeue.Options) (*litequeue.Queue, error)
	// FailJobDeletes makes the database at addr (opened by a queue
	// already) refuse every delete of a job row with an error, as a failing
	// device refuses a write, until the returned restore is called. The
	// tests that need it skip when it is nil.
	FailJobDeletes func(t *testing.T, addr string) (restore func())
	// DB opens a *sql.DB on the database at addr for the handlers' and
	// producers' own transactions (CompleteTx, EnqueueTx), closed when the
	// test ends. The tests that need it skip when it is nil.
	DB func(t *testing.T, addr string) *sql.DB
	// RefuseAttemptErrors makes the database at addr refuse, with an error
	// that does not quote it, every attempt record whose error text
	// contains marker (a value the database will not take), until the
	// returned restore is called. The tests that need it skip when it is
	// nil.
	RefuseAttemptErrors func(t *testing.T, addr, marker string) (restore func())
}

// WaitLimit bounds every wait of the suite for the queue's goroutines.
const WaitLimit = 15 * time.Second

// Run runs every test of the suite against b, each as a subtest.
func runConformance(t *testing.T, b conformanceBackend) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, b) })
	}
}

var tests = []struct {
	name string
	fn   func(t *testing.T, b conformanceBackend)
}{
	{"EnqueuedJobRunsOnceAndIsGone", testRunsOnce},
	{"RetriesAtThePolicyDelaysThenDeadLetterWithHistory", testRetrySchedule},
	{"PermanentErrorGivesUpWithAttemptsLeft", testPermanent},
	{"RetryAfterOverridesBackoffButNotAttempts", testRetryAfter},
	{"PriorityThenDueTimeOrder", testOrder},
	{"DelayedJobRunsAtItsDueTime", testDelayed},
	{"IdempotencyKeyIsHeldByLiveJobsOnly", testKeys},
	{"EnqueueBatchReportsDuplicatesAndInsertsTheRest", testBatch},
	{"ExpiredLeaseIsTakenOverAndTheStaleResultDropped", testTakeover},
	{"StopReleasesWithoutUsingAnAttempt", testStopReleases},
	{"DeadLettersRequeuePurgeAndCancel", testAdmin},
	{"StatsCountEveryState", testStats},
	{"CompletedJobsAreRetainedThenCleanedUp", testRetention},
	{"OnDeadFollowUpIsEnqueuedWithTheBurial", testOnDead},
	{"SeededRandGivesReproducibleJitter", testSeededJitter},
}

// Email is the suite's job type.
type Email struct {
	To string `json:"to"`
}

func (Email) Kind() string { return "conformance_email" }

// Audit is a second job type, for follow-ups.
type Audit struct {
	Dead int64 `json:"dead"`
}

func (Audit) Kind() string { return "conformance_audit" }

// Start is the mock clocks' start time.
var Start = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// Harness is one queue under test with its mock clock and events.
type Harness struct {
	Q     *litequeue.Queue
	Clock *clock.Mock
	Ev    *Events
	Addr  string
}

// open opens a queue on addr with a mock clock at at, a seeded Rand and an
// event recorder; mod adjusts the options. The queue is closed when the
// test ends.
func open(t *testing.T, b conformanceBackend, addr string, at time.Time, mod func(o *litequeue.Options)) *Harness {
	t.Helper()
	h := &Harness{Clock: clock.NewMock(), Ev: &Events{ch: make(chan struct{}, 1)}, Addr: addr}
	h.Clock.Set(at)
	o := &litequeue.Options{Clock: h.Clock, Rand: rand.New(rand.NewPCG(1, 2)), OnEvent: h.Ev.add, PollInterval: -1}
	if mod != nil {
		mod(o)
	}
	q, err := b.Open(t, addr, o)
	require.NoError(t, err)
	h.Q = q
	h.Ev.sync = func() { _ = q.FlushEvents(context.Background()) }
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), WaitLimit)
		defer cancel()
		_ = q.Stop(ctx)
		require.NoError(t, q.Close())
	})
	return h
}

func setup(t *testing.T, b conformanceBackend, mod func(o *litequeue.Options)) *Harness {
	return open(t, b, b.Fresh(t), Start, mod)
}

// flush waits until every event emitted so far was recorded (OnEvent runs
// on its own goroutine), before asserting that one did not happen.
func (h *Harness) flush(t *testing.T) {
	t.Helper()
	require.NoError(t, h.Q.FlushEvents(context.Background()))
}

func (h *Harness) start(t *testing.T) {
	t.Helper()
	require.NoError(t, h.Q.Start(context.Background()))
}

func queues(cfgs ...litequeue.QueueConfig) func(o *litequeue.Options) {
	return func(o *litequeue.Options) { o.Queues = cfgs }
}

func queue(retry litequeue.RetryPolicy) litequeue.QueueConfig {
	return litequeue.QueueConfig{Name: litequeue.DefaultQueue, Retry: retry}
}

// Events records a queue's events.
type Events struct {
	mu  sync.Mutex
	all []litequeue.Event
	ch  chan struct{}
	// sync waits until the queue delivered every event emitted so far
	// (OnEvent runs on its own goroutine); Count calls it.
	sync func()
}

func (e *Events) add(ev litequeue.Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
	select {
	case e.ch <- struct{}{}:
	default:
	}
}

// Count counts events of typ for job id (0: any job).
func (e *Events) Count(typ litequeue.EventType, id int64) int {
	if e.sync != nil {
		e.sync()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.all {
		if ev.Type == typ && (id == 0 || ev.JobID == id) {
			n++
		}
	}
	return n
}

// Wait blocks until n events of typ for job id (0: any) were seen and
// returns the last.
func (e *Events) Wait(t *testing.T, typ litequeue.EventType, id int64, n int) litequeue.Event {
	t.Helper()
	deadline := time.NewTimer(WaitLimit)
	defer deadline.Stop()
	for {
		e.mu.Lock()
		var last litequeue.Event
		c := 0
		for _, ev := range e.all {
			if ev.Type == typ && (id == 0 || ev.JobID == id) {
				c++
				last = ev
			}
		}
		snapshot := len(e.all)
		e.mu.Unlock()
		if c >= n {
			return last
		}
		select {
		case <-e.ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %d %q events of job %d (%d events seen)", n, typ, id, snapshot)
		}
	}
}

// waitFor polls cond (a read nothing notifies the test of, such as a read of
// the database) on the test's goroutine every millisecond until it holds,
// and fails the test naming what it waited for if cond still does not hold
// after WaitLimit.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(WaitLimit)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("timed out after %s waiting until %s", WaitLimit, what)
		}
	}
}

func testRunsOnce(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	var runs sync.Map
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		n, _ := runs.LoadOrStore(d.ID, new(int))
		*n.(*int)++
		return nil
	})
	h.start(t)
	ctx := context.Background()
	id, err := h.Q.Enqueue(ctx, Email{To: "a@example.com"}, nil)
	require.NoError(t, err)
	h.Ev.Wait(t, litequeue.EventSucceeded, id, 1)
	_, err = h.Q.Job(ctx, id)
	require.ErrorIs(t, err, litequeue.ErrNotFound, "a succeeded job is deleted by default")
	n, _ := runs.Load(id)
	require.Equal(t, 1, *n.(*int))
}

func testRetrySchedule(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.FixedRetry(3, 10*time.Second))))
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		return errors.New("smtp down")
	})
	h.start(t)
	ctx := context.Background()
	id, err := h.Q.Enqueue(ctx, Email{To: "x"}, nil)
	require.NoError(t, err)
	for attempt := 1; attempt <= 2; attempt++ {
		ev := h.Ev.Wait(t, litequeue.EventRetrying, id, attempt)
		require.Equal(t, 10*time.Second, ev.Delay)
		j, err := h.Q.Job(ctx, id)
		require.NoError(t, err)
		require.Equal(t, litequeue.StateScheduled, j.State)
		require.True(t, j.VisibleAt.Equal(h.Clock.Now().Add(10*time.Second)), "due exactly one delay later")
		h.Clock.Add(9 * time.Second)
		h.flush(t)
		require.Equal(t, attempt, h.Ev.Count(litequeue.EventStarted, id), "not before its due time")
		h.Clock.Add(time.Second)
	}
	dead := h.Ev.Wait(t, litequeue.EventDead, id, 1)
	require.Equal(t, 3, dead.Attempt)
	j, err := h.Q.DeadLetter(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 3, j.Attempt)
	require.Equal(t, "smtp down", j.LastError)
	require.Len(t, j.Attempts, 3)
	require.Equal(t, litequeue.DecisionRetry, j.Attempts[0].Decision)
	require.Equal(t, 10*time.Second, j.Attempts[0].Delay)
	require.Equal(t, litequeue.DecisionGiveUp, j.Attempts[2].Decision)
}

func testPermanent(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.FixedRetry(5, time.Second))))
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		return litequeue.Permanent(errors.New("bad address"))
	})
	h.start(t)
	id, err := h.Q.Enqueue(context.Background(), Email{To: "x"}, nil)
	require.NoError(t, err)
	ev := h.Ev.Wait(t, litequeue.EventDead, id, 1)
	require.Equal(t, litequeue.DecisionPermanent, ev.Decision)
	require.Equal(t, 1, h.Ev.Count(litequeue.EventStarted, id))
}

func testRetryAfter(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.FixedRetry(2, time.Second))))
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		return litequeue.RetryAfter(90*time.Second, errors.New("429"))
	})
	h.start(t)
	id, err := h.Q.Enqueue(context.Background(), Email{To: "x"}, nil)
	require.NoError(t, err)
	require.Equal(t, 90*time.Second, h.Ev.Wait(t, litequeue.EventRetrying, id, 1).Delay)
	h.Clock.Add(90 * time.Second)
	h.Ev.Wait(t, litequeue.EventDead, id, 1)
	require.Equal(t, 2, h.Ev.Count(litequeue.EventStarted, id))
}

func testOrder(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(litequeue.QueueConfig{Name: litequeue.DefaultQueue, Concurrency: 1, Retry: litequeue.NoRetry()}))
	ctx := context.Background()
	var want []int64
	add := func(prio int, runAt time.Time) int64 {
		id, err := h.Q.Enqueue(ctx, Email{To: "x"}, &litequeue.EnqueueOptions{Priority: prio, RunAt: runAt})
		require.NoError(t, err)
		return id
	}
	now := h.Clock.Now()
	late := add(0, now.Add(-time.Second))
	early := add(0, now.Add(-time.Minute))
	urgent := add(-5, now)
	lazy := add(10, now.Add(-time.Hour))
	want = []int64{urgent, early, late, lazy}
	var mu sync.Mutex
	var got []int64
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		mu.Lock()
		got = append(got, d.ID)
		mu.Unlock()
		return nil
	})
	h.start(t)
	h.Ev.Wait(t, litequeue.EventSucceeded, 0, len(want))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, want, got, "priority first, then due time")
}

func testDelayed(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error { return nil })
	h.start(t)
	id, err := h.Q.Enqueue(context.Background(), Email{To: "x"}, &litequeue.EnqueueOptions{Delay: time.Hour})
	require.NoError(t, err)
	h.Clock.Add(time.Hour - time.Second)
	h.flush(t)
	require.Zero(t, h.Ev.Count(litequeue.EventStarted, id))
	h.Clock.Add(time.Second)
	h.Ev.Wait(t, litequeue.EventSucceeded, id, 1)
}

func testKeys(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.NoRetry())))
	fail := true
	var mu sync.Mutex
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return errors.New("no")
		}
		return nil
	})
	ctx := context.Background()
	key := &litequeue.EnqueueOptions{Key: "order-1"}
	first, err := h.Q.Enqueue(ctx, Email{To: "x"}, key)
	require.NoError(t, err)
	again, err := h.Q.Enqueue(ctx, Email{To: "y"}, key)
	require.ErrorIs(t, err, litequeue.ErrDuplicate)
	var dup *litequeue.DuplicateError
	require.ErrorAs(t, err, &dup)
	require.Equal(t, first, again)
	require.Equal(t, first, dup.ID)
	h.start(t)
	h.Ev.Wait(t, litequeue.EventDead, first, 1)
	mu.Lock()
	fail = false
	mu.Unlock()
	// The key is free once its job died.
	second, err := h.Q.Enqueue(ctx, Email{To: "z"}, key)
	require.NoError(t, err)
	require.NotEqual(t, first, second)
	// Requeueing the dead letter while a live job holds its key names the holder.
	h.Ev.Wait(t, litequeue.EventSucceeded, second, 1)
	third, err := h.Q.Enqueue(ctx, Email{To: "w"}, &litequeue.EnqueueOptions{Key: "order-1", Delay: time.Hour})
	require.NoError(t, err)
	_, err = h.Q.Requeue(ctx, first)
	require.ErrorAs(t, err, &dup)
	require.Equal(t, third, dup.ID)
}

func testBatch(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	ctx := context.Background()
	ids, err := h.Q.EnqueueBatch(ctx, []litequeue.BatchItem{
		{Job: Email{To: "a"}, Options: &litequeue.EnqueueOptions{Key: "k"}},
		{Job: Email{To: "b"}},
		{Job: Email{To: "c"}, Options: &litequeue.EnqueueOptions{Key: "k"}},
	})
	require.ErrorIs(t, err, litequeue.ErrDuplicate)
	require.Len(t, ids, 3)
	require.Equal(t, ids[0], ids[2])
	h.flush(t)
	require.Equal(t, 2, h.Ev.Count(litequeue.EventEnqueued, 0))
	require.Equal(t, 1, h.Ev.Count(litequeue.EventDuplicate, 0))
	_, err = h.Q.EnqueueBatch(ctx, []litequeue.BatchItem{{Job: Email{To: "ok"}}, {Job: nil}})
	require.ErrorIs(t, err, litequeue.ErrInvalidJob)
	jobs, err := h.Q.Jobs(ctx, litequeue.JobFilter{})
	require.NoError(t, err)
	require.Len(t, jobs, 2, "an invalid item writes nothing of its batch")
}

func testTakeover(t *testing.T, b conformanceBackend) {
	const vis = 30 * time.Second
	cfg := queues(litequeue.QueueConfig{Name: litequeue.DefaultQueue, Retry: litequeue.FixedRetry(3, time.Second), VisibilityTimeout: vis})
	a := setup(t, b, cfg)
	release := make(chan struct{})
	litequeue.Register(a.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil // succeeds, but too late
	})
	a.start(t)
	id, err := a.Q.Enqueue(context.Background(), Email{To: "x"}, nil)
	require.NoError(t, err)
	a.Ev.Wait(t, litequeue.EventStarted, id, 1)
	// A second process whose clock is past the lease (the first process is
	// paused: its clock does not move, so it does not extend).
	bq := open(t, b, a.Addr, Start.Add(vis+time.Second), cfg)
	litequeue.Register(bq.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		require.Equal(t, 2, d.Attempt)
		require.Contains(t, d.LastError, "lease expired")
		return nil
	})
	bq.start(t)
	bq.Ev.Wait(t, litequeue.EventSucceeded, id, 1)
	close(release)
	a.Ev.Wait(t, litequeue.EventStale, id, 1)
	require.Zero(t, a.Ev.Count(litequeue.EventSucceeded, id), "the stale worker's success does not count")
}

func testStopReleases(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.FixedRetry(3, time.Second))))
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		<-ctx.Done()
		return ctx.Err()
	})
	h.start(t)
	ctx := context.Background()
	id, err := h.Q.Enqueue(ctx, Email{To: "x"}, nil)
	require.NoError(t, err)
	h.Ev.Wait(t, litequeue.EventStarted, id, 1)
	expired, cancel := context.WithCancel(ctx)
	cancel()
	require.NoError(t, h.Q.Stop(expired))
	j, err := h.Q.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateReady, j.State)
	require.Equal(t, 0, j.Attempt, "a job released by shutdown keeps its attempts")
}

func testAdmin(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.NoRetry())))
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		return errors.New("boom")
	})
	ctx := context.Background()
	pending, err := h.Q.Enqueue(ctx, Email{To: "later"}, &litequeue.EnqueueOptions{Delay: time.Hour})
	require.NoError(t, err)
	h.start(t)
	var dead []int64
	for range 3 {
		id, err := h.Q.Enqueue(ctx, Email{To: "x"}, nil)
		require.NoError(t, err)
		h.Ev.Wait(t, litequeue.EventDead, id, 1)
		dead = append(dead, id)
	}
	require.NoError(t, h.Q.Stop(ctx))
	letters, err := h.Q.DeadLetters(ctx, litequeue.JobFilter{})
	require.NoError(t, err)
	require.Len(t, letters, 3)

	// Cancel is all or nothing.
	_, err = h.Q.Cancel(ctx, pending, dead[0])
	require.ErrorIs(t, err, litequeue.ErrWrongState)
	_, err = h.Q.Cancel(ctx, 999999)
	require.ErrorIs(t, err, litequeue.ErrNotFound)
	n, err := h.Q.Cancel(ctx, pending)
	require.NoError(t, err)
	require.Equal(t, 1, n)

	// Requeue resets attempts and keeps history.
	n, err = h.Q.Requeue(ctx, dead[0])
	require.NoError(t, err)
	require.Equal(t, 1, n)
	j, err := h.Q.Job(ctx, dead[0])
	require.NoError(t, err)
	require.Equal(t, litequeue.StateReady, j.State)
	require.Equal(t, 0, j.Attempt)
	require.Len(t, j.Attempts, 1)
	_, err = h.Q.Requeue(ctx, dead[0])
	require.ErrorIs(t, err, litequeue.ErrWrongState)

	n, err = h.Q.RequeueAll(ctx, litequeue.DeadFilter{IDs: []int64{dead[1]}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	j, err = h.Q.Job(ctx, dead[1])
	require.NoError(t, err)
	require.Equal(t, 0, j.Attempt, "RequeueAll resets attempts")

	h.Clock.Add(time.Hour)
	n, err = h.Q.PurgeDead(ctx, litequeue.DeadFilter{OlderThan: 2 * time.Hour})
	require.NoError(t, err)
	require.Zero(t, n, "younger than OlderThan")
	n, err = h.Q.PurgeDead(ctx, litequeue.DeadFilter{OlderThan: 30 * time.Minute})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = h.Q.Job(ctx, dead[2])
	require.ErrorIs(t, err, litequeue.ErrNotFound)
}

func testStats(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	ctx := context.Background()
	for i := range 3 {
		_, err := h.Q.Enqueue(ctx, Email{To: "x"}, &litequeue.EnqueueOptions{Delay: time.Duration(i) * time.Minute})
		require.NoError(t, err)
	}
	_, err := h.Q.Enqueue(ctx, Email{To: "x"}, &litequeue.EnqueueOptions{Queue: "other"})
	require.NoError(t, err)
	h.Clock.Add(30 * time.Second)
	st, err := h.Q.Stats(ctx)
	require.NoError(t, err)
	require.Len(t, st, 2)
	require.Equal(t, litequeue.DefaultQueue, st[0].Queue)
	require.Equal(t, 1, st[0].Ready)
	require.Equal(t, 2, st[0].Scheduled)
	require.Equal(t, 30*time.Second, st[0].OldestReady)
	require.True(t, st[0].NextDue.Equal(Start.Add(time.Minute)))
	require.Equal(t, "other", st[1].Queue)
	jobs, err := h.Q.Jobs(ctx, litequeue.JobFilter{Order: litequeue.OrderNextDue, Queue: litequeue.DefaultQueue})
	require.NoError(t, err)
	require.Len(t, jobs, 3)
	require.True(t, !jobs[0].VisibleAt.After(jobs[1].VisibleAt) && !jobs[1].VisibleAt.After(jobs[2].VisibleAt))
}

func testRetention(t *testing.T, b conformanceBackend) {
	h := setup(t, b, func(o *litequeue.Options) { o.CompletedRetention = 10 * time.Minute })
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error { return nil })
	h.start(t)
	ctx := context.Background()
	id, err := h.Q.Enqueue(ctx, Email{To: "x"}, nil)
	require.NoError(t, err)
	h.Ev.Wait(t, litequeue.EventSucceeded, id, 1)
	j, err := h.Q.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateCompleted, j.State)
	h.Clock.Add(10*time.Minute + litequeue.DefaultCleanupInterval)
	waitFor(t, "the retained job is cleaned up", func() bool {
		_, err := h.Q.Job(ctx, id)
		return errors.Is(err, litequeue.ErrNotFound)
	})
}

func testOnDead(t *testing.T, b conformanceBackend) {
	cfg := queue(litequeue.NoRetry())
	cfg.OnDead = func(dead litequeue.JobInfo, cause error) (litequeue.Job, *litequeue.EnqueueOptions) {
		return Audit{Dead: dead.ID}, nil
	}
	h := setup(t, b, queues(cfg))
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error { return errors.New("no") })
	got := make(chan int64, 1)
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Audit]) error {
		got <- d.Job.Dead
		return nil
	})
	h.start(t)
	id, err := h.Q.Enqueue(context.Background(), Email{To: "x"}, nil)
	require.NoError(t, err)
	select {
	case dead := <-got:
		require.Equal(t, id, dead)
	case <-time.After(WaitLimit):
		t.Fatal("the follow-up job did not run")
	}
}

func testSeededJitter(t *testing.T, b conformanceBackend) {
	delays := func() []time.Duration {
		h := setup(t, b, queues(queue(litequeue.ExponentialRetry(4))))
		litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error { return errors.New("x") })
		h.start(t)
		id, err := h.Q.Enqueue(context.Background(), Email{To: "x"}, nil)
		require.NoError(t, err)
		var out []time.Duration
		for i := 1; i <= 3; i++ {
			ev := h.Ev.Wait(t, litequeue.EventRetrying, id, i)
			out = append(out, ev.Delay)
			h.Clock.Add(ev.Delay)
		}
		return out
	}
	first, second := delays(), delays()
	require.Equal(t, first, second, "the same seed gives the same jittered delays")
}
