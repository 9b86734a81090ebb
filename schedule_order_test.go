package litequeue

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A job a schedule enqueues reports EventEnqueued before its EventStarted,
// like a job of Enqueue, though busy workers (ten, kept claiming by two
// producers) may claim it the moment the scheduler's write commits. The
// producers hold a token per job of theirs not yet run, so the schedules'
// jobs wait behind at most backlog others however slow the machine is.
func TestScheduledJobIsEnqueuedBeforeItStarts(t *testing.T) {
	var mu sync.Mutex
	enqueued, started := map[int64]int{}, map[int64]int{}
	seq := 0
	h := setup(t, func(o *Options) {
		o.Queues = []QueueConfig{{Name: "ticks", Concurrency: 10}}
		o.OnEvent = func(e Event) {
			mu.Lock()
			defer mu.Unlock()
			seq++
			switch e.Type {
			case EventEnqueued:
				enqueued[e.JobID] = seq
			case EventStarted:
				if _, ok := started[e.JobID]; !ok {
					started[e.JobID] = seq
				}
			}
		}
	})
	ctx := context.Background()
	const schedules, rounds, backlog = 20, 3, 30
	tokens := make(chan struct{}, backlog) // one per producer job not yet run
	ranWake, drained := newWake(), newWake()
	var ran atomic.Int64 // jobs of the schedules run
	Register(h.q, func(ctx context.Context, d *Delivery[Tick]) error {
		if d.Job.Of == "schedule" {
			ran.Add(1)
			ranWake.notify()
			return nil
		}
		// Real time on purpose: the job's work, which keeps the workers'
		// slots taken, so that enqueues wake the dispatcher instead of
		// handing their job to an idle worker. Nothing waits on it.
		time.Sleep(time.Millisecond)
		select {
		case <-tokens:
		default:
		}
		drained.notify()
		return nil
	})
	for i := range schedules {
		_, err := h.q.RegisterSchedule(ctx, Schedule{Name: fmt.Sprintf("s%d", i), Every: time.Minute, Job: Tick{Of: "schedule"}})
		require.NoError(t, err)
	}
	h.start(t)
	stop := make(chan struct{})
	var producers sync.WaitGroup
	var produced atomic.Int64
	for range 2 {
		producers.Add(1)
		go func() { // keeps the dispatchers claiming
			defer producers.Done()
			for {
				select {
				case <-stop:
					return
				case tokens <- struct{}{}:
				}
				if _, err := h.q.Enqueue(ctx, Tick{Of: "producer"}, nil); err != nil {
					t.Error(err)
					return
				}
				produced.Add(1)
			}
		}()
	}
	for r := range rounds {
		h.tc.stepTo(t, h.clock.Now().Add(time.Minute))
		want := int64(schedules * (r + 1))
		ranWake.until(t, fmt.Sprintf("round %d's %d jobs of the schedules ran", r, schedules),
			func() bool { return ran.Load() >= want })
	}
	close(stop)
	producers.Wait()
	drained.until(t, "the producers' jobs ran", func() bool { return len(tokens) == 0 })
	require.NoError(t, h.q.FlushEvents(ctx))
	mu.Lock()
	defer mu.Unlock()
	late := 0
	for id, at := range started {
		if e, ok := enqueued[id]; !ok || e > at {
			late++
		}
	}
	require.Greater(t, len(started), schedules*rounds, "the schedules fired (%d jobs produced besides)", produced.Load())
	require.Len(t, started, len(enqueued), "every job enqueued started")
	require.Zero(t, late, "jobs that reported started before enqueued, of %d", len(started))
}
