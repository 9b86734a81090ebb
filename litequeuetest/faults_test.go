package litequeuetest_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/litequeuetest"
	"github.com/stretchr/testify/require"
)

const lease = 5 * time.Minute

// paymentsQueue is the payments queue of the fault tests: it retries after
// a minute, up to attempts, with a 5-minute lease.
func paymentsQueue(attempts int) litequeue.QueueConfig {
	return litequeue.QueueConfig{Name: "payments", Retry: litequeue.FixedRetry(attempts, time.Minute), VisibilityTimeout: lease}
}

// payments is a kit with the payments queue (see paymentsQueue) whose
// retention keeps completed jobs, so the tests can read their rows, and
// whose ChargeCard handler keeps a ledger.
type payments struct {
	*litequeuetest.Kit
	*ledger
	attempts int
}

// newPayments makes the kit, with handle as the ChargeCard handler: one of
// the ledger's ((*payments).charge, say) or a test's own.
func newPayments(t *testing.T, attempts int, handle func(*payments, context.Context, *litequeue.Delivery[ChargeCard]) error) *payments {
	t.Helper()
	p := &payments{attempts: attempts, ledger: newLedger(), Kit: litequeuetest.New(t, &litequeue.Options{
		CompletedRetention: 24 * time.Hour, Queues: []litequeue.QueueConfig{paymentsQueue(attempts)}})}
	litequeue.Register(p.Queue, func(ctx context.Context, d *litequeue.Delivery[ChargeCard]) error { return handle(p, ctx, d) })
	return p
}

// pay enqueues the charge of order and returns its job's id.
func (p *payments) pay(t *testing.T, order int) int64 {
	t.Helper()
	id, err := p.Queue.Enqueue(context.Background(), ChargeCard{Order: order}, nil)
	require.NoError(t, err)
	return id
}

// drainFaulted makes a kit (see newPayments), pays order 1, arms fault
// on its job (nil: none; the handler may arm one) and drains; it returns
// the kit, the job's id and what Drain did.
func drainFaulted(t *testing.T, attempts int, handle func(*payments, context.Context, *litequeue.Delivery[ChargeCard]) error, fault func(*payments, int64)) (*payments, int64, litequeuetest.DrainResult) {
	t.Helper()
	p := newPayments(t, attempts, handle)
	id := p.pay(t, 1)
	if fault != nil {
		fault(p, id)
	}
	res, err := p.Drain(context.Background())
	require.NoError(t, err)
	return p, id, res
}

// ledger counts the charges per order; charge is not idempotent,
// chargeOnce is (it remembers the jobs it charged for, as a unique key in
// the same transaction as the charge would).
type ledger struct {
	mu      sync.Mutex
	charges map[int]int
	done    map[int64]bool
	seen    []delivery
}

type delivery struct {
	Attempt   int
	LastError string
}

func newLedger() *ledger { return &ledger{charges: map[int]int{}, done: map[int64]bool{}} }

func (l *ledger) charge(ctx context.Context, d *litequeue.Delivery[ChargeCard]) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.charges[d.Job.Order]++
	l.seen = append(l.seen, delivery{d.Attempt, d.LastError})
	return nil
}

func (l *ledger) chargeOnce(ctx context.Context, d *litequeue.Delivery[ChargeCard]) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, delivery{d.Attempt, d.LastError})
	if l.done[d.ID] {
		return nil
	}
	l.done[d.ID] = true
	l.charges[d.Job.Order]++
	return nil
}

// chargeFailingFirst charges, and fails the first attempt (errDown).
func (l *ledger) chargeFailingFirst(ctx context.Context, d *litequeue.Delivery[ChargeCard]) error {
	l.charge(ctx, d)
	if d.Attempt == 1 {
		return errDown
	}
	return nil
}

func (l *ledger) count(order int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.charges[order]
}

func (l *ledger) deliveries() []delivery {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]delivery(nil), l.seen...)
}

