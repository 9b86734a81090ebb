package litequeue_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// Flow control: limits stored with a queue, honoured by every process.

func init() {
	tests = append(tests, []struct {
		name string
		fn   func(t *testing.T, b conformanceBackend)
	}{
		{"FlowConcurrencyHoldsAcrossQueuesOnOneDatabase", testFlowConcurrency},
		{"FlowKeyConcurrencySkipsASaturatedGroup", testFlowKeyConcurrency},
		{"FlowLapsedLeaseFreesItsSlotOnlyWhenItLapses", testFlowLapse},
		{"FlowLimitsAreStoredAndChangedLive", testFlowStored},
		{"FlowBadLimitsAndGroupsAreRefusedWithNothingWritten", testFlowBadInput},
		{"FlowOrderedGroupRunsInOrderRetryHoldsDeadAndCancelRelease", testFlowOrdered},
		{"FlowRateLimitsStartsPerWindowInClockTime", testFlowRate},
	}...)
}

// running tracks the handlers running now, in all and per group, and the
// most seen at once.
type running struct {
	mu        sync.Mutex
	now, max  int
	group     map[string]int
	groupMax  map[string]int
	started   []string
	startedCh chan struct{}
}

func newRunning() *running {
	return &running{group: map[string]int{}, groupMax: map[string]int{}, startedCh: make(chan struct{}, 1000)}
}

func (r *running) enter(name, group string) {
	r.mu.Lock()
	r.now++
	r.max = max(r.max, r.now)
	if group != "" {
		r.group[group]++
		r.groupMax[group] = max(r.groupMax[group], r.group[group])
	}
	r.started = append(r.started, name)
	r.mu.Unlock()
	r.startedCh <- struct{}{}
}

func (r *running) leave(group string) {
	r.mu.Lock()
	r.now--
	if group != "" {
		r.group[group]--
	}
	r.mu.Unlock()
}

func (r *running) snapshot() (now, most int, started []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.now, r.max, append([]string(nil), r.started...)
}

// waitStarted waits until n handlers have started in all.
func (r *running) waitStarted(t *testing.T, n int) {
	t.Helper()
	waitFor(t, "handlers started", func() bool {
		_, _, s := r.snapshot()
		return len(s) >= n
	})
}

// Grouped is a job with a group from its type.
type Grouped struct {
	Name  string `json:"name"`
	G     string `json:"g"`
	Block bool   `json:"block"`
}

func (Grouped) Kind() string      { return "conformance_grouped" }
func (g Grouped) Group() string   { return g.G }
func (Grouped) QueueName() string { return "flow" }

func flowQueue(l litequeue.QueueLimits) func(o *litequeue.Options) {
	return queues(litequeue.QueueConfig{Name: "flow", Concurrency: 10, Retry: litequeue.NoRetry(), Limits: l})
}

func registerGrouped(h *Harness, r *running, g *gate) {
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Grouped]) error {
		r.enter(d.Job.Name, d.Job.G)
		defer r.leave(d.Job.G)
		if d.Job.Block {
			<-g.ch
		}
		return nil
	})
}

