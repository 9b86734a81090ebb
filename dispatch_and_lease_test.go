package litequeue

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue/internal/sqlite"
	"github.com/litequeue/litequeue/internal/store"
)

// The tests of this file each reproduce a delivery bug found by porting the
// peers' test suites; each failed before its fix.

// openSecond opens another queue (another "process") on h's file with its own
// mock clock set to at.
func openSecond(t *testing.T, h *harness, at time.Time, mod func(o *Options)) (*Queue, *clock.Mock, *events) {
	t.Helper()
	clk := clock.NewMock()
	clk.Set(at)
	ev := newEvents()
	o := Options{Clock: clk, Rand: rand.New(rand.NewPCG(3, 4)), OnEvent: ev.add, PollInterval: -1}
	if mod != nil {
		mod(&o)
	}
	q, err := Open(h.path, &o)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, q.Close()) })
	return q, clk, ev
}

func TestGracefulStopKeepsExtendingTheLeaseOfRunningHandlers(t *testing.T) {
	const vis = 30 * time.Second
	cfg := []QueueConfig{{Name: DefaultQueue, Retry: NoRetry(), VisibilityTimeout: vis}}
	h := setup(t, func(o *Options) { o.Queues = cfg })
	gate := make(chan struct{})
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		<-gate
		return nil
	})
	h.start(t)
	ctx := context.Background()
	t0 := h.clock.Now()
	id, err := h.q.Enqueue(ctx, SendEmail{To: "long"}, nil)
	require.NoError(t, err)
	h.ev.wait(t, EventStarted, id, 1)

	stopped := make(chan error, 1)
	go func() { stopped <- h.q.Stop(context.Background()) }()
	leaseEnd := func() time.Time {
		j, err := h.q.Job(ctx, id)
		require.NoError(t, err)
		return j.VisibleAt
	}
	// Stop waits for the handler; meanwhile the lease goes on being
	// extended every third of the visibility timeout.
	for i := 1; i <= 3; i++ {
		// The claim armed the extension alarm before the handler started,
		// and each round re-arms it before it writes: one step of the
		// clock per round, then the round's write shows in the row.
		h.clock.Add(vis / 3)
		want := h.clock.Now().Add(vis)
		waitFor(t, "the lease is extended to "+want.String(), func() bool { return leaseEnd().Equal(want) })
	}
	require.True(t, leaseEnd().After(t0.Add(vis)), "the lease was extended during Stop")

	// Another process whose clock is past the first lease but within the
	// extended one finds nothing to take.
	b, _, bEv := openSecond(t, h, t0.Add(vis+time.Second), func(o *Options) { o.Queues = cfg })
	Register(b, func(ctx context.Context, d *Delivery[SendEmail]) error { return nil })
	require.NoError(t, b.Start(ctx))
	marker, err := b.Enqueue(ctx, SendEmail{To: "marker"}, &EnqueueOptions{Priority: 10})
	require.NoError(t, err)
	bEv.wait(t, EventSucceeded, marker, 1)
	require.NoError(t, b.Stop(ctx))
	require.Zero(t, bEv.count(EventStarted, id), "another process ran the job while its handler still ran")

	close(gate)
	require.NoError(t, <-stopped)
	require.Equal(t, 1, h.ev.count(EventSucceeded, id), "the only run succeeded")
	_, err = h.q.Job(ctx, id)
	require.ErrorIs(t, err, ErrNotFound, "the success was written, not dropped as stale")
}

func TestPollNoticesWritesMadeRightAfterStart(t *testing.T) {
	h := setup(t, func(o *Options) { o.PollInterval = 100 * time.Millisecond })
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error { return nil })
	h.start(t)
	ctx := context.Background()
	// The queue has claimed (its own job ran) and has not polled yet.
	own, err := h.q.Enqueue(ctx, SendEmail{To: "own"}, nil)
	require.NoError(t, err)
	h.ev.wait(t, EventSucceeded, own, 1)
	b, _, _ := openSecond(t, h, h.clock.Now(), nil)
	id, err := b.Enqueue(ctx, SendEmail{To: "from another process"}, nil)
	require.NoError(t, err)
	h.ev.wait(t, EventSucceeded, id, 1)
}