// attemptOf names an event by its type and attempt: "started 2".
func attemptOf(e litequeue.Event) string {
	return string(e.Type) + " " + string(rune('0'+e.Attempt))
}

func types(evs []litequeue.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, attemptOf(e))
	}
	return out
}

// DeliverTwice loses the first success: the job comes back after its lease,
// as the next attempt, and a handler that is not idempotent charges twice.
func TestDeliverTwiceShowsAHandlerThatIsNotIdempotent(t *testing.T) {
	p, id, res := drainFaulted(t, 3, (*payments).charge, (*payments).DeliverTwice)
	require.Equal(t, 2, p.count(1), "the second delivery charged again")
	require.Equal(t, 2, res.Ran)
	require.Equal(t, 1, res.Succeeded)
	require.Equal(t, 1, res.Lost)
	require.Equal(t, []int64{id}, res.LostIDs())
	require.Equal(t, lease, res.Elapsed, "Drain waited for the lease, and only for it")
	require.Equal(t, []delivery{{1, ""}, {2, "lease expired: the worker of attempt 1 was lost"}}, p.deliveries())
	require.Equal(t, []string{"enqueued 0", "started 1", "started 2", "succeeded 2"}, types(p.History(id)))
	j, err := p.Queue.Job(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateCompleted, j.State)
	require.Equal(t, 2, j.Attempt)
}

// The same fault passes an idempotent handler: two deliveries, one charge.
func TestDeliverTwicePassesAnIdempotentHandler(t *testing.T) {
	p := newPayments(t, 3, (*payments).chargeOnce)
	id := p.pay(t, 1)
	p.DeliverTwice(id)
	r, err := p.Settle(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, litequeue.EventSucceeded, r.Outcome)
	require.Equal(t, 2, r.Attempts)
	require.Equal(t, lease, r.Elapsed)
	require.Len(t, p.deliveries(), 2)
	require.Equal(t, 1, p.count(1))
}

// Failed attempts before the first success are recorded as usual;
// DeliverTwice waits for the success.
func TestDeliverTwiceWaitsForASuccess(t *testing.T) {
	p, id, res := drainFaulted(t, 4, (*payments).chargeFailingFirst, (*payments).DeliverTwice)
	require.Equal(t, []string{"enqueued 0", "started 1", "retrying 1", "started 2", "started 3", "succeeded 3"}, types(p.History(id)))
	require.Equal(t, time.Minute+lease, res.Elapsed)
	j, err := p.Queue.Job(context.Background(), id)
	require.NoError(t, err)
	require.Len(t, j.Attempts, 1, "the lost success left no record; the retry did")
}

// DeliverEachTwice covers jobs the test never saw the id of: here those a
// handler enqueues.
func TestDeliverEachTwiceCoversEveryJobOfTheKind(t *testing.T) {
	p := newPayments(t, 2, (*payments).charge)
	litequeue.Register(p.Queue, func(ctx context.Context, d *litequeue.Delivery[Receipt]) error {
		for o := range 3 {
			if _, err := p.Queue.Enqueue(ctx, ChargeCard{Order: o}, nil); err != nil {
				return err
			}
		}
		return nil
	})
	p.DeliverEachTwice(ChargeCard{}.Kind())
	ctx := context.Background()
	_, err := p.Queue.Enqueue(ctx, Receipt{}, nil)
	require.NoError(t, err)
	res, err := p.Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, res.Lost)
	require.Equal(t, 4, res.Succeeded, "the receipt once, each payment once")
	for o := range 3 {
		require.Equal(t, 2, p.count(o), "order %d", o)
	}
}

// LoseOutcome loses a failure as well as a success: the attempt's error is
// never recorded, and the job comes back after the lease.
func TestLoseOutcomeLosesAFailure(t *testing.T) {
	p, id, res := drainFaulted(t, 3, (*payments).chargeFailingFirst, (*payments).LoseOutcome)
	require.Equal(t, lease, res.Elapsed, "the lease, not the retry's minute")
	require.Zero(t, res.Retried)
	j, err := p.Queue.Job(context.Background(), id)
	require.NoError(t, err)
	require.Empty(t, j.Attempts, "the lost failure left no record")
	require.Equal(t, 2, j.Attempt)
}

