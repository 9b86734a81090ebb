package litequeue

import (
	"container/heap"
	"context"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// Dispatch: claiming due jobs when there are free slots and there may be work,
// handing them to the workers in priority, then due-time order, keeping
// account of the jobs the pool holds, and giving back without using an
// attempt those that will not run here (a pause, Stop).

// claimQuery is what a claim of up to n jobs of p takes now, under a new
// lease.
func (p *pool) claimQuery(n int) store.ClaimQuery {
	now := p.q.clock.Now()
	return store.ClaimQuery{Queue: p.cfg.Name, Kinds: p.kindList, KindsJSON: p.kindsJSON, N: n,
		Now: now.UnixNano(), Until: addClamped(now, p.cfg.VisibilityTimeout), Lease: p.q.nextLease(),
		Limited: p.limited.Load(), Process: p.r.procID()}
}

// delivery makes the delivery of a job claimed by cq.
func (p *pool) delivery(c store.Claimed, cq store.ClaimQuery) *delivery {
	d := &delivery{q: p.q, p: p, id: c.ID, lease: cq.Lease, queue: p.cfg.Name, kind: c.Kind, attempt: c.Attempt,
		priority: c.Priority, payload: c.Payload, key: c.Key, createdAt: c.CreatedAt, dueAt: c.DueAt, lastErr: c.LastError,
		meta: c.Meta}
	d.until.Store(cq.Until)
	return d
}

// claim takes up to n due jobs and queues them for the workers, in commit
// order with every other claim. It returns how many it took.
func (p *pool) claim(n int) (int, error) {
	cq := p.safeClaimQuery(n)
	p.claimedAt.Store(cq.Now)
	began := p.q.clock.Now()
	defer func() {
		took := p.q.clock.Since(began)
		p.mu.Lock()
		p.prefetch.claimed(took)
		p.mu.Unlock()
	}()
	return p.q.store.Claim(context.Background(), cq, func(cs []store.Claimed) {
		ds := make([]*delivery, len(cs))
		for i, c := range cs {
			ds[i] = p.delivery(c, cq)
		}
		p.q.claimedTx(ds) // the claim saw them committed
		p.push(ds...)
	})
}

// safeClaimQuery is claimQuery for a claim that must not take a job p
// still holds. Outcomes p keeps because their writes failed are written
// first (record.go). When the clock has passed the lease of a job p
// holds (a mock clock's jump over the extension alarm, or a stall longer
// than the extension period), a claim would take it as lost and start it a
// second time in this process: the lease is extended first — if another
// process took the job meanwhile, the extension finds the lease lost and
// stops the handler, as a late extension does — and successes still on
// their way to the store are flushed first.
func (p *pool) safeClaimQuery(n int) store.ClaimQuery {
	p.rewrite()
	cq := p.claimQuery(n)
	running, completing := p.ownLeaseLapsed(cq.Now)
	if completing {
		if err := p.q.store.Flush(context.Background()); err != nil {
			p.q.log.Error("litequeue: writing successes before a claim failed", LogQueue, p.cfg.Name, LogError, err.Error())
		}
	}
	if running {
		p.extend()
	}
	if running || completing {
		cq = p.claimQuery(n)
	}
	return cq
}

// nextDue returns when the earliest live job of p's kinds becomes claimable
// (a running job's lease end counts), or ok false if there is none.
func (p *pool) nextDue() (time.Time, bool, error) {
	due, ok, err := p.q.store.NextDue(context.Background(), p.cfg.Name, p.kindList, p.kindsJSON)
	if err != nil || !ok {
		return time.Time{}, false, err
	}
	return time.Unix(0, due), true, nil
}

// push queues claimed deliveries for the workers, most urgent first.
func (p *pool) push(ds ...*delivery) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pushLocked(ds...)
}

func (p *pool) pushLocked(ds ...*delivery) {
	wasIdle := len(p.inflight) == 0
	for _, d := range ds {
		p.inflight[d] = struct{}{}
		heap.Push(&p.ready, d)
		p.tokens <- struct{}{} // never blocks: capacity bounds the claimed jobs
	}
	if wasIdle && len(ds) > 0 {
		p.ext.set(p.q.clock.Now().Add(p.extendPeriod()), true)
	}
}

// reserveDirect reserves a slot of the pool running queue's jobs of kind
// when that pool is idle — started, nothing claimed waiting in memory, a
// worker free — so that an enqueue of a job due now can claim in its own
// transaction (the queue's most urgent due job: the new one unless another
// is due first, so the hand-off never overtakes a due job) and hand the
// claimed job straight to a worker: one commit instead of two between
// Enqueue and the handler. It returns nil when the
// enqueue should take the usual path (insert, then wake the dispatcher).
func (r *runState) reserveDirect(queue, kind string) *pool {
	p, ok := r.pools[queue]
	if !ok || !p.kinds[kind] {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped || p.paused.Load() || p.limited.Load() || p.ready.Len() > 0 || p.running.Load() >= int64(p.cfg.Concurrency) ||
		p.capacity-len(p.inflight)-p.reserved <= 0 {
		return nil
	}
	p.reserved++
	return p
}

// handOff ends a reservation, on the writer right after the enqueue's
// commit: it queues d (nil if the enqueue claimed nothing) for the workers
// and reports true, or reports false if the pool began to stop meanwhile —
// then the caller releases d.
func (p *pool) handOff(d *delivery) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d == nil {
		return true
	}
	if p.stopped {
		return false
	}
	p.pushLocked(d)
	return true
}

