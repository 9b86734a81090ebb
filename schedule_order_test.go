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
// like a job of Enqueue, though busy workers (ten, kept claiming by a
// producer) may claim it the moment the scheduler's write commits.
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
	var ran atomic.Int64 // jobs of the schedules run
	Register(h.q, func(ctx context.Context, d *Delivery[Tick]) error {
		if d.Job.Of == "schedule" {
			ran.Add(1)
		} else {
			time.Sleep(time.Millisecond) // busy workers: enqueues wake the dispatcher instead of handing off
		}
		return nil
	})
	const schedules, rounds = 20, 3
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
				default:
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
		deadline := time.Now().Add(waitLimit)
		for ran.Load() < int64(schedules*(r+1)) {
			require.True(t, time.Now().Before(deadline), "round %d: %d of the schedules' jobs ran", r, ran.Load())
			time.Sleep(time.Millisecond) // real time: waiting for the workers, the clock stands
		}
	}
	close(stop)
	producers.Wait()
	deadline := time.Now().Add(waitLimit)
	for {
		require.NoError(t, h.q.FlushEvents(ctx))
		mu.Lock()
		n, s := len(enqueued), len(started)
		mu.Unlock()
		if s >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	late := 0
	for id, at := range started {
		if e, ok := enqueued[id]; !ok || e > at {
			late++
		}
	}
	require.Greater(t, len(started), schedules*rounds, "the schedules fired (%d jobs produced besides)", produced.Load())
	require.Zero(t, late, "jobs that reported started before enqueued, of %d", len(started))
}
