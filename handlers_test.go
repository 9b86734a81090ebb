package litequeue

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"
)

// Handlers that misbehave: the queue keeps working, Stop returns within its
// context, nothing is lost.

type Step struct {
	N     int  `json:"n"`
	Panic bool `json:"panic,omitempty"`
}

func (Step) Kind() string { return "step" }

func TestPanickingHandlerFailsOnlyItsJob(t *testing.T) {
	h := setup(t, nil)
	Register(h.q, func(ctx context.Context, d *Delivery[Step]) error {
		if d.Job.Panic {
			panic("boom")
		}
		return nil
	})
	h.start(t)
	bad, err := h.q.Enqueue(context.Background(), Step{Panic: true}, nil)
	require.NoError(t, err)
	var good []int64
	for i := range 20 {
		id, err := h.q.Enqueue(context.Background(), Step{N: i}, nil)
		require.NoError(t, err)
		good = append(good, id)
	}
	ev := h.ev.wait(t, EventDead, bad, 1)
	var pe *PanicError
	require.ErrorAs(t, ev.Err, &pe)
	require.Equal(t, "boom", pe.Value)
	for _, id := range good {
		h.ev.wait(t, EventSucceeded, id, 1)
	}
	j, err := h.q.DeadLetter(context.Background(), bad)
	require.NoError(t, err)
	require.Contains(t, j.LastError, "handler panicked: boom")
}

func TestHandlerIgnoringItsContextDoesNotHoldUpStop(t *testing.T) {
	h := setup(t, nil)
	unblock := make(chan struct{})
	t.Cleanup(func() { close(unblock) })
	Register(h.q, func(ctx context.Context, d *Delivery[Step]) error {
		<-unblock // ignores ctx
		return nil
	})
	require.NoError(t, h.q.Start(context.Background()))
	id, err := h.q.Enqueue(context.Background(), Step{}, nil)
	require.NoError(t, err)
	h.ev.wait(t, EventStarted, id, 1)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- h.q.Stop(ctx) }()
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(waitLimit):
		t.Fatal("Stop did not return after its context ended")
	}
	h.ev.wait(t, EventReleased, id, 1)
	j, err := h.q.Job(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, StateReady, j.State, "released at once")
	require.Equal(t, 0, j.Attempt, "a release by Stop uses no attempt")

	// A restart runs it; the stuck handler's result, whenever it comes, is
	// dropped.
	h.reopen(t)
	Register(h.q, func(ctx context.Context, d *Delivery[Step]) error { return nil })
	h.start(t)
	h.ev.wait(t, EventSucceeded, id, 1)
	require.Equal(t, 1, h.ev.count(EventSucceeded, id))
}

func TestResultAfterLeaseTakeoverIsDropped(t *testing.T) {
	for _, outcome := range []error{nil, errors.New("late failure")} {
		name := "success"
		if outcome != nil {
			name = "failure"
		}
		t.Run(name, func(t *testing.T) {
			// Two queues on one file, as two processes: A's clock stands
			// still, so A never extends its lease; B's runs past it.
			retry := []QueueConfig{{Name: DefaultQueue, Retry: FixedRetry(3, 0)}}
			a := setup(t, func(o *Options) { o.Queues = retry })
			release := make(chan struct{})
			Register(a.q, func(ctx context.Context, d *Delivery[Step]) error {
				<-release
				return outcome
			})
			a.start(t)
			id, err := a.q.Enqueue(context.Background(), Step{}, nil)
			require.NoError(t, err)
			a.ev.wait(t, EventStarted, id, 1)

			bClock := clock.NewMock()
			// B starts once A's lease has lapsed on B's clock: its first
			// claim takes the job over.
			bClock.Set(a.clock.Now().Add(DefaultVisibilityTimeout + time.Second))
			bEv := newEvents()
			b, err := Open(a.path, &Options{Clock: bClock, Rand: rand.New(rand.NewPCG(3, 4)), OnEvent: bEv.add, PollInterval: -1, Queues: retry})
			require.NoError(t, err)
			Register(b, func(ctx context.Context, d *Delivery[Step]) error { return nil })
			require.NoError(t, b.Start(context.Background()))
			bEv.wait(t, EventSucceeded, id, 1)
			require.Equal(t, 2, bEv.wait(t, EventSucceeded, id, 1).Attempt)
			require.NoError(t, b.Close())

			close(release)
			a.ev.wait(t, EventStale, id, 1)
			require.Zero(t, a.ev.count(EventSucceeded, id))
			require.Zero(t, a.ev.count(EventRetrying, id)+a.ev.count(EventDead, id))
			_, err = a.q.Job(context.Background(), id)
			require.ErrorIs(t, err, ErrNotFound, "B's success stands")
		})
	}
}