// runOrder starts h's queue with one worker and returns the ids in the order
// their handlers ran, once n jobs have run.
func runOrder(t *testing.T, h *harness, n int) []int64 {
	t.Helper()
	var mu sync.Mutex
	var order []int64
	done := make(chan struct{})
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, d.ID)
		if len(order) == n {
			close(done)
		}
		return nil
	})
	h.start(t)
	select {
	case <-done:
	case <-time.After(waitLimit):
		t.Fatalf("timed out: ran %v of %d jobs", order, n)
	}
	mu.Lock()
	defer mu.Unlock()
	return append([]int64(nil), order...)
}

func oneWorker(o *Options) {
	o.Queues = []QueueConfig{{Name: DefaultQueue, Concurrency: 1, Retry: FixedRetry(3, 10*time.Second)}}
}

func TestHandOffNeverOvertakesADueJob(t *testing.T) {
	t.Run("sequential enqueues run in order", func(t *testing.T) {
		h := setup(t, oneWorker)
		const n = 300
		var mu sync.Mutex
		var order []int64
		all := make(chan struct{})
		Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
			mu.Lock()
			order = append(order, d.ID)
			if len(order) == n {
				close(all)
			}
			mu.Unlock()
			return nil
		})
		h.start(t)
		var ids []int64
		for range n {
			id, err := h.q.Enqueue(context.Background(), SendEmail{To: "x"}, nil)
			require.NoError(t, err)
			ids = append(ids, id)
		}
		select {
		case <-all:
		case <-time.After(waitLimit):
			t.Fatal("timed out")
		}
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, ids, order, "jobs of one priority due at the same time run in id order")
	})
	t.Run("another process's more urgent and older jobs run first", func(t *testing.T) {
		h := setup(t, oneWorker)
		ctx := context.Background()
		warm, order := startIdleRecordingOrder(t, h)
		// The queue is idle and does not poll: it does not know of these.
		b, _, _ := openSecond(t, h, h.clock.Now(), nil)
		urgent, err := b.Enqueue(ctx, SendEmail{To: "urgent"}, &EnqueueOptions{Priority: -5})
		require.NoError(t, err)
		older, err := b.Enqueue(ctx, SendEmail{To: "older"}, &EnqueueOptions{Priority: 10})
		require.NoError(t, err)
		mine, err := h.q.Enqueue(ctx, SendEmail{To: "mine"}, &EnqueueOptions{Priority: 10})
		require.NoError(t, err)
		h.ev.wait(t, EventSucceeded, mine, 1)
		h.ev.wait(t, EventSucceeded, older, 1)
		require.Equal(t, []int64{warm, urgent, older, mine}, order())
	})
	t.Run("a more urgent job alone in the file runs first", func(t *testing.T) {
		// Nothing of the new job's own priority is due: only the more
		// urgent one, which the hand-off must see across priorities.
		h := setup(t, oneWorker)
		ctx := context.Background()
		warm, order := startIdleRecordingOrder(t, h)
		b, _, _ := openSecond(t, h, h.clock.Now(), nil)
		later, err := b.Enqueue(ctx, SendEmail{To: "urgent but later"}, &EnqueueOptions{Priority: -9, Delay: time.Hour})
		require.NoError(t, err)
		urgent, err := b.Enqueue(ctx, SendEmail{To: "urgent"}, &EnqueueOptions{Priority: -5})
		require.NoError(t, err)
		mine, err := h.q.Enqueue(ctx, SendEmail{To: "mine"}, nil)
		require.NoError(t, err)
		h.ev.wait(t, EventSucceeded, mine, 1)
		h.ev.wait(t, EventSucceeded, urgent, 1)
		require.Equal(t, []int64{warm, urgent, mine}, order(), "the due priority -5 job runs before the new priority 0 one; the one due in an hour (%d) waits", later)
	})
}