// A lost last attempt makes the dead letter the queue makes for a worker
// lost with its process, without running the handler again; Drain
// terminates and reports the lease's wait.
func TestLostLastAttemptIsADeadLetter(t *testing.T) {
	k := litequeuetest.New(t, nil) // default queue config: one attempt, default lease
	var calls atomic.Int32
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[Receipt]) error {
		calls.Add(1)
		return nil
	})
	ctx := context.Background()
	id, err := k.Queue.Enqueue(ctx, Receipt{}, nil)
	require.NoError(t, err)
	k.LoseOutcome(id)
	res, err := k.Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, int32(1), calls.Load())
	require.Equal(t, 1, res.Ran)
	require.Equal(t, 1, res.Lost)
	require.Equal(t, 1, res.Died)
	require.Equal(t, litequeue.DefaultVisibilityTimeout, res.Elapsed)
	dead, err := k.Queue.DeadLetter(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "attempts used up: attempt 1 of 1 was lost with its process (lease expired)", dead.DeadReason)
	require.Equal(t, 1, dead.Attempt)
	require.Len(t, dead.Attempts, 1)
	require.Equal(t, "lease expired: the worker was lost", dead.Attempts[0].Error)
	require.Equal(t, litequeue.DecisionGiveUp, dead.Attempts[0].Decision)
	e := k.WaitFor(litequeue.EventDead, id)
	require.Equal(t, 1, e.Attempt)
}

// loseForReal has a real worker lose job id's due attempt with its
// process: another queue on the same file, whose clock never moves (so it
// never extends its lease), runs the attempt — its handler charges p's
// ledger — and never returns until the test ends: a process that hangs or
// died after its handler's effects. Then the lease ends on p's clock and
// p.Drain runs what follows.
func (p *payments) loseForReal(t *testing.T, id int64) {
	t.Helper()
	ctx := context.Background()
	j, err := p.Queue.Job(ctx, id)
	require.NoError(t, err)
	due := j.VisibleAt.In(p.Clock.Now().Location()) // as the kit's clock tells it
	c := clock.NewMock()
	c.Set(due)
	other, err := litequeue.Open(p.Path, &litequeue.Options{Clock: c, PollInterval: -1,
		Queues: []litequeue.QueueConfig{paymentsQueue(p.attempts)}})
	require.NoError(t, err)
	ran, hang := make(chan struct{}), make(chan struct{})
	litequeue.Register(other, func(ctx context.Context, d *litequeue.Delivery[ChargeCard]) error {
		p.charge(ctx, d)
		close(ran)
		<-hang
		return nil
	})
	require.NoError(t, other.Start(ctx))
	t.Cleanup(func() {
		close(hang)
		require.NoError(t, other.Stop(context.Background()))
		require.NoError(t, other.Close())
	})
	select {
	case <-ran:
	case <-time.After(litequeuetest.DefaultTimeout):
		t.Fatal("the other process never ran the job")
	}
	p.Clock.Set(due.Add(lease)) // nobody extends the lease: it ends
	_, err = p.Drain(ctx)
	require.NoError(t, err)
}

// outcome is what a job's story looks like from the kit's queue.
type outcome struct {
	Deliveries []delivery
	Info       litequeue.JobInfo
	Events     []string // the kit's events of the job, but for the lost attempt's start
	Now        time.Time
}