// Two queues on one database, ten handlers each, under a stored limit of 3:
// three jobs run at once in all, the others stay pending (no attempt
// used), and all run once slots free.
func testFlowConcurrency(t *testing.T, b conformanceBackend) {
	addr := b.Fresh(t)
	cfg := flowQueue(litequeue.QueueLimits{Concurrency: 3})
	a := open(t, b, addr, Start, cfg)
	c := open(t, b, addr, Start, cfg)
	r, g := newRunning(), newGate(t)
	registerGrouped(a, r, g)
	registerGrouped(c, r, g)
	ctx := context.Background()
	var ids []int64
	for i := range 12 {
		id, err := a.Q.Enqueue(ctx, Grouped{Name: string(rune('a' + i)), Block: true}, nil)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	a.start(t)
	c.start(t)
	r.waitStarted(t, 3)
	// Wake both dispatchers again: they claim nothing more.
	a.Q.Notify()
	c.Q.Notify()
	a.flush(t)
	c.flush(t)
	st := statsOf(t, a.Q, "flow")
	require.Equal(t, 3, st.Running, "three jobs run in all")
	require.Equal(t, 9, st.Ready, "the others stay ready")
	now, _, _ := r.snapshot()
	require.Equal(t, 3, now)
	for _, id := range ids {
		j, err := a.Q.Job(ctx, id)
		require.NoError(t, err)
		if j.State == litequeue.StateReady {
			require.Zero(t, j.Attempt, "a job held by the limit used no attempt")
		}
	}
	g.open()
	waitFor(t, "every job succeeded", func() bool {
		return a.Ev.Count(litequeue.EventSucceeded, 0)+c.Ev.Count(litequeue.EventSucceeded, 0) == len(ids)
	})
	_, most, _ := r.snapshot()
	require.LessOrEqual(t, most, 3, "never more than the limit at once")
}

// KeyConcurrency 1: a group's second job waits while its first runs, and
// the jobs of other groups enqueued behind it start at once (no
// head-of-line blocking); jobs without a group are not limited.
func testFlowKeyConcurrency(t *testing.T, b conformanceBackend) {
	h := setup(t, b, flowQueue(litequeue.QueueLimits{KeyConcurrency: 1}))
	r, g := newRunning(), newGate(t)
	registerGrouped(h, r, g)
	ctx := context.Background()
	for i := range 5 {
		_, err := h.Q.Enqueue(ctx, Grouped{Name: "busy" + string(rune('0'+i)), G: "busy", Block: true}, nil)
		require.NoError(t, err)
	}
	_, err := h.Q.Enqueue(ctx, Grouped{Name: "other", Block: true}, &litequeue.EnqueueOptions{Group: "other"})
	require.NoError(t, err)
	_, err = h.Q.Enqueue(ctx, Grouped{Name: "free1", Block: true}, nil)
	require.NoError(t, err)
	_, err = h.Q.Enqueue(ctx, Grouped{Name: "free2", Block: true}, nil)
	require.NoError(t, err)
	h.start(t)
	r.waitStarted(t, 4)
	h.Q.Notify()
	h.flush(t)
	_, _, started := r.snapshot()
	require.ElementsMatch(t, []string{"busy0", "other", "free1", "free2"}, started,
		"one job of the busy group, and every job behind it")
	require.Equal(t, 4, statsOf(t, h.Q, "flow").Running)
	g.open()
	h.Ev.Wait(t, litequeue.EventSucceeded, 0, 8)
	_, _, started = r.snapshot()
	var busy []string
	for _, s := range started {
		if strings.HasPrefix(s, "busy") {
			busy = append(busy, s)
		}
	}
	require.Equal(t, []string{"busy0", "busy1", "busy2", "busy3", "busy4"}, busy, "the busy group's jobs one at a time, oldest first")
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Equal(t, 1, r.groupMax["busy"], "never two of one group at once")
}

// A job whose worker is gone keeps its slot until its lease lapses: a
// second process on the database starts nothing under a limit of 1 while
// the lease holds, and starts the next job once it lapsed.
func testFlowLapse(t *testing.T, b conformanceBackend) {
	const vis = 30 * time.Second
	cfg := queues(litequeue.QueueConfig{Name: "flow", Retry: litequeue.NoRetry(), VisibilityTimeout: vis,
		Limits: litequeue.QueueLimits{Concurrency: 1}})
	a := setup(t, b, cfg)
	r, g := newRunning(), newGate(t)
	registerGrouped(a, r, g)
	ctx := context.Background()
	first, err := a.Q.Enqueue(ctx, Grouped{Name: "first", Block: true}, nil)
	require.NoError(t, err)
	second, err := a.Q.Enqueue(ctx, Grouped{Name: "second"}, nil)
	require.NoError(t, err)
	a.start(t)
	a.Ev.Wait(t, litequeue.EventStarted, first, 1)
	// The first process's clock stands still: it extends nothing, as if it
	// were gone. A second process, before the lease's end, takes nothing.
	c := open(t, b, a.Addr, Start.Add(vis/2), cfg)
	r2 := newRunning()
	registerGrouped(c, r2, g)
	c.start(t)
	c.Q.Notify()
	c.flush(t)
	require.Equal(t, litequeue.StateReady, state(t, c.Q, second), "the slot is held while the lease holds")
	// Past the lease's end the slot is free.
	c.Clock.Add(vis)
	c.Ev.Wait(t, litequeue.EventSucceeded, second, 1)
}

// Limits configured at Open are stored for every process; a process whose
// configuration sets none leaves them; SetLimits changes them live and
// QueueLimits{} removes them.
func testFlowStored(t *testing.T, b conformanceBackend) {
	addr := b.Fresh(t)
	l := litequeue.QueueLimits{Concurrency: 2, KeyConcurrency: 1, Rate: litequeue.Rate{N: 10, Per: time.Second}}
	a := open(t, b, addr, Start, flowQueue(l))
	ctx := context.Background()
	got, err := a.Q.Limits(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]litequeue.QueueLimits{"flow": l}, got)
	c := open(t, b, addr, Start, nil) // no limits configured
	got, err = c.Q.Limits(ctx)
	require.NoError(t, err)
	require.Equal(t, l, got["flow"], "a process without limits configured leaves the stored ones")

	r, g := newRunning(), newGate(t)
	registerGrouped(c, r, g)
	for i := range 3 {
		_, err := c.Q.Enqueue(ctx, Grouped{Name: string(rune('a' + i)), Block: true}, nil)
		require.NoError(t, err)
	}
	c.start(t)
	r.waitStarted(t, 2)
	c.Q.Notify()
	c.flush(t)
	require.Equal(t, 2, statsOf(t, c.Q, "flow").Running, "the stored limit holds in a process that did not configure it")
	require.NoError(t, c.Q.SetLimits(ctx, "flow", litequeue.QueueLimits{}))
	r.waitStarted(t, 3)
	got, err = c.Q.Limits(ctx)
	require.NoError(t, err)
	require.Empty(t, got)
	g.open()
}