// startIdleRecordingOrder registers a SendEmail handler on h's queue that
// records the ids it runs, starts the queue and runs one warm-up job, so
// the queue is idle, with a worker waiting, when it returns. order returns
// the ids run so far.
func startIdleRecordingOrder(t *testing.T, h *harness) (warm int64, order func() []int64) {
	t.Helper()
	var mu sync.Mutex
	var ran []int64
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		mu.Lock()
		ran = append(ran, d.ID)
		mu.Unlock()
		return nil
	})
	h.start(t)
	warm, err := h.q.Enqueue(context.Background(), SendEmail{To: "warm-up"}, nil)
	require.NoError(t, err)
	h.ev.wait(t, EventSucceeded, warm, 1)
	return warm, func() []int64 {
		mu.Lock()
		defer mu.Unlock()
		return append([]int64(nil), ran...)
	}
}

func TestRetriedAndRequeuedJobsRunInCurrentDueTimeOrder(t *testing.T) {
	t.Run("retry", func(t *testing.T) {
		h := setup(t, oneWorker)
		ctx := context.Background()
		t0 := h.clock.Now()
		Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
			if d.Attempt == 1 && d.Job.To == "retried" {
				return errors.New("fails once")
			}
			return nil
		})
		h.start(t)
		retried, err := h.q.Enqueue(ctx, SendEmail{To: "retried"}, nil) // first due at t0
		require.NoError(t, err)
		h.ev.wait(t, EventRetrying, retried, 1) // due again at t0+10s
		require.NoError(t, h.q.Stop(ctx))
		h.reopen(t)
		later, err := h.q.Enqueue(ctx, SendEmail{To: "later"}, &EnqueueOptions{RunAt: t0.Add(9 * time.Second)})
		require.NoError(t, err)
		h.clock.Add(10 * time.Second)
		require.Equal(t, []int64{later, retried}, runOrder(t, h, 2), "due at t0+9s runs before due at t0+10s")
	})
	t.Run("requeue", func(t *testing.T) {
		h := setup(t, oneWorker)
		ctx := context.Background()
		dead, err := h.q.Enqueue(ctx, SendEmail{To: "dead"}, nil)
		require.NoError(t, err)
		// Make it a dead letter the way a worker would.
		d := claimUpTo(t, testPool(h.q, h.q.config(DefaultQueue), 10, "send_email"), 1)[0]
		p := d.p
		p.fail(d, NoRetry(), errors.New("boom"), 0)
		h.clock.Add(time.Second)
		waiting, err := h.q.Enqueue(ctx, SendEmail{To: "waiting"}, nil) // due before the requeue
		require.NoError(t, err)
		h.clock.Add(time.Second)
		n, err := h.q.Requeue(ctx, dead)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		listed, err := h.q.Jobs(ctx, JobFilter{Order: OrderNextDue})
		require.NoError(t, err)
		require.Equal(t, waiting, listed[0].ID, "the next-due listing")
		require.Equal(t, []int64{waiting, dead}, runOrder(t, h, 2), "the run order agrees with the listing")
	})
}

func TestEnqueueBatchReportsADuplicateItemAsDuplicate(t *testing.T) {
	h := setup(t, nil)
	ids, err := h.q.EnqueueBatch(context.Background(), []BatchItem{
		{Job: SendEmail{To: "a"}, Options: &EnqueueOptions{Key: "k"}},
		{Job: SendEmail{To: "b"}, Options: &EnqueueOptions{Key: "k"}},
	})
	require.ErrorIs(t, err, ErrDuplicate)
	require.Equal(t, []int64{ids[0], ids[0]}, ids)
	require.NoError(t, h.q.FlushEvents(context.Background()))
	require.Equal(t, 1, h.ev.count(EventEnqueued, 0))
	require.Equal(t, 1, h.ev.count(EventDuplicate, ids[0]))
}