func (p *payments) outcome(t *testing.T, id int64, lostAttempt int) outcome {
	t.Helper()
	j, err := p.Queue.Job(context.Background(), id)
	require.NoError(t, err)
	var evs []string
	for _, e := range p.History(id) {
		if e.Type == litequeue.EventStarted && e.Attempt == lostAttempt {
			continue // the real lost attempt started in the other process
		}
		s := attemptOf(e) + " " + e.Time.Format(time.TimeOnly)
		if e.Err != nil {
			s += ": " + e.Err.Error()
		}
		evs = append(evs, s)
	}
	// Each kit's process has a random id: compare whether one is named.
	j.Process = min(j.Process, 1)
	j.Attempts = anyProcess(j.Attempts)
	return outcome{Deliveries: p.deliveries(), Info: j, Events: evs, Now: p.Clock.Now()}
}

// A lost success behaves as a real worker lost with its process: the same
// redelivery (attempt, last error, time), the same row, history and events.
func TestLostSuccessMatchesARealLostWorker(t *testing.T) {
	fault, id, _ := drainFaulted(t, 3, (*payments).charge, (*payments).DeliverTwice)

	real := newPayments(t, 3, (*payments).charge)
	rid := real.pay(t, 1)
	real.loseForReal(t, rid)

	require.Equal(t, id, rid)
	require.Equal(t, real.outcome(t, rid, 1), fault.outcome(t, id, 1))
	require.Equal(t, 2, fault.count(1))
}

// A lost last attempt behaves as a real worker lost with its process on its
// last attempt: the same dead letter, reason, history and events.
func TestLostLastAttemptMatchesARealLostWorker(t *testing.T) {
	ctx := context.Background()
	fault := newPayments(t, 2, (*payments).chargeFailingFirst)
	id := fault.pay(t, 1)
	_, err := fault.Next(ctx) // attempt 1 fails
	require.NoError(t, err)
	fault.LoseOutcome(id)
	res, err := fault.Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, time.Minute+lease, res.Elapsed)

	real := newPayments(t, 2, (*payments).chargeFailingFirst)
	rid := real.pay(t, 1)
	_, err = real.Next(ctx)
	require.NoError(t, err)
	real.loseForReal(t, rid)

	want := real.outcome(t, rid, 2)
	require.Equal(t, litequeue.StateDead, want.Info.State)
	require.Equal(t, "attempts used up: attempt 2 of 2 was lost with its process (lease expired)", want.Info.DeadReason)
	require.Equal(t, want, fault.outcome(t, id, 2))
	fd, err := fault.Queue.DeadLetter(ctx, id)
	require.NoError(t, err)
	rd, err := real.Queue.DeadLetter(ctx, rid)
	require.NoError(t, err)
	require.Equal(t, anyProcess(rd.Attempts), anyProcess(fd.Attempts))
	require.Len(t, fd.Attempts, 2)
}

// anyProcess replaces the random process id of each record that names one
// with 1, for comparing the records of two kits.
func anyProcess(as []litequeue.AttemptRecord) []litequeue.AttemptRecord {
	for i := range as {
		as[i].Process = min(as[i].Process, 1)
	}
	return as
}

// DeliverTwice on the policy's last attempt cannot deliver again: it says
// so and lets the success be written.
func TestDeliverTwiceOnTheLastAttemptFailsTheTest(t *testing.T) {
	var res litequeuetest.DrainResult
	msg := (&fakeT{TB: t}).failsWithKit(nil, func(k *litequeuetest.Kit) {
		litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[Receipt]) error { return nil })
		id, err := k.Queue.Enqueue(context.Background(), Receipt{}, nil)
		require.NoError(t, err)
		k.DeliverTwice(id)
		res, err = k.Drain(context.Background())
		require.NoError(t, err)
	})
	require.Contains(t, msg, "succeeded on its last attempt (1 of 1), so a lost success would make it a dead letter")
	require.NotContains(t, msg, "never struck", "the fault was used")
	require.Equal(t, 1, res.Succeeded)
	require.Zero(t, res.Lost)
}

