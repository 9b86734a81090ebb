package litequeuetest_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/litequeuetest"
	"github.com/stretchr/testify/require"
)

type Webhook struct {
	URL   string `json:"url"`
	Order int    `json:"order"`
}

func (Webhook) Kind() string      { return "webhook" }
func (Webhook) QueueName() string { return "webhooks" }

type Receipt struct {
	Order  int `json:"order"`
	secret string
}

func (Receipt) Kind() string { return "receipt" }

var errDown = errors.New("503 from the receiver")

func webhookKit(t testing.TB, attempts int) *litequeuetest.Kit {
	return litequeuetest.New(t, &litequeue.Options{Queues: []litequeue.QueueConfig{
		{Name: "webhooks", Retry: litequeue.ExponentialRetry(attempts)},
	}})
}

// A job that always fails runs its whole retry schedule and dies; Drain
// reports each step and the virtual time the schedule took.
func TestDrainRunsTheRetryScheduleToTheDeadLetters(t *testing.T) {
	k := webhookKit(t, 4)
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[Webhook]) error { return errDown })
	ctx := context.Background()
	id, err := k.Queue.Enqueue(ctx, Webhook{URL: "https://example.com/hook", Order: 7}, nil)
	require.NoError(t, err)
	typo, err := k.Queue.Enqueue(ctx, Webhook{Order: 8}, &litequeue.EnqueueOptions{Queue: "webhook"})
	require.NoError(t, err)

	res, err := k.Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, res.Ran)
	require.Equal(t, 3, res.Retried)
	require.Equal(t, 1, res.Died)
	require.Zero(t, res.Succeeded)
	require.Equal(t, []int64{id}, res.Dead())
	require.Equal(t, 1, res.Unhandled, "the job on queue %q has no handler", "webhook")
	var waited time.Duration
	for _, e := range res.Events {
		if e.Type == litequeue.EventRetrying {
			waited += e.Delay
		}
	}
	require.Equal(t, waited, res.Elapsed, "the clock moved by exactly the chosen delays")
	require.Equal(t, litequeuetest.Epoch.Add(waited), k.Clock.Now())

	dead, err := k.Queue.DeadLetter(ctx, id)
	require.NoError(t, err)
	require.Len(t, dead.Attempts, 4)
	_, err = k.Queue.Job(ctx, typo)
	require.NoError(t, err)

	var types []litequeue.EventType
	for _, e := range k.History(id) {
		types = append(types, e.Type)
	}
	require.Equal(t, []litequeue.EventType{"enqueued",
		"started", "retrying", "started", "retrying", "started", "retrying", "started", "dead"}, types)
}

// The same test gives the same schedule on every run: the jitter is seeded.
func TestJitterIsTheSameOnEveryRun(t *testing.T) {
	delays := func() []time.Duration {
		k := webhookKit(t, 5)
		litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[Webhook]) error { return errDown })
		_, err := k.Queue.Enqueue(context.Background(), Webhook{}, nil)
		require.NoError(t, err)
		res, err := k.Drain(context.Background())
		require.NoError(t, err)
		var out []time.Duration
		for _, e := range res.Events {
			if e.Type == litequeue.EventRetrying {
				out = append(out, e.Delay)
			}
		}
		return out
	}
	first := delays()
	require.Len(t, first, 4)
	require.Equal(t, first, delays())
}

// Jobs that handlers enqueue, with delays, run in the same Drain.
func TestDrainRunsWhatHandlersEnqueue(t *testing.T) {
	k := webhookKit(t, 1)
	var receipts atomic.Int64
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[Webhook]) error {
		_, err := k.Queue.Enqueue(ctx, Receipt{Order: d.Job.Order}, &litequeue.EnqueueOptions{Delay: 10 * time.Second})
		return err
	})
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[Receipt]) error {
		receipts.Add(1)
		return nil
	})
	ctx := context.Background()
	for i := range 3 {
		_, err := k.Queue.Enqueue(ctx, Webhook{Order: i}, &litequeue.EnqueueOptions{Delay: time.Duration(i) * time.Second})
		require.NoError(t, err)
	}
	res, err := k.Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, 6, res.Ran)
	require.Equal(t, 6, res.Succeeded)
	require.Equal(t, int64(3), receipts.Load())
	require.Equal(t, 12*time.Second, res.Elapsed) // the last webhook at 2s, its receipt 10s later
	stats, err := k.Queue.Stats(ctx)
	require.NoError(t, err)
	for _, s := range stats {
		require.Zero(t, s.Ready+s.Scheduled+s.Running, "%+v", s)
	}
}

