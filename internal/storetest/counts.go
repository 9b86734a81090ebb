package storetest

import (
	"database/sql"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/litequeue/litequeue/internal/store"
	"github.com/stretchr/testify/require"
)

// Stats answers what counting the rows answers, after any sequence of
// writes: a seeded random run of every operation that adds, moves or
// removes rows — inserts (batches, keys, unique jobs that replace), claims
// (and reclaims of lapsed leases), successes kept or deleted, retries,
// burials, releases, snoozes, cancels, requeues, purges, bulk operations,
// the application's transactions — on three queues, two kinds and two
// priorities, with Stats compared to a COUNT(*) GROUP BY of the table after
// every step (also when the step failed).
func testStatsExact(t *testing.T, e *env) {
	if e.b.DB == nil {
		t.Skip("the backend gives the suite no database/sql handle (Backend.DB)")
	}
	db := e.b.DB(t, e.where)
	seed := uint64(20261205)
	rng := rand.New(rand.NewPCG(seed, seed))
	queues, kinds := []string{"a", "b", "c"}, []string{"k", "x"}
	// Times in nanoseconds of this century, steps of 100 ms: scheduled jobs
	// and the clock's moves span several of a store's due buckets (the
	// SQLite store counts pending rows per 2^38 ns).
	const unit = int64(100 * time.Millisecond)
	now := time.Date(2026, 12, 5, 13, 0, 0, 0, time.UTC).UnixNano()
	var held []store.Lease   // leases of claimed jobs, some lost since
	var ids []int64          // every id ever inserted
	flows := map[int64]int{} // the flow marks of workflow jobs (store.MetaDoc.Flow)
	nextLease := int64(1)
	pick := func() int64 {
		if len(ids) == 0 {
			return 1
		}
		return ids[rng.IntN(len(ids))]
	}
	takeHeld := func() (store.Lease, bool) {
		if len(held) == 0 {
			return store.Lease{}, false
		}
		i := rng.IntN(len(held))
		l := held[i]
		held = slices.Delete(held, i, i+1)
		return l, true
	}
	newJob := func() store.NewJob {
		due := now - int64(rng.IntN(100))*unit
		if rng.IntN(4) == 0 {
			due = now + 1 + int64(rng.IntN(5000))*unit // scheduled
		}
		j := job(queues[rng.IntN(3)], kinds[rng.IntN(2)], rng.IntN(2), due)
		switch rng.IntN(6) {
		case 0:
			j.Key = fmt.Sprintf("key-%d", rng.IntN(20))
		case 1:
			j.Unique = &store.Unique{Key: fmt.Sprintf("u-%d", rng.IntN(10)), States: 0b11, Replace: rng.IntN(2) == 0}
		}
		return j
	}
	ops := []struct {
		name string
		do   func() error
	}{
		{"insert", func() error {
			jobs := make([]store.NewJob, 1+rng.IntN(12))
			for i := range jobs {
				jobs[i] = newJob()
			}
			got, _, err := e.s.Insert(e.ctx, store.Tx{}, jobs)
			for _, id := range got {
				if id != 0 {
					ids = append(ids, id)
				}
			}
			return err
		}},
		{"insert a workflow", func() error {
			// A chain of 2 to 4 jobs, each after the one before, needing
			// its success or (one in three) after any outcome.
			n := 2 + rng.IntN(3)
			jobs := make([]store.NewJob, n)
			var edges []store.Edge
			for i := range jobs {
				jobs[i] = newJob()
				jobs[i].Key, jobs[i].Unique = "", nil
				if i > 0 {
					jobs[i].Waits = 1
					edges = append(edges, store.Edge{Child: i, Parent: i - 1, Mode: int8(rng.IntN(3) / 2)})
				}
			}
			got, err := e.s.InsertFlow(e.ctx, store.Tx{}, jobs, edges)
			for i, id := range got {
				ids = append(ids, id)
				f := 0
				if i > 0 {
					f |= store.FlowChild
				}
				if i < n-1 {
					f |= store.FlowParent
				}
				flows[id] = f
			}
			return err
		}},
		{"insert in the application's transaction", func() error {
			tx, err := db.BeginTx(e.ctx, nil)
			if err != nil {
				return err
			}
			got, _, err := e.s.Insert(e.ctx, store.SQLTx(tx), []store.NewJob{newJob(), newJob(), newJob()})
			if err != nil || rng.IntN(3) == 0 {
				return errors.Join(err, tx.Rollback())
			}
			ids = append(ids, got...)
			return tx.Commit()
		}},
		{"insert and claim", func() error {
			j := newJob()
			j.VisibleAt, j.Key, j.Unique = now, "", nil
			q := claimQuery(j.Queue, j.Kind, 1, now, now+50*unit, nextLease)
			nextLease++
			id, err := e.s.InsertClaim(e.ctx, j, q, func(cs []store.Claimed) {
				for _, c := range cs {
					held = append(held, store.Lease{ID: c.ID, Lease: q.Lease})
				}
			})
			if id != 0 {
				ids = append(ids, id)
			}
			return err
		}},
		{"claim", func() error {
			q := claimQuery(queues[rng.IntN(3)], kinds[rng.IntN(2)], 1+rng.IntN(8), now, now+50*unit, nextLease)
			nextLease++
			_, err := e.s.Claim(e.ctx, q, func(cs []store.Claimed) {
				for _, c := range cs {
					held = append(held, store.Lease{ID: c.ID, Lease: q.Lease})
				}
			})
			return err
		}},
		{"complete", func() error {
			keep := rng.IntN(2) == 0
			var cs []store.Completion
			for range 1 + rng.IntN(4) {
				if l, ok := takeHeld(); ok {
					cs = append(cs, store.Completion{Lease: l, At: now, Keep: keep, Flow: flows[l.ID]})
				}
			}
			done := make(chan error, len(cs))
			for _, c := range cs {
				c.Notify = func(err error) { done <- err }
				e.s.Complete(c)
			}
			if err := e.s.Flush(e.ctx); err != nil {
				return err
			}
			var errs []error
			for range cs {
				if err := <-done; !errors.Is(err, store.ErrLeaseLost) {
					errs = append(errs, err)
				}
			}
			return errors.Join(errs...)
		}},
		{"complete in the application's transaction", func() error {
			l, ok := takeHeld()
			if !ok {
				return nil
			}
			tx, err := db.BeginTx(e.ctx, nil)
			if err != nil {
				return err
			}
			keepAt := int64(0)
			if rng.IntN(2) == 0 {
				keepAt = now
			}
			if err := e.s.CompleteTx(e.ctx, store.SQLTx(tx), l, keepAt); err != nil {
				return errors.Join(err, tx.Rollback())
			}
			return tx.Commit()
		}},
		{"retry", func() error {
			l, ok := takeHeld()
			if !ok {
				return nil
			}
			return e.s.Retry(e.ctx, store.Retry{Lease: l, Due: now + int64(rng.IntN(200))*unit, LastError: "boom",
				Record: store.Attempt{Attempt: 1, StartedAt: now, FinishedAt: now, Error: "boom", Decision: "retry"}})
		}},
		{"bury", func() error {
			l, ok := takeHeld()
			if !ok {
				return nil
			}
			msg := "fatal"
			b := store.Burial{Lease: l, At: now, Reason: "failed", LastError: &msg, Flow: flows[l.ID],
				Record: store.Attempt{Attempt: 1, StartedAt: now, FinishedAt: now, Error: msg, Decision: "dead"}}
			if rng.IntN(3) == 0 {
				f := newJob()
				b.FollowUp = &f
			}
			return e.s.Bury(e.ctx, b)
		}},
		{"release", func() error {
			l, ok := takeHeld()
			if !ok {
				return nil
			}
			return e.s.Release(e.ctx, []store.Lease{l}, now)
		}},
		{"snooze", func() error {
			l, ok := takeHeld()
			if !ok {
				return nil
			}
			return e.s.Snooze(e.ctx, store.Snooze{Lease: l, Due: now + int64(rng.IntN(300))*unit, Max: 2,
				Record: store.Attempt{Attempt: 1, StartedAt: now, FinishedAt: now, Decision: "snooze"}})
		}},
		{"cancel", func() error {
			_, err := e.s.Cancel(e.ctx, []int64{pick(), pick()}, now, nil)
			return err
		}},
		{"requeue", func() error {
			_, err := e.s.Requeue(e.ctx, []int64{pick()}, now)
			return err
		}},
		{"requeue cancelled", func() error {
			_, err := e.s.RequeueCancelled(e.ctx, []int64{pick()}, now)
			return err
		}},
		{"run now", func() error {
			_, err := e.s.RunNow(e.ctx, pick(), now)
			return err
		}},
		{"purge completed", func() error {
			_, err := e.s.PurgeCompleted(e.ctx, now-int64(rng.IntN(300)))
			return err
		}},
		{"expire", func() error {
			x := store.Expiry{State: []store.State{store.Completed, store.Dead, store.Cancelled}[rng.IntN(3)],
				Before: now - int64(rng.IntN(300))*unit, Limit: 1 + rng.IntN(5)}
			if rng.IntN(2) == 0 {
				x.Queues = []string{queues[rng.IntN(3)]}
			}
			_, err := e.s.Expire(e.ctx, x)
			return err
		}},
		{"purge cancelled", func() error {
			_, err := e.s.PurgeCancelled(e.ctx, now-int64(rng.IntN(300)))
			return err
		}},
		{"bulk", func() error {
			op := []store.BulkOp{store.BulkRequeue, store.BulkCancel, store.BulkDelete}[rng.IntN(3)]
			_, err := e.s.Bulk(e.ctx, op, store.JobQuery{Queue: queues[rng.IntN(3)], Now: now}, math.MaxInt64, 1+rng.IntN(10), nil)
			return err
		}},
		{"time passes (leases lapse)", func() error {
			now += int64(1+rng.IntN(600)) * unit
			return nil
		}},
	}
	for step := range 600 {
		op := ops[rng.IntN(len(ops))]
		err := op.do()
		if err != nil {
			var dup *store.DuplicateError
			var ue *store.UniqueError
			require.True(t, errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrWrongState) ||
				errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrSnoozeLimit) ||
				errors.As(err, &dup) || errors.As(err, &ue), "step %d (%s): %v", step, op.name, err)
		}
		requireStatsCounted(t, e, db, now, fmt.Sprintf("seed %d, step %d (%s)", seed, step, op.name))
	}
}

