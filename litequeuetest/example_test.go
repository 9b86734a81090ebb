package litequeuetest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/litequeuetest"
)

// ChargeCard is the job of these examples, and of the fault tests
// (faults_test.go): charging an order must happen once, however often the
// job is delivered.
type ChargeCard struct {
	Order int `json:"order"`
}

func (ChargeCard) Kind() string      { return "charge_card" }
func (ChargeCard) QueueName() string { return "payments" }

// A test that proves "after 5 failed attempts the charge is a dead letter"
// through the real exponential schedule, in milliseconds.
func Example() {
	t, done := exampleT() // in a test: the test's t
	defer done()

	k := litequeuetest.New(t, &litequeue.Options{Queues: []litequeue.QueueConfig{
		{Name: "payments", Retry: litequeue.ExponentialRetry(5)},
	}})
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[ChargeCard]) error {
		return errors.New("card processor unavailable")
	})
	ctx := context.Background()
	id, _ := k.Queue.Enqueue(ctx, ChargeCard{Order: 42}, nil)

	res, err := k.Drain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dead, _ := k.Queue.DeadLetter(ctx, id)
	fmt.Printf("ran %d, retried %d, died %d, in %s of virtual time\n", res.Ran, res.Retried, res.Died, res.Elapsed.Round(time.Millisecond))
	fmt.Println(dead.DeadReason)
	// Output:
	// ran 5, retried 4, died 1, in 11.513s of virtual time
	// attempts used up (5 of 5)
}

// Next moves the clock to the next due job and runs what is due then.
func ExampleKit_Next() {
	t, done := exampleT()
	defer done()

	k := litequeuetest.New(t, nil)
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[ChargeCard]) error {
		fmt.Println("charging order", d.Job.Order)
		return nil
	})
	ctx := context.Background()
	k.Queue.Enqueue(ctx, ChargeCard{Order: 1}, &litequeue.EnqueueOptions{Delay: time.Hour})
	k.Queue.Enqueue(ctx, ChargeCard{Order: 2}, &litequeue.EnqueueOptions{Delay: 3 * time.Hour})

	res, _ := k.Next(ctx)
	fmt.Println("after", res.Elapsed)
	res, _ = k.Next(ctx)
	fmt.Println("after", res.Elapsed, "more")
	// Output:
	// charging order 1
	// after 1h0m0s
	// charging order 2
	// after 2h0m0s more
}

// Settle follows one job to its end and tells how it ended.
func ExampleKit_Settle() {
	t, done := exampleT()
	defer done()

	k := litequeuetest.New(t, &litequeue.Options{Queues: []litequeue.QueueConfig{
		{Name: "payments", Retry: litequeue.FixedRetry(5, 30*time.Second)},
	}})
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[ChargeCard]) error {
		if d.Attempt < 3 {
			return errors.New("timeout talking to the processor")
		}
		return nil
	})
	ctx := context.Background()
	id, _ := k.Queue.Enqueue(ctx, ChargeCard{Order: 7}, nil)

	r, err := k.Settle(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(r.Outcome, "on attempt", r.Attempts, "after", r.Elapsed)
	// Output:
	// succeeded on attempt 3 after 1m0s
}

// WaitFor waits for an event of a queue that runs as in production; the
// clock moves only when the test moves it.
func ExampleKit_WaitFor() {
	t, done := exampleT()
	defer done()

	k := litequeuetest.New(t, &litequeue.Options{Queues: []litequeue.QueueConfig{
		{Name: "payments", Timeout: 10 * time.Second},
	}})
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[ChargeCard]) error {
		<-ctx.Done() // a processor that never answers
		return ctx.Err()
	})
	k.Start()
	id, _ := k.Queue.Enqueue(context.Background(), ChargeCard{Order: 9}, nil)

	k.WaitFor(litequeue.EventStarted, id)
	k.Clock.Add(10 * time.Second) // the job timeout passes
	e := k.WaitFor(litequeue.EventDead, id)
	fmt.Println(e.Err)
	// Output:
	// job timeout 10s passed: context deadline exceeded
}