type Tree struct {
	Depth int `json:"depth"`
}

func (Tree) Kind() string { return "tree" }

func TestHandlersEnqueueOnTheirOwnQueue(t *testing.T) {
	h := setup(t, func(o *Options) { o.Queues = []QueueConfig{{Name: DefaultQueue, Concurrency: 3}} })
	var q *Queue = h.q
	Register(q, func(ctx context.Context, d *Delivery[Tree]) error {
		if d.Job.Depth == 0 {
			return nil
		}
		_, err := q.Enqueue(ctx, Tree{Depth: d.Job.Depth - 1}, nil)
		if err != nil {
			return err
		}
		_, err = q.EnqueueBatch(ctx, []BatchItem{{Job: Tree{Depth: d.Job.Depth - 1}}})
		return err
	})
	h.start(t)
	_, err := q.Enqueue(context.Background(), Tree{Depth: 7}, nil)
	require.NoError(t, err)
	const total = 1<<8 - 1
	h.ev.wait(t, EventSucceeded, 0, total)
	require.Zero(t, h.ev.count(EventRetrying, 0)+h.ev.count(EventDead, 0)+h.ev.count(EventStale, 0))
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	require.NoError(t, q.Stop(ctx))
	require.Equal(t, total, h.ev.count(EventEnqueued, 0))
}

// Enqueue edge cases: each has a defined, documented behaviour.

type Shaped struct {
	To int `json:"to"` // SendEmail's To is a string
}

func (Shaped) Kind() string { return SendEmail{}.Kind() }

type Named struct {
	K, Q string
}

func (n Named) Kind() string      { return n.K }
func (n Named) QueueName() string { return n.Q }

type Unencodable struct {
	F func() `json:"f"`
}

func (Unencodable) Kind() string { return "unencodable" }

func TestPayloadThatDoesNotDecodeIsADeadLetterWithoutRunning(t *testing.T) {
	h := setup(t, func(o *Options) {
		o.Queues = []QueueConfig{{Name: DefaultQueue, Retry: ExponentialRetry(5)}}
	})
	var ran atomic.Int32
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error { ran.Add(1); return nil })
	h.start(t)
	id, err := h.q.Enqueue(context.Background(), Shaped{To: 5}, nil)
	require.NoError(t, err)
	ev := h.ev.wait(t, EventDead, id, 1)
	require.Equal(t, DecisionPermanent, ev.Decision, "a retry cannot fix a payload")
	require.Zero(t, ran.Load())
	j, err := h.q.DeadLetter(context.Background(), id)
	require.NoError(t, err)
	require.Contains(t, j.LastError, "does not decode")
	require.JSONEq(t, `{"to":5}`, string(j.Payload), "the payload is kept as it was")
}