func TestHugeRetryDelaySaturatesInsteadOfWrapping(t *testing.T) {
	for _, tc := range []struct {
		name     string
		strategy Strategy
		err      error
	}{
		{"RetryAfter", nil, RetryAfter(math.MaxInt64, errors.New("later"))},
		{"Strategy", func(f Failure) RetryDecision { return RetryDecision{Retry: true, Delay: math.MaxInt64} }, errors.New("x")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := setup(t, func(o *Options) {
				o.Queues = []QueueConfig{{Name: DefaultQueue, Retry: FixedRetry(3, time.Minute), Strategy: tc.strategy}}
			})
			Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error { return tc.err })
			h.start(t)
			id, err := h.q.Enqueue(context.Background(), SendEmail{To: "x"}, nil)
			require.NoError(t, err)
			h.ev.wait(t, EventRetrying, id, 1)
			j, err := h.q.Job(context.Background(), id)
			require.NoError(t, err)
			require.Equal(t, StateScheduled, j.State)
			require.Equal(t, maxStoredTime.UnixNano(), j.VisibleAt.UnixNano(), "saturated at the latest storable time")
			h.clock.Add(24 * time.Hour)
			require.Equal(t, 1, h.ev.count(EventStarted, id), "the retry did not run at once")
		})
	}
}

func TestNegativeQueueDurationsAndConcurrencyAreRejected(t *testing.T) {
	for _, qc := range []QueueConfig{
		{Name: "q", Concurrency: -1},
		{Name: "q", Timeout: -time.Second},
		{Name: "q", VisibilityTimeout: -time.Second},
	} {
		_, err := Open(filepath.Join(t.TempDir(), "q.db"), &Options{Queues: []QueueConfig{qc}})
		require.Error(t, err, "%+v", qc)
		require.ErrorContains(t, err, `Options.Queues["q"]`)
	}
}

func TestSucceededEventArrivesBeforeStopReturns(t *testing.T) {
	for range 20 {
		h := setup(t, nil)
		Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error { return nil })
		h.start(t)
		id, err := h.q.Enqueue(context.Background(), SendEmail{To: "x"}, nil)
		require.NoError(t, err)
		h.ev.wait(t, EventStarted, id, 1)
		require.NoError(t, h.q.Stop(context.Background()))
		require.Equal(t, 1, h.ev.count(EventSucceeded, id))
	}
}

func TestSecondStopWithEndedContextEscalates(t *testing.T) {
	h := setup(t, nil)
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		<-ctx.Done()
		return ctx.Err()
	})
	h.start(t)
	id, err := h.q.Enqueue(context.Background(), SendEmail{To: "x"}, nil)
	require.NoError(t, err)
	h.ev.wait(t, EventStarted, id, 1)
	h.q.mu.Lock()
	run := h.q.run
	h.q.mu.Unlock()
	first := make(chan error, 1)
	go func() { first <- h.q.Stop(context.Background()) }()
	select { // the first Stop has begun and waits for the handler
	case <-run.stopping:
	case <-time.After(waitLimit):
		t.Fatal("Stop did not begin")
	}
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	second := make(chan error, 1)
	go func() { second <- h.q.Stop(expired) }()
	for _, c := range []chan error{second, first} {
		select {
		case err := <-c:
			require.NoError(t, err)
		case <-time.After(waitLimit):
			t.Fatal("Stop with an ended context did not release the running handler")
		}
	}
	h.ev.wait(t, EventReleased, id, 1)
}

// claimedByDetachedPool enqueues one job (three attempts) and claims it with
// a pool that runs no goroutines of its own, so the test drives its claims,
// extensions and executions by hand.
func claimedByDetachedPool(t *testing.T) (*harness, *pool, int64, *delivery) {
	t.Helper()
	h := setup(t, func(o *Options) {
		o.Queues = []QueueConfig{{Name: DefaultQueue, Retry: FixedRetry(3, time.Second)}}
	})
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error { return nil })
	id, err := h.q.Enqueue(context.Background(), SendEmail{To: "x"}, nil)
	require.NoError(t, err)
	p := detachedPool(h.q, DefaultQueue)
	return h, p, id, claimUpTo(t, p, 1)[0]
}