// dispatch claims due jobs whenever there are free slots and there may be
// work: after a wake-up (an enqueue here, another process's write, a freed
// slot after a full claim) or when a Clock timer reaches the next due time.
// It never polls the table in a loop.
func (p *pool) dispatch() {
	defer p.r.bg.Done()
	defer p.due.stop()
	dirty := true
	for {
		select {
		case <-p.r.stopping:
			return
		default:
		}
		if dirty && p.holdForControl() {
			dirty = false // paused: a Resume or another process's write wakes it
		}
		if dirty {
			p.mu.Lock()
			free := p.claimableLocked()
			if free == 0 {
				p.full = true
			}
			p.mu.Unlock()
			if free == 0 {
				dirty = false
			} else {
				n := min(free, p.q.opts.ClaimBatch)
				got, err := p.claim(n)
				switch {
				case err != nil:
					p.q.log.Error("litequeue: claim failed; retrying", LogQueue, p.cfg.Name, LogError, err.Error())
					p.due.set(p.q.clock.Now().Add(time.Second), true)
					dirty = false
				case got == n:
					p.mu.Lock()
					p.full = true
					p.mu.Unlock()
					// More may be due: loop while slots are free.
				default:
					limited := p.limited.Load()
					p.mu.Lock()
					// A limited queue's slots free as its jobs end, here or
					// elsewhere: each end here wakes a claim.
					p.full = limited
					p.mu.Unlock()
					dirty = false
					due, ok, err := p.nextDue()
					if err == nil && limited {
						due, ok = p.limitedDue(due, ok)
					}
					// An alarm set earlier than this stays: it may be a due time
					// written after this read, and an early wake-up costs one
					// empty claim.
					switch {
					case err != nil:
						p.q.log.Error("litequeue: next due time", LogQueue, p.cfg.Name, LogError, err.Error())
						p.due.set(p.q.clock.Now().Add(time.Second), true)
					case ok:
						p.due.set(due, true)
					}
				}
				if dirty {
					continue
				}
			}
		}
		select {
		case <-p.r.stopping:
			return
		case <-p.wakeCh:
			dirty = true
		case <-p.due.C:
			dirty = true
		}
	}
}

// watchWake is the store's wake-up for other processes' writes: every pool
// re-reads its pause and looks for cancelled jobs among those it runs,
// then claims.
func (r *runState) watchWake() {
	r.q.wakeTx()
	for _, p := range r.pools {
		p.recheck.Store(true)
		p.signal()
	}
}

// holdForControl is the dispatcher's check before a claim: after another
// process's write it re-reads the queue's pause and stops handlers whose
// jobs were cancelled. It reports true while the queue is paused, having
// released the jobs claimed but not yet started.
func (p *pool) holdForControl() bool {
	recheck := p.recheck.Swap(false)
	if recheck || p.paused.Load() {
		// While paused, every wake-up re-reads the pause: another process
		// may have resumed the queue with this one's polling off.
		ctx := context.Background()
		if paused, err := p.q.store.Paused(ctx); err != nil {
			p.q.log.Error("litequeue: reading paused queues", LogQueue, p.cfg.Name, LogError, err.Error())
		} else {
			// A Resume of this process in flight unpauses the pool
			// itself, after its event (control.go).
			if _, ok := paused[p.cfg.Name]; ok || p.resuming.Load() == 0 {
				p.paused.Store(ok)
			}
		}
	}
	if recheck {
		ctx := context.Background()
		p.recheckLimits(ctx)
		if ds := p.claimed(); len(ds) > 0 {
			idx, err := p.q.store.WhichCancelled(ctx, leasesOf(ds))
			if err != nil {
				p.q.log.Error("litequeue: looking for cancelled jobs", LogQueue, p.cfg.Name, LogError, err.Error())
			}
			for _, i := range idx {
				p.stopCancelled(ds[i])
			}
		}
	}
	if !p.paused.Load() {
		return false
	}
	p.releaseQueued()
	return true
}

// initPaused reads which of r's queues are paused, at Start.
func (r *runState) initPaused(ctx context.Context) error {
	paused, err := r.q.store.Paused(ctx)
	if err != nil {
		return err
	}
	for name, p := range r.pools {
		_, ok := paused[name]
		p.paused.Store(ok)
	}
	return nil
}
