package litequeue_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/pgtest"
	"github.com/litequeue/litequeue/postgres"
)

// TestPostgresASecondProcessGetsItsShareOfABacklogTheFirstIsDraining runs
// testFairShare on PostgreSQL. Not on SQLite: there the two queues' writers
// take turns at the file's write lock through its busy timeout, which is not
// fair under load (under -race one queue ran 2% or 98% of the jobs), so the
// split measures the lock, not the claim-ahead.
func TestPostgresASecondProcessGetsItsShareOfABacklogTheFirstIsDraining(t *testing.T) {
	t.Parallel() // a database of its own; the waits overlap the SQLite tests
	testFairShare(t, conformanceBackend{
		Fresh: func(t *testing.T) string {
			u, _ := pgtest.FreshSchema(t)
			return u
		},
		Open: func(t *testing.T, u string, opts *litequeue.Options) (*litequeue.Queue, error) {
			return postgres.Open(context.Background(), u, opts)
		},
	})
}

// fairShareBound is how far the second queue's share of the jobs left when
// it starts may fall short of its share of the handler slots: 10 points.
const fairShareBound = 0.10

// Two queues on one database, as two processes: a small one (2 handler
// slots) drains a backlog alone until its claims follow its handlers'
// rate, then a large one (8 slots) starts. From the large one's first job
// on, it runs at least its share of the jobs left, 80% as the slots split,
// less fairShareBound: the small one holds claimed ahead only what its handlers
// start in a short horizon (prefetch.go), not a large batch the large one's
// free handlers cannot take. Every handler takes 2ms of real time, and the
// queues read the real clock: the split is a matter of rates.
func testFairShare(t *testing.T, b conformanceBackend) {
	const jobs, slotsA, slotsB, warm = 1600, 2, 8, 100
	addr := b.Fresh(t)
	var doneA, doneB atomic.Int64
	var atStart atomic.Int64 // doneA when the second queue's first job starts
	atStart.Store(-1)
	mk := func(slots int, done *atomic.Int64) *Harness {
		h := open(t, b, addr, Start, func(o *litequeue.Options) {
			o.Clock = clock.New() // the claim-ahead follows real handler rates
			o.Queues = []litequeue.QueueConfig{{Name: litequeue.DefaultQueue, Concurrency: slots}}
		})
		litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
			if done == &doneB {
				atStart.CompareAndSwap(-1, doneA.Load())
			}
			time.Sleep(2 * time.Millisecond) // a bounded stand-in for a handler's work
			done.Add(1)
			return nil
		})
		return h
	}
	a, bq := mk(slotsA, &doneA), mk(slotsB, &doneB)
	items := make([]litequeue.BatchItem, jobs)
	for i := range items {
		items[i] = litequeue.BatchItem{Job: Email{To: "x"}}
	}
	_, err := a.Q.EnqueueBatch(context.Background(), items)
	require.NoError(t, err)

	a.start(t)
	waitFor(t, "the first queue to finish its warm-up jobs", func() bool { return doneA.Load() >= warm })
	bq.start(t)
	waitFor(t, "every job to finish", func() bool { return doneA.Load()+doneB.Load() >= jobs })

	left := float64(jobs - atStart.Load())
	share := float64(doneB.Load()) / left
	t.Logf("jobs left when the second queue started: %.0f; the second ran %d (%.0f%%), the first %d",
		left, doneB.Load(), 100*share, doneA.Load()-atStart.Load())
	require.GreaterOrEqual(t, share, float64(slotsB)/(slotsA+slotsB)-fairShareBound,
		"the second queue's share of the jobs left when it started")
}