func TestEnqueueRejectsInvalidJobsAndWritesNothing(t *testing.T) {
	h := setup(t, func(o *Options) { o.MaxPayloadBytes = 1024 })
	ctx := context.Background()
	long := strings.Repeat("k", MaxNameLen+1)
	for name, c := range map[string]struct {
		job  Job
		opts *EnqueueOptions
		msg  string
	}{
		"nil job":              {nil, nil, "nil job"},
		"empty kind":           {Named{K: "", Q: "q"}, nil, "empty kind"},
		"overlong kind":        {Named{K: long, Q: "q"}, nil, "longer than 128"},
		"control char in kind": {Named{K: "a\nb", Q: "q"}, nil, "control"},
		"invalid UTF-8 kind":   {Named{K: "a\xffb", Q: "q"}, nil, "UTF-8"},
		"empty queue name":     {Named{K: "k", Q: ""}, nil, "empty queue"},
		"overlong queue name":  {Named{K: "k", Q: "q"}, &EnqueueOptions{Queue: long}, "longer than 128"},
		"overlong key":         {SendEmail{}, &EnqueueOptions{Key: strings.Repeat("k", MaxKeyLen+1)}, "key"},
		"negative delay":       {SendEmail{}, &EnqueueOptions{Delay: -time.Second}, "negative delay"},
		"delay and RunAt":      {SendEmail{}, &EnqueueOptions{Delay: time.Second, RunAt: time.Now()}, "both"},
		"RunAt before 1678":    {SendEmail{}, &EnqueueOptions{RunAt: time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)}, "1678"},
		"RunAt after 2262":     {SendEmail{}, &EnqueueOptions{RunAt: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}, "2262"},
		"delay past 2262":      {SendEmail{}, &EnqueueOptions{Delay: 1<<63 - 1}, "2262"},
		"payload over limit":   {SendEmail{To: strings.Repeat("x", 1024)}, nil, "MaxPayloadBytes"},
		"not JSON-encodable":   {Unencodable{F: func() {}}, nil, "JSON"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := h.q.Enqueue(ctx, c.job, c.opts)
			require.ErrorIs(t, err, ErrInvalidJob)
			require.ErrorContains(t, err, c.msg)
			_, err = h.q.EnqueueBatch(ctx, []BatchItem{{Job: SendEmail{}}, {Job: c.job, Options: c.opts}})
			require.ErrorIs(t, err, ErrInvalidJob)
			require.ErrorContains(t, err, "batch item 1")
		})
	}
	jobs, err := h.q.Jobs(ctx, JobFilter{Limit: -1})
	require.NoError(t, err)
	require.Empty(t, jobs, "a rejected job or batch wrote something")

	// The limits are inclusive.
	_, err = h.q.Enqueue(ctx, Named{K: strings.Repeat("k", MaxNameLen), Q: strings.Repeat("q", MaxNameLen)}, nil)
	require.NoError(t, err)
	exact := SendEmail{To: strings.Repeat("x", 1024-len(`{"to":""}`))}
	_, err = h.q.Enqueue(ctx, exact, nil)
	require.NoError(t, err, "a payload of exactly MaxPayloadBytes is accepted")
}

func TestNegativeMaxPayloadBytesMeansNoLimit(t *testing.T) {
	h := setup(t, func(o *Options) { o.MaxPayloadBytes = -1 })
	_, err := h.q.Enqueue(context.Background(), SendEmail{To: strings.Repeat("x", 2*DefaultMaxPayloadBytes)}, nil)
	require.NoError(t, err)
}

func TestDefaultPayloadLimitIsOneMiB(t *testing.T) {
	h := setup(t, nil)
	_, err := h.q.Enqueue(context.Background(), SendEmail{To: strings.Repeat("x", DefaultMaxPayloadBytes)}, nil)
	require.ErrorIs(t, err, ErrInvalidJob)
}

func TestRunAtFarInThePastRunsAtOnceAheadOfLaterJobs(t *testing.T) {
	h := setup(t, func(o *Options) { o.Queues = []QueueConfig{{Name: DefaultQueue, Concurrency: 1}} })
	var order []int
	Register(h.q, func(ctx context.Context, d *Delivery[Step]) error { order = append(order, d.Job.N); return nil })
	ctx := context.Background()
	_, err := h.q.Enqueue(ctx, Step{N: 1}, nil)
	require.NoError(t, err)
	old, err := h.q.Enqueue(ctx, Step{N: 2}, &EnqueueOptions{RunAt: time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC)})
	require.NoError(t, err)
	j, err := h.q.Job(ctx, old)
	require.NoError(t, err)
	require.Equal(t, StateReady, j.State)
	h.start(t)
	h.ev.wait(t, EventSucceeded, 0, 2)
	require.Equal(t, []int{2, 1}, order, "due time orders ready jobs of one priority")
}

func TestRunAtFarInTheFutureWaitsForIt(t *testing.T) {
	h := setup(t, nil)
	Register(h.q, func(ctx context.Context, d *Delivery[Step]) error { return nil })
	h.start(t)
	at := time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
	id, err := h.q.Enqueue(context.Background(), Step{}, &EnqueueOptions{RunAt: at})
	require.NoError(t, err)
	stats, err := h.q.Stats(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, stats[0].Scheduled)
	require.True(t, stats[0].NextDue.Equal(at))
	// (The mock clock cannot be moved 174 years: it would fire every tick of
	// the lease extender's ticker on the way.)
	h.clock.Add(time.Hour)
	require.Zero(t, h.ev.count(EventStarted, id))
	j, err := h.q.Job(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, StateScheduled, j.State)
	require.True(t, j.VisibleAt.Equal(at))
}
