package litequeue

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// peer opens another queue on h's file, as a second process would: with its
// own mock clock set ahead of h's, the same options otherwise, its own
// seeded jitter and its own events. It is closed when the test ends, before
// h is.
func (h *harness) peer(t *testing.T, ahead time.Duration) *harness {
	t.Helper()
	tc := newTestClock()
	p := &harness{clock: tc, tc: tc, ev: newEvents(), path: h.path}
	p.clock.Set(h.clock.Now().Add(ahead))
	p.opts = h.opts
	p.opts.Clock, p.opts.OnEvent, p.opts.Rand = tc, p.ev.add, rand.New(rand.NewPCG(3, 4))
	q, err := Open(h.path, &p.opts)
	require.NoError(t, err)
	p.q = q
	p.ev.sync = func() { _ = p.q.FlushEvents(context.Background()) }
	t.Cleanup(func() { require.NoError(t, q.Close()) })
	return p
}

// waitFirst waits for the first event of job id whose type is one of types
// and returns it: the outcome of an attempt, whichever it was.
func (e *events) waitFirst(t testing.TB, id int64, types ...EventType) Event {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		for _, ev := range e.snapshot() {
			if ev.JobID == id && slices.Contains(types, ev.Type) {
				return ev
			}
		}
		select {
		case <-e.ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for any of %v for job %d; saw %+v", types, id, e.snapshot())
		}
	}
}

// newGate returns a channel that handlers wait on and the function that
// opens it, once. Defer open in the test: a test that fails before opening
// the gate then still opens it before its cleanups stop the queue, so no
// handler stays blocked and Stop and Close finish.
func newGate() (gate chan struct{}, open func()) {
	gate = make(chan struct{})
	var once sync.Once
	return gate, func() { once.Do(func() { close(gate) }) }
}

// Marker is a job only some queues in a test handle: its run proves that a
// queue's claim has happened.
type Marker struct{}

func (Marker) Kind() string { return "marker" }

// takeover is two queues on one file, as two processes: a ran job id and
// its handler waits for releaseA; b, whose clock is past a's lease (a's
// clock stands still, so a never extends it), took the job over as attempt
// 2 and its handler waits for releaseB.
type takeover struct {
	a, b               *harness
	id                 int64
	releaseA, releaseB chan struct{}
	cancelledA         chan error // the cause, when a's handler context is cancelled
}

// startTakeover sets up a takeover; a's handler returns outcome once
// released (or the cause once its context is cancelled), b's handler
// returns nil. mod must leave the queue's
// VisibilityTimeout at its default and allow at least two attempts.
func startTakeover(t *testing.T, mod func(o *Options), outcome error) *takeover {
	t.Helper()
	tk := &takeover{releaseA: make(chan struct{}), releaseB: make(chan struct{}), cancelledA: make(chan error, 1)}
	tk.a = setup(t, mod)
	t.Cleanup(func() { // a failed test must not leave handlers blocked
		for _, c := range []chan struct{}{tk.releaseA, tk.releaseB} {
			select {
			case <-c:
			default:
				close(c)
			}
		}
	})
	Register(tk.a.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		select {
		case <-tk.releaseA:
			return outcome
		case <-ctx.Done():
			tk.cancelledA <- context.Cause(ctx)
			return context.Cause(ctx)
		}
	})
	tk.a.start(t)
	var err error
	tk.id, err = tk.a.q.Enqueue(context.Background(), SendEmail{To: "x"}, nil)
	require.NoError(t, err)
	require.Equal(t, 1, tk.a.ev.wait(t, EventStarted, tk.id, 1).Attempt)

	tk.b = tk.a.peer(t, DefaultVisibilityTimeout+time.Second)
	Register(tk.b.q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		select {
		case <-tk.releaseB:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
	tk.b.start(t)
	require.Equal(t, 2, tk.b.ev.wait(t, EventStarted, tk.id, 1).Attempt, "b takes the job over")
	return tk
}

// requireHeldByB checks that the job is still b's: running, attempt 2, no
// failed attempt in its history.
func (tk *takeover) requireHeldByB(t *testing.T) {
	t.Helper()
	j, err := tk.b.q.Job(context.Background(), tk.id)
	require.NoError(t, err, "the stale worker's write removed the new owner's job")
	require.Equal(t, StateRunning, j.State, "the stale worker's write changed the new owner's job")
	require.Equal(t, 2, j.Attempt)
	require.Empty(t, j.Attempts, "the stale worker's failure entered the job's history")
}