func TestReclaimInTheSameProcessKeepsTheNewRunsLease(t *testing.T) {
	h, p, id, old := claimedByDetachedPool(t)
	ctx := context.Background()
	// The process was paused past its lease and claimed the job again. (A
	// claim extends the process's own lapsed leases first, so this happens
	// only when that extension could not be written: the test claims
	// through the store as the claim then does.)
	h.clock.Add(p.cfg.VisibilityTimeout)
	cq := p.claimQuery(1)
	n, err := h.q.store.Claim(ctx, cq, func(cs []store.Claimed) { p.push(p.delivery(cs[0], cq)) })
	require.NoError(t, err)
	require.Equal(t, 1, n)
	fresh := p.pop(nil)
	require.Equal(t, old.id, fresh.id)
	flush := func() {
		require.NoError(t, h.q.lite.Do(ctx, func(context.Context, sqlite.Execer) error { return nil }))
		require.NoError(t, h.q.FlushEvents(ctx))
	}
	p.execute(old) // the old run finishes: stale
	flush()
	require.Equal(t, 1, h.ev.count(EventStale, id))
	p.mu.Lock()
	_, tracked := p.inflight[fresh]
	p.mu.Unlock()
	require.True(t, tracked, "the old run's cleanup removed the new run")
	h.clock.Add(p.cfg.VisibilityTimeout / 2)
	p.extend()
	j, err := h.q.Job(ctx, id)
	require.NoError(t, err)
	require.True(t, h.clock.Now().Add(p.cfg.VisibilityTimeout).Equal(j.VisibleAt), "the new run's lease is extended")
	p.execute(fresh)
	flush()
	require.Equal(t, 1, h.ev.count(EventSucceeded, id))
}

// A claim does not take the process's own running job as lost when the
// clock has passed its lease before the extension ran (a mock clock's jump,
// a stalled process): it extends the lease first, so the job is not started
// a second time beside its running handler, and no attempt is used.
func TestClaimExtendsItsOwnLapsedLeaseInsteadOfTakingTheJob(t *testing.T) {
	h, p, id, running := claimedByDetachedPool(t)
	ctx := context.Background()
	h.clock.Add(p.cfg.VisibilityTimeout + time.Second) // past the lease, no extension ran
	require.Empty(t, claimUpTo(t, p, 1), "the claim took the job this process still runs")
	lapsed, _ := p.ownLeaseLapsed(h.clock.Now().UnixNano())
	require.False(t, lapsed, "the extended lease's end is remembered: the next claim does not extend again")
	j, err := h.q.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 1, j.Attempt, "no attempt used")
	require.True(t, h.clock.Now().Add(p.cfg.VisibilityTimeout).Equal(j.VisibleAt), "the lease was extended from now")
	p.execute(running)
	require.NoError(t, h.q.lite.Do(ctx, func(context.Context, sqlite.Execer) error { return nil }))
	require.NoError(t, h.q.FlushEvents(ctx))
	require.Equal(t, 1, h.ev.count(EventSucceeded, id), "the running attempt's success still holds its lease")
	require.Zero(t, h.ev.count(EventStale, id))
}

func TestMockClockTimeoutHasNoDataRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	defer db.Close()
	mock := clock.NewMock()
	ev := newEvents()
	q, err := New(db, &Options{Clock: mock, OnEvent: ev.add,
		Queues: []QueueConfig{{Name: DefaultQueue, Retry: NoRetry(), Timeout: 10 * time.Second}}})
	require.NoError(t, err)
	defer q.Close()
	Register(q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		for {
			// database/sql reads ctx.Err() on its own goroutines.
			if _, err := db.ExecContext(ctx, "SELECT 1"); err != nil {
				return err
			}
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
		}
	})
	require.NoError(t, q.Start(context.Background()))
	id, err := q.Enqueue(context.Background(), SendEmail{To: "x"}, nil)
	require.NoError(t, err)
	ev.wait(t, EventStarted, id, 1)
	mock.Add(10 * time.Second)
	dead := ev.wait(t, EventDead, id, 1)
	var te *TimeoutError
	require.ErrorAs(t, dead.Err, &te)
	require.ErrorIs(t, dead.Err, context.DeadlineExceeded)
}