// Next runs what is due now, or moves the clock to the next due job and
// runs that, one step at a time.
func TestNextAdvancesToTheNextDueJob(t *testing.T) {
	k := webhookKit(t, 1)
	var ran []int
	var mu sync.Mutex
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[Webhook]) error {
		mu.Lock()
		ran = append(ran, d.Job.Order)
		mu.Unlock()
		return nil
	})
	ctx := context.Background()
	for _, s := range []int{5, 9} {
		_, err := k.Queue.Enqueue(ctx, Webhook{Order: s}, &litequeue.EnqueueOptions{Delay: time.Duration(s) * time.Second})
		require.NoError(t, err)
	}
	res, err := k.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, 5*time.Second, res.Elapsed)
	require.Equal(t, 1, res.Succeeded)
	require.Equal(t, []int{5}, ran)

	res, err = k.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, 4*time.Second, res.Elapsed)
	require.Equal(t, []int{5, 9}, ran)

	res, err = k.Next(ctx)
	require.NoError(t, err)
	require.Zero(t, res.Ran)
	require.Zero(t, res.Elapsed)
}

// Settle follows one job through its retries to its end.
func TestSettleDrivesOneJobToItsEnd(t *testing.T) {
	k := webhookKit(t, 5)
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[Webhook]) error {
		if d.Attempt < 3 {
			return litequeue.RetryAfter(time.Minute, errDown)
		}
		return nil
	})
	ctx := context.Background()
	id, err := k.Queue.Enqueue(ctx, Webhook{}, nil)
	require.NoError(t, err)
	r, err := k.Settle(ctx, id)
	require.NoError(t, err)
	require.Equal(t, litequeue.EventSucceeded, r.Outcome)
	require.Equal(t, 3, r.Attempts)
	require.Equal(t, 2*time.Minute, r.Elapsed)
	require.Zero(t, r.Job.ID, "a success deletes the job")

	// A job no handler here serves cannot settle: the error says why.
	lost, err := k.Queue.Enqueue(ctx, Webhook{}, &litequeue.EnqueueOptions{Queue: "webhook"})
	require.NoError(t, err)
	_, err = k.Settle(ctx, lost)
	require.ErrorContains(t, err, `queue "webhook"`)
}

// WaitFor waits for an event of a running queue, also one that came before.
func TestWaitForSeesEventsOfARunningQueue(t *testing.T) {
	k := webhookKit(t, 2)
	started := make(chan struct{})
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[Webhook]) error {
		close(started)
		return nil
	})
	k.Start()
	id, err := k.Queue.Enqueue(context.Background(), Webhook{}, nil)
	require.NoError(t, err)
	<-started
	e := k.WaitFor(litequeue.EventSucceeded, id)
	require.Equal(t, id, e.JobID)
	require.Equal(t, litequeuetest.Epoch, e.Time)
	again := k.WaitFor(litequeue.EventSucceeded, 0)
	require.Equal(t, e, again)
}

// A handler that waits for its job timeout stalls the queue until the
// clock moves: Drain says so instead of hanging, and moving the clock ends
// it.
func TestDrainReportsAStuckHandler(t *testing.T) {
	k := litequeuetest.New(t, &litequeue.Options{Queues: []litequeue.QueueConfig{
		{Name: "webhooks", Retry: litequeue.NoRetry(), Timeout: 30 * time.Second},
	}})
	k.Timeout = 300 * time.Millisecond
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[Webhook]) error {
		<-ctx.Done()
		return ctx.Err()
	})
	ctx := context.Background()
	id, err := k.Queue.Enqueue(ctx, Webhook{}, nil)
	require.NoError(t, err)
	_, err = k.Drain(ctx)
	require.ErrorIs(t, err, litequeuetest.ErrStuck)
	k.Timeout = litequeuetest.DefaultTimeout // the short bound was for Drain only
	k.Clock.Add(30 * time.Second)
	e := k.WaitFor(litequeue.EventDead, id)
	require.ErrorContains(t, e.Err, "job timeout 30s passed")
}

// Drain stops at Kit.MaxAttempts: a job that enqueues itself forever does
// not hang the test.
func TestDrainIsBounded(t *testing.T) {
	k := webhookKit(t, 1)
	k.MaxAttempts = 25
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[Webhook]) error {
		_, err := k.Queue.Enqueue(ctx, Webhook{Order: d.Job.Order + 1}, &litequeue.EnqueueOptions{Delay: time.Second})
		return err
	})
	_, err := k.Queue.Enqueue(context.Background(), Webhook{}, nil)
	require.NoError(t, err)
	res, err := k.Drain(context.Background())
	require.ErrorIs(t, err, litequeuetest.ErrLimit)
	require.GreaterOrEqual(t, res.Ran, 25)
}