// A fault armed but never struck fails the test: it proved nothing.
func TestUnusedFaultsFailTheTest(t *testing.T) {
	ft := &fakeT{TB: t}
	msg := ft.failsWithKit(nil, func(k *litequeuetest.Kit) {
		litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[Receipt]) error { return errDown })
		id, err := k.Queue.Enqueue(context.Background(), Receipt{}, nil)
		require.NoError(t, err)
		k.DeliverTwice(id) // the job never succeeds
		k.LoseOutcome(id + 1)
		k.DeliverEachTwice("nothing")
		_, err = k.Drain(context.Background())
		require.NoError(t, err)
		k.FailWrites(litequeue.ErrStorageFull, 2)
		_, err = k.Queue.Enqueue(context.Background(), Receipt{}, nil)
		require.ErrorIs(t, err, litequeue.ErrStorageFull)
	})
	require.Contains(t, msg, "Kit.DeliverTwice(1): job 1 did not succeed")
	require.Contains(t, msg, "Kit.LoseOutcome(2): job 2 ran no attempt")
	require.Contains(t, msg, `Kit.DeliverEachTwice("nothing")`)
	require.Contains(t, msg, "armed 2 failing writes but only 1 happened")

	// ClearFaults disarms them.
	msg = ft.failsWithKit(nil, func(k *litequeuetest.Kit) {
		k.LoseOutcome(1)
		k.FailWrites(litequeue.ErrStorageFull, -1)
		k.ClearFaults()
	})
	require.Empty(t, msg)
}

// A full store makes Enqueue fail with ErrStorageFull and store nothing;
// once space is back, every job that was accepted runs.
func TestFailWritesMakesEnqueueReportAFullDisk(t *testing.T) {
	p := newPayments(t, 1, (*payments).charge)
	ctx := context.Background()
	p.pay(t, 1)

	p.FailWrites(litequeue.ErrStorageFull, 2)
	_, err := p.Queue.Enqueue(ctx, ChargeCard{Order: 2}, nil)
	require.ErrorIs(t, err, litequeue.ErrStorageFull)
	require.ErrorContains(t, err, "database or disk is full")
	_, err = p.Queue.EnqueueBatch(ctx, []litequeue.BatchItem{{Job: ChargeCard{Order: 3}}, {Job: ChargeCard{Order: 4}}})
	require.ErrorIs(t, err, litequeue.ErrStorageFull)
	jobs, err := p.Queue.Jobs(ctx, litequeue.JobFilter{})
	require.NoError(t, err)
	require.Len(t, jobs, 1, "the failed enqueues stored nothing")
	require.JSONEq(t, `{"order":1}`, string(jobs[0].Payload))

	// Two writes failed; the third works.
	p.pay(t, 5)
	res, err := p.Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, res.Succeeded)
	require.Equal(t, map[int]int{1: 1, 5: 1}, p.charges)
}

// With every write failing, the queue cannot claim a due job: Drain says
// so at once instead of waiting. After ClearFaults nothing accepted is
// lost.
func TestFailEveryWriteUntilCleared(t *testing.T) {
	p := newPayments(t, 1, (*payments).charge)
	ctx := context.Background()
	p.pay(t, 1)
	p.FailWrites(litequeue.ErrStorageFull, -1)
	for o := 2; o < 5; o++ {
		_, err := p.Queue.Enqueue(ctx, ChargeCard{Order: o}, &litequeue.EnqueueOptions{Delay: time.Minute})
		require.ErrorIs(t, err, litequeue.ErrStorageFull)
	}
	_, err := p.Drain(ctx)
	require.ErrorIs(t, err, litequeuetest.ErrStuck)
	require.ErrorContains(t, err, "every write fails")
	require.Zero(t, p.count(1))

	p.ClearFaults()
	_, err = p.Queue.Enqueue(ctx, ChargeCard{Order: 5}, &litequeue.EnqueueOptions{Delay: time.Minute})
	require.NoError(t, err)
	res, err := p.Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, res.Succeeded)
	require.Equal(t, map[int]int{1: 1, 5: 1}, p.charges)
}

