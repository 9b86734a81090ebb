package litequeue

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/litequeue/litequeue/internal/benchjob"
	"github.com/litequeue/litequeue/internal/store"
)

// Micro-benchmarks of the hot paths, on real files in b.TempDir() with the
// real clock. Each reports ns/op per job, so a regression shows up in
//
//	go test -run '^$' -bench . -benchtime 2000x
//
// The durable variants (sync=FULL, the default) mostly measure the disk's
// fsync; the sync=NORMAL variants measure the queue's own CPU cost.
// cmd/lqbench measures whole scenarios against the peer queues.

type benchJob = benchjob.Job

func newBenchJob(i int) benchJob { return benchjob.New(i, "") }

var benchDurabilities = []struct {
	name string
	d    Durability
}{{"sync=FULL", DurabilityFull}, {"sync=NORMAL", DurabilityProcess}}

func openBench(b *testing.B, d Durability, onEvent func(Event)) *Queue {
	b.Helper()
	q, err := Open(filepath.Join(b.TempDir(), "bench.db"), &Options{Durability: d, OnEvent: onEvent})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := q.Close(); err != nil {
			b.Error(err)
		}
	})
	return q
}

// fill enqueues n jobs in batches of 1000, untimed.
func fill(b *testing.B, q *Queue, n int) {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	for from := 0; from < n; from += 1000 {
		items := make([]BatchItem, 0, 1000)
		for i := from; i < min(from+1000, n); i++ {
			items = append(items, BatchItem{Job: newBenchJob(i)})
		}
		if _, err := q.EnqueueBatch(context.Background(), items); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEnqueue is one Enqueue call (one commit) per job, one caller.
func BenchmarkEnqueue(b *testing.B) {
	for _, d := range benchDurabilities {
		b.Run(d.name, func(b *testing.B) {
			q := openBench(b, d.d, nil)
			ctx := context.Background()
			i := 0
			for b.Loop() {
				if _, err := q.Enqueue(ctx, newBenchJob(i), nil); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkEnqueueParallel is one Enqueue call per job from 16 goroutines
// per CPU: the group commit shares each fsync among the waiting callers.
func BenchmarkEnqueueParallel(b *testing.B) {
	for _, d := range benchDurabilities {
		b.Run(d.name, func(b *testing.B) {
			q := openBench(b, d.d, nil)
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for i := 0; pb.Next(); i++ {
					if _, err := q.Enqueue(ctx, newBenchJob(i), nil); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkEnqueueBatch is EnqueueBatch of 1000 jobs; ns/op is per job.
func BenchmarkEnqueueBatch(b *testing.B) {
	const size = 1000
	for _, d := range benchDurabilities {
		b.Run(d.name, func(b *testing.B) {
			q := openBench(b, d.d, nil)
			ctx := context.Background()
			items := make([]BatchItem, size)
			for i := range items {
				items[i] = BatchItem{Job: newBenchJob(i)}
			}
			n := 0
			for b.Loop() {
				if n%size == 0 {
					if _, err := q.EnqueueBatch(ctx, items); err != nil {
						b.Fatal(err)
					}
				}
				n++
			}
		})
	}
}

// filledPool opens a queue holding b.N due jobs (untimed) and returns its
// pool for the default queue with bench's kind, without dispatcher or
// workers: the benchmark claims by hand.
func filledPool(b *testing.B, d Durability) (*Queue, *pool) {
	q := openBench(b, d, nil)
	fill(b, q, b.N)
	cfg := NewQueueConfig(DefaultQueue).withDefaults()
	return q, testPool(q, cfg, b.N, "bench")
}

// claimAll claims every job of p's queue in claims of ClaimBatch rows and
// returns them.
func claimAll(b *testing.B, p *pool, n int) []*delivery {
	b.Helper()
	ds := make([]*delivery, 0, n)
	for len(ds) < n {
		got, err := p.claim(DefaultClaimBatch)
		if err != nil {
			b.Fatal(err)
		}
		if got == 0 {
			b.Fatalf("claimed %d of %d jobs", len(ds), n)
		}
		for range got {
			ds = append(ds, p.pop(nil))
		}
	}
	return ds
}

// BenchmarkClaimBatch is the claim statement taking DefaultClaimBatch (100)
// due jobs per transaction from a backlog; ns/op is per claimed job.
func BenchmarkClaimBatch(b *testing.B) {
	for _, d := range benchDurabilities {
		b.Run(d.name, func(b *testing.B) {
			_, p := filledPool(b, d.d)
			b.ResetTimer()
			claimAll(b, p, b.N)
		})
	}
}

// BenchmarkCompleteBatch is writing successes of claimed jobs, 100 at a time
// through the writer's asynchronous completion batch (lease-conditional
// DELETE); ns/op is per job.
func BenchmarkCompleteBatch(b *testing.B) {
	for _, d := range benchDurabilities {
		b.Run(d.name, func(b *testing.B) {
			q, p := filledPool(b, d.d)
			b.StopTimer()
			ds := claimAll(b, p, b.N)
			b.StartTimer()
			for len(ds) > 0 {
				chunk := ds[:min(DefaultClaimBatch, len(ds))]
				ds = ds[len(chunk):]
				var wg sync.WaitGroup
				var mu sync.Mutex
				var errs []error
				for _, d := range chunk {
					wg.Add(1)
					q.store.Complete(store.Completion{Lease: store.Lease{ID: d.id, Lease: d.lease}, Notify: func(err error) {
						if err != nil {
							mu.Lock()
							errs = append(errs, err)
							mu.Unlock()
						}
						wg.Done()
					}})
				}
				wg.Wait()
				if len(errs) > 0 {
					b.Fatal(errs[0])
				}
			}
		})
	}
}

// BenchmarkDrain is the whole worker path: b.N queued jobs, 10 handlers that
// decode and return nil, timed until every success is committed.
func BenchmarkDrain(b *testing.B) {
	for _, d := range benchDurabilities {
		b.Run(d.name, func(b *testing.B) {
			var mu sync.Mutex
			succeeded, want := 0, b.N
			done := make(chan struct{})
			q := openBench(b, d.d, func(e Event) {
				switch e.Type {
				case EventSucceeded:
					mu.Lock()
					succeeded++
					if succeeded == want {
						close(done)
					}
					mu.Unlock()
				case EventDead, EventRetrying, EventStale:
					b.Errorf("unexpected event %+v", e)
				}
			})
			Register(q, func(ctx context.Context, d *Delivery[benchJob]) error { return nil })
			fill(b, q, b.N)
			b.ResetTimer()
			if err := q.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			<-done
			b.StopTimer()
			if err := q.Stop(context.Background()); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkClaimBesideScheduledBacklog is one claim that finds a single due
// job next to 100,000 jobs scheduled for later (at the same and at a more
// urgent priority) and to a backlog of another process's kind: the claim must
// not scan the jobs that are not due or not its own, so ns/op stays flat
// however deep those backlogs are.
func BenchmarkClaimBesideScheduledBacklog(b *testing.B) {
	q := openBench(b, DurabilityProcess, nil)
	ctx := context.Background()
	b.StopTimer()
	for from := 0; from < 100_000; from += 1000 {
		items := make([]BatchItem, 0, 1000)
		for i := from; i < from+1000; i++ {
			items = append(items, BatchItem{Job: newBenchJob(i), Options: &EnqueueOptions{Delay: time.Hour, Priority: i % 2 * -1}})
		}
		if _, err := q.EnqueueBatch(ctx, items); err != nil {
			b.Fatal(err)
		}
	}
	cfg := NewQueueConfig(DefaultQueue).withDefaults()
	p := testPool(q, cfg, b.N+1, "bench")
	b.StartTimer()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		if _, err := q.Enqueue(ctx, newBenchJob(i), &EnqueueOptions{Priority: 1}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		got, err := p.claim(DefaultClaimBatch)
		if err != nil || got != 1 {
			b.Fatalf("claimed %d, %v; want 1", got, err)
		}
		p.pop(nil)
		if _, _, err := p.nextDue(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMockClockDay drives one job through a 24-hour retry schedule (25
// attempts an hour apart) on a queue with default Options and a mock clock:
// the real time a test pays for a day of virtual time. The queue sets a
// Clock timer only for what is due, so each hour costs one timer firing and
// the attempt's own writes, not a tick per poll interval.
func BenchmarkMockClockDay(b *testing.B) {
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ev := newEvents()
	q, err := Open(filepath.Join(b.TempDir(), "q.db"), &Options{Clock: mock, OnEvent: ev.add,
		Queues: []QueueConfig{{Name: DefaultQueue, Retry: FixedRetry(25, time.Hour)}}})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	Register(q, func(ctx context.Context, d *Delivery[SendEmail]) error {
		if d.Attempt < 25 {
			return errors.New("not yet")
		}
		return nil
	})
	if err := q.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		id, err := q.Enqueue(context.Background(), SendEmail{To: "x"}, nil)
		if err != nil {
			b.Fatal(err)
		}
		for i := 1; i < 25; i++ {
			ev.wait(b, EventRetrying, id, i)
			mock.Add(time.Hour)
		}
		ev.wait(b, EventSucceeded, id, 1)
	}
}

// BenchmarkHandOff is one job from Enqueue to its handler on an idle queue:
// the enqueue's own transaction claims the job and hands it to the waiting
// worker (the idle-latency path of lqbench's scenario D). The sync=NORMAL
// variant measures the queue's own cost without the disk's fsync.
func BenchmarkHandOff(b *testing.B) {
	for _, d := range benchDurabilities {
		b.Run(d.name, func(b *testing.B) {
			q := openBench(b, d.d, nil)
			started := make(chan struct{})
			Register(q, func(ctx context.Context, d *Delivery[benchJob]) error {
				started <- struct{}{}
				return nil
			})
			ctx := context.Background()
			if err := q.Start(ctx); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := q.Enqueue(ctx, newBenchJob(i), nil); err != nil {
					b.Fatal(err)
				}
				<-started
			}
			b.StopTimer()
			if err := q.Stop(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}