// Work runs one call with a real Delivery: the job goes through JSON as a
// stored one does, the attempt and the queue's policy are as set, and a
// panic comes back as the worker records it.
func TestWorkRunsOneCall(t *testing.T) {
	var got *litequeue.Delivery[Receipt]
	handler := func(ctx context.Context, d *litequeue.Delivery[Receipt]) error {
		got = d
		if d.Job.Order < 0 {
			panic("negative order")
		}
		if d.Attempt < d.MaxAttempts {
			return errDown
		}
		return nil
	}
	err := litequeuetest.Work(t, handler, Receipt{Order: 3, secret: "lost in JSON"})
	require.NoError(t, err, "attempt 1 of 1 succeeds")
	require.Equal(t, Receipt{Order: 3}, got.Job)
	require.Equal(t, "receipt", got.Kind)
	require.Equal(t, litequeue.DefaultQueue, got.Queue)
	require.Equal(t, 1, got.Attempt)
	require.Equal(t, 1, got.MaxAttempts)

	k := litequeuetest.New(t, &litequeue.Options{Queues: []litequeue.QueueConfig{
		{Name: litequeue.DefaultQueue, Retry: litequeue.ExponentialRetry(3)}}})
	err = litequeuetest.Work(t, handler, Receipt{Order: 3}, litequeuetest.Config(k.Queue), litequeuetest.Attempt(2), litequeuetest.LastError("boom"))
	require.ErrorIs(t, err, errDown)
	require.Equal(t, 3, got.MaxAttempts)
	require.Equal(t, "boom", got.LastError)
	require.NoError(t, litequeuetest.Work(t, handler, Receipt{Order: 3}, litequeuetest.Config(k.Queue), litequeuetest.Attempt(3)))

	var pe *litequeue.PanicError
	require.ErrorAs(t, litequeuetest.Work(t, handler, Receipt{Order: -1}), &pe)
	require.Equal(t, "negative order", pe.Value)
}

// fakeT records the failures of the helpers under test instead of failing
// this test.
type fakeT struct {
	testing.TB
	mu     sync.Mutex
	failed []string
}

type fatal struct{}

func (f *fakeT) Helper() {}
func (f *fakeT) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = append(f.failed, fmt.Sprintf(format, args...))
}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	panic(fatal{})
}

// fails runs fn with f and returns what it failed with ("" if it passed).
func (f *fakeT) fails(fn func()) (msg string) {
	f.mu.Lock()
	f.failed = nil
	f.mu.Unlock()
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(fatal); !ok {
				panic(v)
			}
		}
		f.mu.Lock()
		msg = strings.Join(f.failed, "\n")
		f.mu.Unlock()
	}()
	fn()
	return ""
}

func TestRequireEnqueued(t *testing.T) {
	k := webhookKit(t, 1)
	ctx := context.Background()
	due := litequeuetest.Epoch.Add(time.Hour)
	_, err := k.Queue.Enqueue(ctx, Webhook{Order: 1}, &litequeue.EnqueueOptions{Delay: time.Hour, Priority: -1, Key: "order-1"})
	require.NoError(t, err)

	found := litequeuetest.RequireEnqueued[Webhook](t, k.Queue, litequeuetest.InQueue("webhooks"),
		litequeuetest.WithPriority(-1), litequeuetest.DueAt(due), litequeuetest.WithKey("order-1"))
	require.Equal(t, Webhook{Order: 1}, found.Job)
	require.Equal(t, litequeue.StateScheduled, found.Info.State)
	litequeuetest.RequireNotEnqueued[Receipt](t, k.Queue)
	litequeuetest.RequireNotEnqueued[Webhook](t, k.Queue, litequeuetest.WithKey("order-2"))

	ft := &fakeT{TB: t}
	msg := ft.fails(func() { litequeuetest.RequireEnqueued[Webhook](ft, k.Queue, litequeuetest.DueAt(litequeuetest.Epoch)) })
	require.Contains(t, msg, `no job of kind "webhook" with due 2026-03-02T09:00:00Z`)
	require.Contains(t, msg, "due 2026-03-02T10:00:00Z", "says what the job's due time is")
	msg = ft.fails(func() { litequeuetest.RequireEnqueued[Receipt](ft, k.Queue) })
	require.Contains(t, msg, `no job of kind "receipt"`)
	msg = ft.fails(func() { litequeuetest.RequireNotEnqueued[Webhook](ft, k.Queue, litequeuetest.InQueue("webhooks")) })
	require.Contains(t, msg, `1 jobs of kind "webhook"`)
}

