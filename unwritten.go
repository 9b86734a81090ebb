package litequeue

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
)

// Unwritten outcomes: an attempt whose outcome (success, retry, dead letter,
// snooze) could not be written — a device that failed or filled for a
// moment — stays claimed by its pool. Its lease goes on being extended as a
// running job's is, and its outcome is written again before the pool's next
// claim and at each lease extension, so a passing storage fault neither runs
// a finished handler a second time nor uses one of its attempts. The outcome
// is given up only when the lease was lost meanwhile (another process took
// the job once it lapsed: the outcome is stale) or when Stop ends with the
// store still failing; then the job runs again when its lease ends, as
// after a crash.
//
// A failed attempt's outcome (a retry, a dead letter or a snooze) that the
// store refuses maxOutcomeTries times for a reason other than a failing
// device (a value the database will not take, a constraint) would be
// written again forever, its job running past its retry policy: it is
// replaced by a dead letter whose reason says so (ErrOutcomeRefused). A
// success carries nothing of the handler's, so it is never replaced.

// maxOutcomeTries is how many times a failed attempt's outcome is written
// before a refusal that is not a failing device makes the job a dead letter
// in its place.
const maxOutcomeTries = 3

// keepUnwritten logs msg and the write's error err, and keeps d claimed with
// its outcome o to be written again. A pool that runs no workers (the test
// kit's stand-in) cannot write again: its outcome is lost at once.
func (p *pool) keepUnwritten(d *delivery, msg string, err error, o outcome) {
	q := p.q
	if p.r == nil {
		q.log.Error("litequeue: "+msg+"; the job runs again when its lease expires",
			LogJobID, d.id, LogQueue, d.queue, LogKind, d.kind, LogError, err.Error())
		q.outcomeLost(d, o.policy.Attempts(), o.err)
		p.forget(d)
		return
	}
	q.log.Error("litequeue: "+msg+"; the job keeps its lease and the write is tried again at the next claim or lease extension",
		LogJobID, d.id, LogQueue, d.queue, LogKind, d.kind, LogError, err.Error())
	p.mu.Lock()
	defer p.mu.Unlock()
	wasIdle := len(p.inflight) == 0
	// Back in, for a success freed before its commit failed. Its slot may
	// have gone to a claim meanwhile: the pool then holds one job over its
	// capacity until the outcome is written, and claims nothing more.
	p.inflight[d] = struct{}{}
	if p.unwritten == nil {
		p.unwritten = map[*delivery]outcome{}
	}
	p.unwritten[d] = o
	p.nUnwritten.Store(int32(len(p.unwritten)))
	if wasIdle {
		p.ext.set(q.clock.Now().Add(p.extendPeriod()), true)
	}
}

// rewrite writes the kept outcomes again, until one fails (the store still
// fails: the rest wait for the next try). Those written, and those whose
// lease was lost, free their slots.
func (p *pool) rewrite() {
	if p.nUnwritten.Load() == 0 {
		return
	}
	p.rewriting.Lock()
	defer p.rewriting.Unlock()
	for _, d := range p.unwrittenDeliveries() {
		p.mu.Lock()
		o, ok := p.unwritten[d]
		p.mu.Unlock()
		if !ok {
			continue
		}
		if err := p.writeKept(d, &o); err != nil {
			p.mu.Lock()
			if _, ok := p.unwritten[d]; ok {
				p.unwritten[d] = o
			}
			p.mu.Unlock()
			p.q.log.Warn("litequeue: writing a kept outcome failed again; it stays kept", LogJobID, d.id,
				LogQueue, d.queue, LogKind, d.kind, LogAttempt, d.attempt, "tries", o.tries, LogError, err.Error())
			return
		}
		p.mu.Lock()
		delete(p.unwritten, d)
		p.nUnwritten.Store(int32(len(p.unwritten)))
		p.mu.Unlock()
		p.freed(d)
	}
}

// writeKept writes the kept outcome o of d once more (write, outcome.go);
// after its maxOutcomeTries-th refusal that is not a failing device it
// writes the dead letter that replaces it instead, when o is a failed
// attempt's.
func (p *pool) writeKept(d *delivery, o *outcome) error {
	err := p.write(d, o)
	if err == nil {
		return nil
	}
	o.tries++
	if !o.refusable() || o.tries < maxOutcomeTries || deviceFault(err) {
		return err
	}
	if rerr := p.writeRefused(d, o, err); rerr != nil {
		return errors.Join(err, rerr)
	}
	return nil
}

// deviceFault reports whether err says the storage failed (full, I/O,
// replaced, closed, or the write timed out): a fault of the device, not of
// what was written, which passes when the device works again.
func deviceFault(err error) bool {
	for _, e := range []error{ErrStorageFull, ErrStorageIO, ErrFileReplaced, ErrClosed, context.DeadlineExceeded, context.Canceled} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// unwrittenDeliveries lists the deliveries whose outcomes are kept, oldest
// claim first (by id: the order is only for predictable logs and tests).
func (p *pool) unwrittenDeliveries() []*delivery {
	p.mu.Lock()
	defer p.mu.Unlock()
	ds := slices.Collect(maps.Keys(p.unwritten))
	slices.SortFunc(ds, func(a, b *delivery) int { return cmp.Compare(a.id, b.id) })
	return ds
}

// abandonUnwritten gives up the outcomes still kept when Stop ends: their
// jobs run again when their leases end, as after a crash.
func (p *pool) abandonUnwritten() {
	for _, d := range p.unwrittenDeliveries() {
		p.mu.Lock()
		o := p.unwritten[d]
		delete(p.unwritten, d)
		p.nUnwritten.Store(int32(len(p.unwritten)))
		p.mu.Unlock()
		p.q.log.Error("litequeue: an outcome could not be written before Stop ended; the job runs again when its lease expires",
			LogJobID, d.id, LogQueue, d.queue, LogKind, d.kind)
		p.q.outcomeLost(d, o.policy.Attempts(), o.err)
		p.forget(d)
	}
}

// unwrittenCount is how many outcomes the running pools keep.
func (q *Queue) unwrittenCount() int {
	q.mu.Lock()
	r := q.run
	q.mu.Unlock()
	if r == nil {
		return 0
	}
	n := 0
	for _, p := range r.pools {
		n += int(p.nUnwritten.Load())
	}
	return n
}