func testFlowBadInput(t *testing.T, b conformanceBackend) {
	ctx := context.Background()
	for _, l := range []litequeue.QueueLimits{
		{Concurrency: -1},
		{KeyConcurrency: -2},
		{Rate: litequeue.Rate{N: 5}},
		{Rate: litequeue.Rate{N: 5, Per: 500 * time.Microsecond}},
		{KeyRate: litequeue.Rate{Per: time.Second}},
		{KeyRate: litequeue.Rate{N: -1, Per: time.Second}},
	} {
		_, err := b.Open(t, b.Fresh(t), &litequeue.Options{Queues: []litequeue.QueueConfig{{Name: "flow", Limits: l}}})
		require.ErrorIs(t, err, litequeue.ErrInvalidLimits, "%+v at Open", l)
		h := setup(t, b, nil)
		err = h.Q.SetLimits(ctx, "flow", l)
		require.ErrorIs(t, err, litequeue.ErrInvalidLimits, "%+v in SetLimits", l)
		got, err := h.Q.Limits(ctx)
		require.NoError(t, err)
		require.Empty(t, got, "nothing written")
	}
	h := setup(t, b, nil)
	require.ErrorIs(t, h.Q.SetLimits(ctx, "", litequeue.QueueLimits{Concurrency: 1}), litequeue.ErrInvalidJob)
	_, err := h.Q.Enqueue(ctx, Grouped{Name: "x", G: strings.Repeat("g", litequeue.MaxNameLen+1)}, nil)
	require.ErrorIs(t, err, litequeue.ErrInvalidJob)
	require.ErrorContains(t, err, "group name")
	_, err = h.Q.Enqueue(ctx, Grouped{Name: "x"}, &litequeue.EnqueueOptions{Group: "bad\x00group"})
	require.ErrorIs(t, err, litequeue.ErrInvalidJob)
	st := statsOf(t, h.Q, "flow")
	require.Zero(t, st.Ready)
}

// Step is a job of an ordered group that does what Do says: "ok"
// succeeds, "retry" fails its first attempt (retried a minute later),
// "die" fails permanently.
type Step struct {
	Name string `json:"name"`
	Do   string `json:"do"`
}

func (Step) Kind() string      { return "conformance_step" }
func (Step) Group() string     { return "order-1" }
func (Step) QueueName() string { return "ordered" }