// History lists what happened to one job, also after its success deleted
// it from the file.
func ExampleKit_History() {
	t, done := exampleT()
	defer done()

	k := litequeuetest.New(t, &litequeue.Options{Queues: []litequeue.QueueConfig{
		{Name: "payments", Retry: litequeue.FixedRetry(3, time.Minute)},
	}})
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[ChargeCard]) error {
		if d.Attempt == 1 {
			return litequeue.RetryAfter(5*time.Minute, errors.New("429 too many requests"))
		}
		return nil
	})
	ctx := context.Background()
	id, _ := k.Queue.Enqueue(ctx, ChargeCard{Order: 3}, nil)
	k.Drain(ctx)

	for _, e := range k.History(id) {
		fmt.Println(e.Time.Format("15:04"), e.Type, e.Attempt, e.Delay)
	}
	// Output:
	// 09:00 enqueued 0 0s
	// 09:00 started 1 0s
	// 09:00 retrying 1 5m0s
	// 09:05 started 2 0s
	// 09:05 succeeded 2 0s
}

// Work calls a handler once, with no queue, as the worker would on a given
// attempt.
func ExampleWork() {
	t, done := exampleT()
	defer done()

	handler := func(ctx context.Context, d *litequeue.Delivery[ChargeCard]) error {
		if d.Attempt == d.MaxAttempts {
			return litequeue.Permanent(errors.New("last attempt: refund instead"))
		}
		return nil
	}
	k := litequeuetest.New(t, &litequeue.Options{Queues: []litequeue.QueueConfig{
		{Name: "payments", Retry: litequeue.ExponentialRetry(3)},
	}})
	err := litequeuetest.Work(t, handler, ChargeCard{Order: 1}, litequeuetest.Config(k.Queue), litequeuetest.Attempt(3))
	fmt.Println(litequeue.IsPermanent(err), err)
	// Output:
	// true permanent: last attempt: refund instead
}

// RequireEnqueued checks what a piece of code enqueued.
func ExampleRequireEnqueued() {
	t, done := exampleT()
	defer done()

	k := litequeuetest.New(t, nil)
	placeOrder := func(ctx context.Context, q *litequeue.Queue, order int) error {
		_, err := q.Enqueue(ctx, ChargeCard{Order: order}, &litequeue.EnqueueOptions{
			Delay: 15 * time.Minute, Key: fmt.Sprint("charge-", order)})
		return err
	}
	placeOrder(context.Background(), k.Queue, 5)

	got := litequeuetest.RequireEnqueued[ChargeCard](t, k.Queue,
		litequeuetest.InQueue("payments"),
		litequeuetest.DueAt(litequeuetest.Epoch.Add(15*time.Minute)),
		litequeuetest.WithKey("charge-5"))
	fmt.Println(got.Job.Order, got.Info.State)
	litequeuetest.RequireNotEnqueued[ChargeCard](t, k.Queue, litequeuetest.WithKey("charge-6"))
	// Output:
	// 5 scheduled
}

// exampleT stands in for a test's *testing.T in examples, which have none.
// done runs the cleanups, as the end of a test would.
func exampleT() (testing.TB, func()) {
	t := &exampleTB{}
	return t, func() {
		for i := len(t.cleanups) - 1; i >= 0; i-- {
			t.cleanups[i]()
		}
	}
}

type exampleTB struct {
	testing.TB
	cleanups []func()
}