// A handler that leaves a goroutine behind fails the test that ran it.
func TestKitFailsATestThatLeaksAGoroutine(t *testing.T) {
	stop := make(chan struct{})
	msg := (&fakeT{TB: t}).failsWithKit(nil, func(k *litequeuetest.Kit) {
		litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[Receipt]) error {
			go func() { <-stop }()
			return nil
		})
		_, err := k.Queue.Enqueue(context.Background(), Receipt{}, nil)
		require.NoError(t, err)
		_, err = k.Drain(context.Background())
		require.NoError(t, err)
	})
	close(stop)
	require.Contains(t, msg, "goroutines still running after the queue closed")
}

type cleanupT struct {
	*fakeT
	cleanups *[]func()
}

func (c *cleanupT) Cleanup(f func()) { *c.cleanups = append(*c.cleanups, f) }

// failsWithKit runs fn on a kit made for f with opts, then ends the kit as
// the end of a test would (its cleanups, last first, also after a fatal
// failure), and returns what fn and the kit failed with ("" if nothing).
func (f *fakeT) failsWithKit(opts *litequeue.Options, fn func(k *litequeuetest.Kit)) string {
	return f.fails(func() {
		var cleanups []func()
		defer func() {
			for i := len(cleanups) - 1; i >= 0; i-- {
				cleanups[i]()
			}
		}()
		fn(litequeuetest.New(&cleanupT{fakeT: f, cleanups: &cleanups}, opts))
	})
}

// Through stores the job as claimed, so CompleteTx commits with the
// handler's own write, and records a failure as the worker does.
func TestWorkThroughAQueueOnTheApplicationDatabase(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "app.db")+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE receipts (order_id INTEGER PRIMARY KEY)`)
	require.NoError(t, err)
	q, err := litequeue.New(db, &litequeue.Options{Queues: []litequeue.QueueConfig{
		{Name: litequeue.DefaultQueue, Retry: litequeue.FixedRetry(2, time.Minute)}}})
	require.NoError(t, err)
	defer q.Close()
	handler := func(ctx context.Context, d *litequeue.Delivery[Receipt]) error {
		if d.Job.Order < 0 {
			return errDown
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `INSERT INTO receipts (order_id) VALUES (?)`, d.Job.Order); err != nil {
			return err
		}
		if err := d.CompleteTx(ctx, tx); err != nil {
			return err
		}
		return tx.Commit()
	}
	ctx := context.Background()

	// Without Through there is no lease to complete.
	require.ErrorIs(t, litequeuetest.Work(t, handler, Receipt{Order: 1}), litequeue.ErrLeaseLost)
	var n int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM receipts`).Scan(&n))
	require.Zero(t, n)

	require.NoError(t, litequeuetest.Work(t, handler, Receipt{Order: 1}, litequeuetest.Through(q)))
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM receipts`).Scan(&n))
	require.Equal(t, 1, n)
	all, err := q.Jobs(ctx, litequeue.JobFilter{})
	require.NoError(t, err)
	require.Empty(t, all, "the completed job was deleted with the receipt's commit")

	// A failure on the last attempt makes the dead letter, history and all.
	require.ErrorIs(t, litequeuetest.Work(t, handler, Receipt{Order: -1}, litequeuetest.Through(q), litequeuetest.Attempt(2)), errDown)
	dead, err := q.DeadLetters(ctx, litequeue.JobFilter{})
	require.NoError(t, err)
	require.Len(t, dead, 1)
	j, err := q.DeadLetter(ctx, dead[0].ID)
	require.NoError(t, err)
	require.Equal(t, "attempts used up (2 of 2)", j.DeadReason)
	require.Len(t, j.Attempts, 1)
	require.Equal(t, 2, j.Attempts[0].Attempt)
}

// Kits of parallel tests do not take each other's goroutines for leaks.
func TestParallelKits(t *testing.T) {
	for i := range 3 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			k := webhookKit(t, 3)
			litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[Webhook]) error {
				if d.Attempt < 3 {
					return errDown
				}
				return nil
			})
			id, err := k.Queue.Enqueue(context.Background(), Webhook{Order: i}, nil)
			require.NoError(t, err)
			r, err := k.Settle(context.Background(), id)
			require.NoError(t, err)
			require.Equal(t, litequeue.EventSucceeded, r.Outcome)
		})
	}
}
