package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// Store-level benchmarks of the scenarios of the peer harness, without the
// queue above the store: a floor for lqbench -store postgres.

func benchJobs(n int) []store.NewJob {
	now := time.Now().UnixNano()
	jobs := make([]store.NewJob, n)
	for i := range jobs {
		jobs[i] = store.NewJob{Queue: "default", Kind: "bench", VisibleAt: now, CreatedAt: now,
			Payload: fmt.Appendf(nil, `{"id":%d,"account":"acct_%08d","email":"user%08d@example.com","action":"welcome","amount":%d}`, i, i, i, 1000+i%1000)}
	}
	return jobs
}

// benchEach runs one call per job, sequentially, on a fresh store.
func benchEach(b *testing.B, call func(ctx context.Context, s *pgStore, j store.NewJob, i int) error) {
	s, _, _ := newTestStore(b)
	jobs := benchJobs(b.N)
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		if err := call(ctx, s, jobs[i], i); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkInsertOne(b *testing.B) {
	benchEach(b, func(ctx context.Context, s *pgStore, j store.NewJob, _ int) error {
		_, _, err := s.Insert(ctx, store.Tx{}, []store.NewJob{j})
		return err
	})
}

// BenchmarkInsertTx is the outbox: one job inserted on each application
// transaction (EnqueueTx), which then commits.
func BenchmarkInsertTx(b *testing.B) {
	benchEach(b, func(ctx context.Context, s *pgStore, j store.NewJob, _ int) error {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, _, err := s.Insert(ctx, store.SQLTx(tx), []store.NewJob{j}); err != nil {
			return err
		}
		return tx.Commit()
	})
}

func BenchmarkInsertConcurrent16(b *testing.B) {
	s, _, _ := newTestStore(b)
	jobs := benchJobs(b.N)
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= b.N {
					return
				}
				if _, _, err := s.Insert(ctx, store.Tx{}, jobs[i:i+1]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkInsertBatch(b *testing.B) {
	s, _, _ := newTestStore(b)
	jobs := benchJobs(b.N)
	b.ResetTimer()
	if _, _, err := s.Insert(context.Background(), store.Tx{}, jobs); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkDrain10(b *testing.B) {
	s, _, _ := newTestStore(b)
	ctx := context.Background()
	if _, _, err := s.Insert(ctx, store.Tx{}, benchJobs(b.N)); err != nil {
		b.Fatal(err)
	}
	work := make(chan store.Claimed, 1000)
	var done atomic.Int64
	finished := make(chan struct{})
	var inflight atomic.Int64
	kick := make(chan struct{}, 1)
	b.ResetTimer()
	for range 10 {
		go func() {
			for c := range work {
				s.Complete(store.Completion{Lease: store.Lease{ID: c.ID, Lease: 1}, At: 1, Notify: func(err error) {
					if err != nil {
						b.Error(err)
					}
					if done.Add(1) == int64(b.N) {
						close(finished)
					}
				}})
				inflight.Add(-1)
				select {
				case kick <- struct{}{}:
				default:
				}
			}
		}()
	}
	go func() {
		for done.Load() < int64(b.N) {
			free := 10 + 100 - int(inflight.Load())
			if free <= 0 {
				<-kick
				continue
			}
			now := time.Now().UnixNano()
			n, err := s.Claim(ctx, store.ClaimQuery{Queue: "default", Kinds: []string{"bench"}, N: free, Now: now, Until: now + int64(time.Minute), Lease: 1},
				func(cs []store.Claimed) {
					inflight.Add(int64(len(cs)))
					for _, c := range cs {
						work <- c
					}
				})
			if err != nil {
				b.Error(err)
				return
			}
			if n == 0 {
				select {
				case <-kick:
				case <-finished:
					return
				}
			}
		}
	}()
	<-finished
	b.StopTimer()
	close(work)
}

// BenchmarkInsertClaim is the idle worker's direct hand-off: each enqueue
// claims its own job in the same transaction, and the job completes.
func BenchmarkInsertClaim(b *testing.B) {
	benchEach(b, func(ctx context.Context, s *pgStore, j store.NewJob, i int) error {
		now := time.Now().UnixNano()
		j.VisibleAt, j.CreatedAt = now, now
		var got []store.Claimed
		q := store.ClaimQuery{Queue: j.Queue, Kinds: []string{j.Kind}, N: 1, Now: now, Until: now + int64(time.Minute), Lease: int64(i + 1)}
		if _, err := s.InsertClaim(ctx, j, q, func(cs []store.Claimed) { got = cs }); err != nil {
			return err
		}
		if len(got) != 1 {
			return fmt.Errorf("claimed %d jobs, want 1", len(got))
		}
		s.Complete(store.Completion{Lease: store.Lease{ID: got[0].ID, Lease: q.Lease}, At: now})
		return nil
	})
}
