package litequeue

import (
	"context"
	"time"
)

// Maintenance: the cleanup of retained completed jobs. (Leases are
// extended in lease.go.)

// maintain deletes retained completed jobs when they expire, on the cleanup
// alarm: set for the next expiry by completions and here after each
// cleanup, so a queue with nothing retained sets no timer. (Other
// processes' writes are watched by the store: see Store.Watch.)
func (r *runState) maintain() {
	defer r.bg.Done()
	q := r.q
	armClean := func(after time.Time) {
		if q.opts.CompletedRetention <= 0 {
			return
		}
		oldestNs, ok, err := q.store.OldestCompleted(context.Background())
		oldest := time.Unix(0, oldestNs)
		if err != nil {
			q.log.Error("litequeue: finding the next retained job to clean up", LogError, err.Error())
			return
		}
		if ok {
			// Expiries closer together than the cleanup interval share a run.
			q.cleanup.set(latest(time.Unix(0, addClamped(oldest, q.opts.CompletedRetention)), after), true)
		}
	}
	armClean(time.Time{})
	for {
		select {
		case <-r.stopping:
			return
		case <-q.cleanup.C:
			now := q.clock.Now()
			cutoff := now.Add(-q.opts.CompletedRetention).UnixNano()
			if _, err := q.purgeCompletedBefore(context.Background(), cutoff); err != nil {
				q.log.Error("litequeue: cleaning up completed jobs", LogError, err.Error())
			}
			armClean(now.Add(DefaultCleanupInterval))
		}
	}
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// noteRetained sets the cleanup alarm for a job completed at the Unix
// nanosecond at and kept for CompletedRetention, unless it is set earlier.
func (c *core) noteRetained(at int64) {
	c.cleanup.set(time.Unix(0, addClamped(time.Unix(0, at), c.opts.CompletedRetention)), true)
}

func (c *core) purgeCompletedBefore(ctx context.Context, cutoff int64) (int, error) {
	return c.store.PurgeCompleted(ctx, cutoff)
}
