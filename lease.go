package litequeue

import (
	"context"
	"slices"

	"github.com/litequeue/litequeue/internal/store"
)

// Leases: a pool holds each job it claimed under a lease; it extends those
// leases while the jobs are held, learns from an extension which leases
// were lost (or whose jobs were cancelled) and stops those handlers, and
// gives the leases back without using an attempt on a pause or Stop.

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
	p.stopLost(lost) // cancelled jobs and lost leases
}

// ownLeaseLapsed reports whether a lease p holds ended at or before now:
// running, of a job not yet released; completing, of a job whose success
// is queued but not yet written.
func (p *pool) ownLeaseLapsed(now int64) (running, completing bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for d := range p.inflight {
		if d.holdsLease() && d.until.Load() <= now {
			running = true
			break
		}
	}
	for d := range p.completing {
		if d.until.Load() <= now {
			completing = true
			break
		}
	}
	return running, completing
}

// inflightLease returns p's delivery of l, or nil.
func (p *pool) inflightLease(l store.Lease) *delivery {
	p.mu.Lock()
	defer p.mu.Unlock()
	for d := range p.inflight {
		if d.id == l.ID && d.lease == l.Lease {
			return d
		}
	}
	return nil
}

// stopCancelled stops d, whose job was cancelled: its handler's context is
// cancelled with ErrJobCancelled and its result will be dropped. A delivery
// whose handler returned already is left to its outcome's write.
func (p *pool) stopCancelled(d *delivery) {
	if !d.markCancelled() {
		return
	}
	d.mu.Lock()
	if d.cancel != nil {
		d.cancel(ErrJobCancelled)
	}
	d.mu.Unlock()
	p.q.log.Info("litequeue: job cancelled while running; the handler's result will be dropped",
		LogJobID, d.id, LogQueue, d.queue, LogKind, d.kind)
}

// stopLost handles the deliveries whose rows an extension found no longer
// held under their leases. Those whose jobs were cancelled are stopped with
// ErrJobCancelled. Of the others, only a delivery without an outcome yet
// lost its lease: its handler is stopped with ErrLeaseLost and its result
// will be dropped. A handler that put its success into the caller's
// transaction (CompleteTx) finds it committed; an outcome already written
// (or being written) reports itself.
func (p *pool) stopLost(lost []*delivery) {
	if len(lost) == 0 {
		return
	}
	cancelled := map[*delivery]bool{}
	idx, err := p.q.store.WhichCancelled(context.Background(), leasesOf(lost))
	if err != nil {
		p.q.log.Error("litequeue: checking lost leases for cancelled jobs", LogQueue, p.cfg.Name, LogError, err.Error())
	}
	for _, i := range idx {
		cancelled[lost[i]] = true
	}
	for _, d := range lost {
		if cancelled[d] {
			p.stopCancelled(d)
			continue
		}
		if d.markLost() {
			d.mu.Lock()
			if d.cancel != nil {
				d.cancel(ErrLeaseLost)
			}
			d.mu.Unlock()
			p.q.log.Warn("litequeue: lease lost; the handler's result will be dropped", LogJobID, d.id, LogQueue, d.queue, LogKind, d.kind)
			continue
		}
		d.txEnded()
	}
}