func (t *exampleTB) Helper()                           {}
func (t *exampleTB) Cleanup(f func())                  { t.cleanups = append(t.cleanups, f) }
func (t *exampleTB) Context() context.Context          { return context.Background() }
func (t *exampleTB) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }
func (t *exampleTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (t *exampleTB) Errorf(format string, args ...any) { fmt.Printf("FAIL: "+format+"\n", args...) }
func (t *exampleTB) TempDir() string {
	dir, err := os.MkdirTemp("", "litequeuetest-example")
	if err != nil {
		panic(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Through runs the call on a stored job, so its outcome is recorded as the
// worker records it: here the last attempt fails and the job is a dead
// letter.
func ExampleThrough() {
	t, done := exampleT()
	defer done()

	k := litequeuetest.New(t, &litequeue.Options{Queues: []litequeue.QueueConfig{
		{Name: "payments", Retry: litequeue.ExponentialRetry(3)},
	}})
	handler := func(ctx context.Context, d *litequeue.Delivery[ChargeCard]) error {
		return errors.New("card declined")
	}
	litequeuetest.Work(t, handler, ChargeCard{Order: 8}, litequeuetest.Through(k.Queue), litequeuetest.Attempt(3))

	dead, _ := k.Queue.DeadLetters(context.Background(), litequeue.JobFilter{})
	fmt.Println(len(dead), dead[0].DeadReason)
	// Output:
	// 1 attempts used up (3 of 3)
}

// DeliverTwice loses the first success of a job, as a process that dies
// before committing it would: the job comes back when its lease ends and
// runs again. A handler that is not idempotent charges twice.
func ExampleKit_DeliverTwice() {
	t, done := exampleT()
	defer done()

	k := litequeuetest.New(t, &litequeue.Options{Queues: []litequeue.QueueConfig{
		{Name: "payments", Retry: litequeue.FixedRetry(3, time.Minute)},
	}})
	var charges atomic.Int32
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[ChargeCard]) error {
		charges.Add(1) // not idempotent: charges again on a redelivery
		fmt.Printf("charging order %d, attempt %d %q\n", d.Job.Order, d.Attempt, d.LastError)
		return nil
	})
	ctx := context.Background()
	id, _ := k.Queue.Enqueue(ctx, ChargeCard{Order: 42}, nil)
	k.DeliverTwice(id)

	res, _ := k.Drain(ctx)
	fmt.Printf("charged %d times; %d outcome lost; %s of virtual time\n", charges.Load(), res.Lost, res.Elapsed)
	// Output:
	// charging order 42, attempt 1 ""
	// charging order 42, attempt 2 "lease expired: the worker of attempt 1 was lost"
	// charged 2 times; 1 outcome lost; 30s of virtual time
}

// DeliverEachTwice delivers every job of a kind twice; an idempotent
// handler — here one that remembers what it did under the job's id —
// charges each order once.
func ExampleKit_DeliverEachTwice() {
	t, done := exampleT()
	defer done()

	k := litequeuetest.New(t, &litequeue.Options{Queues: []litequeue.QueueConfig{
		{Name: "payments", Retry: litequeue.FixedRetry(3, time.Minute)},
	}})
	var mu sync.Mutex
	charged := map[int64]bool{} // in production: a unique key written with the charge
	runs := 0
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[ChargeCard]) error {
		mu.Lock()
		defer mu.Unlock()
		runs++
		if !charged[d.ID] {
			charged[d.ID] = true // and charge
		}
		return nil
	})
	k.DeliverEachTwice(ChargeCard{}.Kind())
	ctx := context.Background()
	for order := range 3 {
		k.Queue.Enqueue(ctx, ChargeCard{Order: order}, nil)
	}

	k.Drain(ctx)
	mu.Lock()
	defer mu.Unlock()
	fmt.Println(runs, "runs,", len(charged), "charges")
	// Output:
	// 6 runs, 3 charges
}

// LoseOutcome loses the process between the handler's return and the
// commit of its outcome. On the job's last attempt that makes the dead
// letter a lost worker makes; Drain waits out the lease on the mock clock.
func ExampleKit_LoseOutcome() {
	t, done := exampleT()
	defer done()

	k := litequeuetest.New(t, &litequeue.Options{Queues: []litequeue.QueueConfig{
		{Name: "payments", VisibilityTimeout: time.Minute}, // one attempt
	}})
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[ChargeCard]) error {
		return nil
	})
	ctx := context.Background()
	id, _ := k.Queue.Enqueue(ctx, ChargeCard{Order: 7}, nil)
	k.LoseOutcome(id)

	res, _ := k.Drain(ctx)
	dead, _ := k.Queue.DeadLetter(ctx, id)
	fmt.Printf("ran %d, lost %d, died %d after %s\n", res.Ran, res.Lost, res.Died, res.Elapsed)
	fmt.Println(dead.DeadReason)
	// Output:
	// ran 1, lost 1, died 1 after 1m0s
	// attempts used up: attempt 1 of 1 was lost with its process (lease expired)
}

// FailWrites makes the store fail as on a full disk: Enqueue returns
// ErrStorageFull and stores nothing; the job accepted before runs once the
// disk has room again.
func ExampleKit_FailWrites() {
	t, done := exampleT()
	defer done()

	k := litequeuetest.New(t, nil)
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[ChargeCard]) error {
		fmt.Println("charging order", d.Job.Order)
		return nil
	})
	ctx := context.Background()
	k.Queue.Enqueue(ctx, ChargeCard{Order: 1}, nil)

	k.FailWrites(litequeue.ErrStorageFull, -1) // every write, until ClearFaults
	_, err := k.Queue.Enqueue(ctx, ChargeCard{Order: 2}, nil)
	fmt.Println(errors.Is(err, litequeue.ErrStorageFull), err)

	k.ClearFaults()
	k.Drain(ctx)
	// Output:
	// true litequeue: enqueue charge_card: disk full: database or disk is full (13) [injected by litequeuetest]
	// charging order 1
}
