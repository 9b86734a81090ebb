package litequeue

import (
	"context"
	"slices"
	"time"
)

// Maintenance: lease extension while handlers run, and the cleanup of
// retained completed jobs.

// extendLeases pushes the leases of p's claimed jobs forward every third of
// the visibility timeout while p holds any, until every handler has returned
// or been released (also during a graceful Stop). A job whose lease was lost
// before its outcome has its handler's context cancelled with ErrLeaseLost
// and its result dropped (see stopLost). With nothing claimed it sets no timer: the claim that makes p
// busy sets the extension alarm, before any handler of it starts.
func (p *pool) extendLeases() {
	defer p.r.keep.Done()
	defer p.ext.stop()
	for {
		select {
		case <-p.r.settled:
			return
		case <-p.ext.C:
		}
		// The next round's alarm is set before this round writes, so a
		// test that sees the extension and then moves a mock clock always
		// finds it set.
		p.mu.Lock()
		busy := len(p.inflight) > 0
		p.mu.Unlock()
		if busy {
			p.ext.set(p.q.clock.Now().Add(p.extendPeriod()), true)
		}
		p.extend()
	}
}

// extendPeriod is how often the leases of claimed jobs are extended: every
// third of the visibility timeout.
func (p *pool) extendPeriod() time.Duration {
	return max(p.cfg.VisibilityTimeout/3, time.Millisecond)
}

// extend pushes the lease of every claimed job of p forward by the
// visibility timeout.
func (p *pool) extend() {
	p.rewrite() // a kept outcome written now needs no extension
	ds := slices.DeleteFunc(p.claimed(), func(d *delivery) bool { return !d.holdsLease() })
	if len(ds) == 0 {
		return
	}
	until := addClamped(p.q.clock.Now(), p.cfg.VisibilityTimeout)
	lostIdx, err := p.q.store.Extend(context.Background(), leasesOf(ds), until)
	if err != nil {
		p.q.log.Error("litequeue: extending leases failed", LogQueue, p.cfg.Name, LogError, err.Error())
		return
	}
	lost := make([]*delivery, len(lostIdx))
	for i, k := range lostIdx {
		lost[i] = ds[k]
	}
	for i, d := range ds {
		if !slices.Contains(lostIdx, i) { // lost leases are rare: lostIdx is short
			d.until.Store(until)
		}
	}
	p.stopLost(lost) // cancelled jobs (control.go) and lost leases
}

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
func (q *Queue) noteRetained(at int64) {
	q.cleanup.set(time.Unix(0, addClamped(time.Unix(0, at), q.opts.CompletedRetention)), true)
}