// An ordered group runs its jobs one at a time in enqueue order across
// the queue's handlers: a job waiting for its retry holds the later ones
// back until it succeeded; a dead letter and a cancelled job release them;
// jobs of other groups are not held.
func testFlowOrdered(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(litequeue.QueueConfig{Name: "ordered", Concurrency: 10, Retry: litequeue.FixedRetry(3, time.Minute),
		Limits: litequeue.QueueLimits{Ordered: true}}))
	var mu sync.Mutex
	var order []string
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Step]) error {
		mu.Lock()
		order = append(order, d.Job.Name)
		mu.Unlock()
		switch {
		case d.Job.Do == "retry" && d.Attempt == 1:
			return errors.New("not yet")
		case d.Job.Do == "die":
			return litequeue.Permanent(errors.New("never"))
		}
		return nil
	})
	ctx := context.Background()
	ids := map[string]int64{}
	for _, s := range []Step{{"s1", "ok"}, {"s2", "retry"}, {"s3", "die"}, {"s4", "ok"}, {"s5", "retry"}, {"s6", "ok"}} {
		id, err := h.Q.Enqueue(ctx, s, nil)
		require.NoError(t, err)
		ids[s.Name] = id
	}
	other, err := h.Q.Enqueue(ctx, Step{Name: "other", Do: "ok"}, &litequeue.EnqueueOptions{Group: "order-2"})
	require.NoError(t, err)
	h.start(t)
	h.Ev.Wait(t, litequeue.EventSucceeded, other, 1)
	h.Ev.Wait(t, litequeue.EventRetrying, ids["s2"], 1)
	h.Q.Notify()
	h.flush(t)
	mu.Lock()
	require.Equal(t, []string{"s1", "s2"}, without(order, "other"), "s2's retry holds s3 and later")
	mu.Unlock()
	h.Clock.Add(time.Minute)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		t.Logf("order %v", order)
	})
	h.Ev.Wait(t, litequeue.EventDead, ids["s3"], 1)
	h.Ev.Wait(t, litequeue.EventRetrying, ids["s5"], 1)
	h.Q.Notify()
	h.flush(t)
	mu.Lock()
	require.Equal(t, []string{"s1", "s2", "s2", "s3", "s4", "s5"}, without(order, "other"), "a dead letter releases the next job")
	mu.Unlock()
	// Cancelling the retrying s5 releases s6.
	_, err = h.Q.Cancel(ctx, ids["s5"])
	require.NoError(t, err)
	h.Q.Notify()
	h.Ev.Wait(t, litequeue.EventSucceeded, ids["s6"], 1)
	mu.Lock()
	require.Equal(t, []string{"s1", "s2", "s2", "s3", "s4", "s5", "s6"}, without(order, "other"))
	mu.Unlock()
}

func without(s []string, drop string) []string {
	var out []string
	for _, x := range s {
		if x != drop {
			out = append(out, x)
		}
	}
	return out
}

// A rate of 2 per second starts two jobs, then two more when the Clock
// has moved a second on, and so on: the jobs over the rate wait pending,
// with no attempt used, and the wait is in the Clock's time. KeyRate
// limits each group's starts the same way without holding other groups.
func testFlowRate(t *testing.T, b conformanceBackend) {
	h := setup(t, b, flowQueue(litequeue.QueueLimits{Rate: litequeue.Rate{N: 2, Per: time.Second},
		KeyRate: litequeue.Rate{N: 1, Per: time.Minute}}))
	r, g := newRunning(), newGate(t)
	g.open()
	registerGrouped(h, r, g)
	ctx := context.Background()
	var ids []int64
	for i := range 5 {
		id, err := h.Q.Enqueue(ctx, Grouped{Name: string(rune('a' + i))}, nil)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	k1, err := h.Q.Enqueue(ctx, Grouped{Name: "k1"}, &litequeue.EnqueueOptions{Group: "k"})
	require.NoError(t, err)
	k2, err := h.Q.Enqueue(ctx, Grouped{Name: "k2"}, &litequeue.EnqueueOptions{Group: "k"})
	require.NoError(t, err)
	h.start(t)
	succeeded := func() int { return h.Ev.Count(litequeue.EventSucceeded, 0) }
	waitFor(t, "two jobs succeeded", func() bool { return succeeded() == 2 })
	h.Q.Notify()
	h.flush(t)
	require.Equal(t, 2, succeeded(), "no third start within the second")
	j, err := h.Q.Job(ctx, ids[4])
	require.NoError(t, err)
	require.Zero(t, j.Attempt, "a job held by the rate used no attempt")
	for want := 4; want <= 7; want += 2 {
		h.Clock.Add(time.Second)
		waitFor(t, "two more jobs succeeded", func() bool { return succeeded() == want })
		h.Q.Notify()
		h.flush(t)
		require.Equal(t, want, succeeded())
	}
	// 6 started by now: a..e and k1 (the rate's, in due order); k2 waits
	// for the group's minute although the queue's rate has room.
	require.Equal(t, 1, h.Ev.Count(litequeue.EventSucceeded, k1))
	require.Zero(t, h.Ev.Count(litequeue.EventSucceeded, k2), "the group's rate holds k2")
	h.Clock.Add(time.Minute)
	h.Ev.Wait(t, litequeue.EventSucceeded, k2, 1)
}
