package litequeue

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/litequeue/litequeue/internal/store"
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

// unwritten is an outcome kept because its write failed.
type unwritten struct {
	write       func() error // writes the outcome and emits its events; nil error once written, or dropped as stale
	maxAttempts int          // for the test kit's report if it is given up
	err         error        // the handler's error, for the same report
}

// settle writes d's outcome with write and frees d's slot; if the write
// fails, d keeps its slot and lease, and the outcome is written again later
// (see keepUnwritten). msg is logged on the failure.
func (p *pool) settle(d *delivery, msg string, maxAttempts int, herr error, write func() error) {
	err := write()
	if err == nil {
		p.freed(d)
		return
	}
	p.keepUnwritten(d, msg, err, unwritten{write: write, maxAttempts: maxAttempts, err: herr})
}

// keepUnwritten logs msg and the write's error err, and keeps d claimed with
// its outcome u to be written again. A pool that runs no workers (the test
// kit's stand-in) cannot write again: its outcome is lost at once.
func (p *pool) keepUnwritten(d *delivery, msg string, err error, u unwritten) {
	q := p.q
	if p.r == nil {
		q.log.Error("litequeue: "+msg+"; the job runs again when its lease expires",
			LogJobID, d.id, LogQueue, d.queue, LogKind, d.kind, LogError, err.Error())
		q.outcomeLost(d, u.maxAttempts, u.err)
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
		p.unwritten = map[*delivery]unwritten{}
	}
	p.unwritten[d] = u
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
		u, ok := p.unwritten[d]
		p.mu.Unlock()
		if !ok {
			continue
		}
		if err := u.write(); err != nil {
			p.q.log.Warn("litequeue: writing a kept outcome failed again; it stays kept", LogJobID, d.id,
				LogQueue, d.queue, LogKind, d.kind, LogError, err.Error())
			return
		}
		p.mu.Lock()
		delete(p.unwritten, d)
		p.nUnwritten.Store(int32(len(p.unwritten)))
		p.mu.Unlock()
		p.freed(d)
	}
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
		u := p.unwritten[d]
		delete(p.unwritten, d)
		p.nUnwritten.Store(int32(len(p.unwritten)))
		p.mu.Unlock()
		p.q.log.Error("litequeue: an outcome could not be written before Stop ended; the job runs again when its lease expires",
			LogJobID, d.id, LogQueue, d.queue, LogKind, d.kind)
		p.q.outcomeLost(d, u.maxAttempts, u.err)
		p.forget(d)
	}
}

// successWrite writes d's success now (completed at the Unix nanosecond
// at), for a success whose first, queued write failed.
func (p *pool) successWrite(d *delivery, at int64, took time.Duration) func() error {
	q := p.q
	return func() error {
		done := make(chan error, 1)
		q.store.Complete(store.Completion{Lease: store.Lease{ID: d.id, Lease: d.lease}, At: at,
			Keep: q.opts.CompletedRetention > 0, Notify: func(err error) { done <- err }})
		err := q.store.Flush(context.Background())
		select {
		case werr := <-done:
			err = werr
		default:
			if err == nil {
				err = errors.New("litequeue: the success was not written")
			}
		}
		return p.successWritten(d, took, err)
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
