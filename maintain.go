package litequeue

import (
	"context"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// Maintenance: the deletion of finished jobs whose retention passed (see
// retention.go). (Leases are extended in lease.go.)

// maintain deletes completed, dead and cancelled jobs when their retention
// (Options, QueueConfig) passes, on the cleanup alarm: set after each
// cleanup for the next expiry of each rule (or, for a rule with nothing
// kept now, one retention later, when a job finished since could expire
// first), and by completions kept for a while (noteRetained). A queue that
// keeps nothing for a while sets no timer. Each deletion is a transaction
// of at most store.ExpireChunk jobs. (Other processes' writes are watched
// by the store: see Store.Watch.)
func (r *runState) maintain() {
	defer r.bg.Done()
	q := r.q
	rules := q.expiryRules()
	if len(rules) == 0 {
		return
	}
	arm := func(now, after time.Time) {
		var next time.Time
		for _, rule := range rules {
			at := addClamped(now, rule.Retention)
			oldest, ok, err := q.store.OldestFinished(context.Background(), rule.Expiry)
			if err != nil {
				q.log.Error("litequeue: finding the next retained job to clean up", LogError, err.Error())
				continue
			}
			if ok {
				at = addClamped(time.Unix(0, oldest), rule.Retention)
			}
			if next.IsZero() || at < next.UnixNano() {
				next = time.Unix(0, at)
			}
		}
		if !next.IsZero() {
			// Expiries closer together than the cleanup interval share a run.
			q.cleanup.set(latest(next, after), true)
		}
	}
	arm(q.clock.Now(), time.Time{})
	for {
		select {
		case <-r.stopping:
			return
		case <-q.cleanup.C:
			now := q.clock.Now()
			for _, rule := range rules {
				if !r.expire(rule, now) {
					return
				}
			}
			arm(now, now.Add(DefaultCleanupInterval))
		}
	}
}

// expire deletes the jobs rule selects that finished more than its
// retention before now, a chunk at a time; false when the run is stopping.
func (r *runState) expire(rule expiryRule, now time.Time) bool {
	q := r.q
	e := rule.Expiry
	e.Before, e.Limit = max(now.UnixNano()-int64(rule.Retention), 0), store.ExpireChunk
	for {
		n, err := q.store.Expire(context.Background(), e)
		if err != nil {
			q.log.Error("litequeue: cleaning up finished jobs", LogError, err.Error())
			return true
		}
		if n < e.Limit {
			return true
		}
		select {
		case <-r.stopping:
			return false
		default:
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
// nanosecond at and kept for retention, unless it is set earlier.
func (c *core) noteRetained(at int64, retention time.Duration) {
	if expires(retention) {
		c.cleanup.set(time.Unix(0, addClamped(time.Unix(0, at), retention)), true)
	}
}

func (c *core) purgeCompletedBefore(ctx context.Context, cutoff int64) (int, error) {
	return c.store.PurgeCompleted(ctx, cutoff)
}