// A device that fails for a moment while the handler runs: the success
// cannot be written, the worker keeps the job's lease and writes the
// success again at its next claim. The handler runs once; no outcome is
// lost and no virtual time passes.
func TestFailedSuccessWriteIsWrittenAgain(t *testing.T) {
	var once sync.Once
	p, id, res := drainFaulted(t, 3, func(p *payments, ctx context.Context, d *litequeue.Delivery[ChargeCard]) error {
		once.Do(func() { p.FailWrites(litequeue.ErrStorageIO, 1) })
		return p.charge(ctx, d)
	}, nil)
	require.Zero(t, res.Lost)
	require.Zero(t, res.Elapsed)
	require.Equal(t, 1, p.count(1), "the handler ran again")
	require.Equal(t, []string{"enqueued 0", "started 1", "succeeded 1"}, types(p.History(id)))
}

// A failure whose write fails is kept and written again the same way: the
// retry is scheduled as decided, and the attempt is not counted twice.
func TestFailedRetryWriteIsWrittenAgain(t *testing.T) {
	p, id, res := drainFaulted(t, 3, func(p *payments, ctx context.Context, d *litequeue.Delivery[ChargeCard]) error {
		if d.Attempt == 1 {
			p.FailWrites(errors.New("database is locked"), 1)
		}
		return p.chargeFailingFirst(ctx, d)
	}, nil)
	require.Zero(t, res.Lost)
	require.Equal(t, 1, res.Retried)
	require.Equal(t, 1, res.Succeeded)
	require.Equal(t, []string{"enqueued 0", "started 1", "retrying 1", "started 2", "succeeded 2"}, types(p.History(id)))
}

// Many lost outcomes on concurrent workers: every job comes back once, at
// its lease's end, and Drain ends when all have.
func TestManyLostOutcomesOnConcurrentWorkers(t *testing.T) {
	q := paymentsQueue(2)
	q.Concurrency = 4
	k := litequeuetest.New(t, &litequeue.Options{Queues: []litequeue.QueueConfig{q}})
	l := newLedger()
	litequeue.Register(k.Queue, l.charge)
	ctx := context.Background()
	const n = 40
	for o := range n {
		_, err := k.Queue.Enqueue(ctx, ChargeCard{Order: o}, nil)
		require.NoError(t, err)
	}
	k.DeliverEachTwice(ChargeCard{}.Kind())
	res, err := k.Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, n, res.Lost)
	require.Equal(t, n, res.Succeeded)
	require.Equal(t, 2*n, res.Ran)
	require.Equal(t, lease, res.Elapsed)
	for o := range n {
		require.Equal(t, 2, l.count(o), "order %d", o)
	}
}

// A device that fails for good while a handler runs: Drain reports at once
// that nothing can be written, instead of waiting for a handler; the
// success is kept, and written once the device works again.
func TestEveryWriteFailingWhileAHandlerRunsIsReportedAndRecovered(t *testing.T) {
	var once sync.Once
	p := newPayments(t, 3, func(p *payments, ctx context.Context, d *litequeue.Delivery[ChargeCard]) error {
		once.Do(func() { p.FailWrites(litequeue.ErrStorageIO, -1) })
		return p.charge(ctx, d)
	})
	id := p.pay(t, 1)
	ctx := context.Background()
	start := time.Now()
	_, err := p.Drain(ctx)
	require.ErrorIs(t, err, litequeuetest.ErrStuck)
	require.ErrorContains(t, err, "every write fails")
	require.Less(t, time.Since(start), 5*time.Second, "Drain waited for its timeout instead of seeing the failing store")

	p.ClearFaults()
	res, err := p.Drain(ctx)
	require.NoError(t, err)
	require.Zero(t, res.Lost)
	require.Equal(t, 1, p.count(1), "the handler ran again")
	require.Equal(t, []string{"enqueued 0", "started 1", "succeeded 1"}, types(p.History(id)))
}