// requireStatsCounted compares Stats at now with the table's rows counted.
func requireStatsCounted(t *testing.T, e *env, db *sql.DB, now int64, at string) {
	t.Helper()
	got, err := e.s.Stats(e.ctx, now)
	require.NoError(t, err, at)
	rows, err := db.QueryContext(e.ctx, fmt.Sprintf(`SELECT queue,
		count(CASE WHEN state = 0 AND visible_at <= %[1]d THEN 1 END),
		count(CASE WHEN state = 0 AND visible_at > %[1]d THEN 1 END),
		count(CASE WHEN state = 1 THEN 1 END), count(CASE WHEN state = 2 THEN 1 END),
		count(CASE WHEN state = 3 THEN 1 END), count(CASE WHEN state = 4 THEN 1 END), count(CASE WHEN state = 5 THEN 1 END),
		coalesce(min(CASE WHEN state = 0 AND visible_at <= %[1]d THEN visible_at END), 0),
		coalesce(min(CASE WHEN state = 0 AND visible_at > %[1]d THEN visible_at END), 0)
		FROM lq_jobs GROUP BY queue ORDER BY queue`, now))
	require.NoError(t, err, at)
	defer rows.Close()
	want := []store.QueueStats{}
	for rows.Next() {
		var s store.QueueStats
		require.NoError(t, rows.Scan(&s.Queue, &s.Ready, &s.Scheduled, &s.Running, &s.Completed, &s.Dead, &s.Cancelled, &s.Waiting,
			&s.OldestReadySince, &s.NextDue), at)
		want = append(want, s)
	}
	require.NoError(t, rows.Err(), at)
	if got == nil {
		got = []store.QueueStats{}
	}
	require.Equal(t, want, got, at)
}
