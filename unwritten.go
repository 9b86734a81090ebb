package litequeue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
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

// unwritten is an outcome kept because its write failed.
type unwritten struct {
	write func() error // writes the outcome and emits its events; nil error once written, or dropped as stale
	// refused, when set, writes a dead letter in place of the outcome after
	// its tries-th refusal, werr (see refusedWrite).
	refused     func(werr error, tries int) error
	tries       int   // failed writes so far
	maxAttempts int   // for the test kit's report if it is given up
	err         error // the handler's error, for the same report
}

// settle writes d's outcome with write and frees d's slot; if the write
// fails, d keeps its slot and lease, and the outcome is written again later
// (see keepUnwritten), or replaced by refused (nil: never). msg is logged on
// the failure.
func (p *pool) settle(d *delivery, msg string, maxAttempts int, herr error, write func() error, refused func(error, int) error) {
	err := write()
	if err == nil {
		p.freed(d)
		return
	}
	p.keepUnwritten(d, msg, err, unwritten{write: write, refused: refused, tries: 1, maxAttempts: maxAttempts, err: herr})
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
		if err := p.writeKept(d, &u); err != nil {
			p.mu.Lock()
			if _, ok := p.unwritten[d]; ok {
				p.unwritten[d] = u
			}
			p.mu.Unlock()
			p.q.log.Warn("litequeue: writing a kept outcome failed again; it stays kept", LogJobID, d.id,
				LogQueue, d.queue, LogKind, d.kind, LogAttempt, d.attempt, "tries", u.tries, LogError, err.Error())
			return
		}
		p.mu.Lock()
		delete(p.unwritten, d)
		p.nUnwritten.Store(int32(len(p.unwritten)))
		p.mu.Unlock()
		p.freed(d)
	}
}

// writeKept writes the kept outcome u of d once more; after its
// maxOutcomeTries-th refusal that is not a failing device it writes the
// dead letter that replaces it instead, when u has one.
func (p *pool) writeKept(d *delivery, u *unwritten) error {
	err := u.write()
	if err == nil {
		return nil
	}
	u.tries++
	if u.refused == nil || u.tries < maxOutcomeTries || deviceFault(err) {
		return err
	}
	if rerr := u.refused(err, u.tries); rerr != nil {
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

// refusedWrite returns the write that replaces d's failed attempt's
// outcome when the store keeps refusing it: the job becomes a dead letter
// with reason "outcome refused: …", its last error and attempt record
// saying what the store answered (werr, after tries writes), OnDead asked
// (once) for a follow-up — written with it, or without it if the store
// refuses that too — and EventDead reported with ErrOutcomeRefused.
func (p *pool) refusedWrite(d *delivery, policy RetryPolicy, took time.Duration) func(werr error, tries int) error {
	var follow *store.NewJob
	var asked bool
	return func(werr error, tries int) error {
		q := p.q
		now := q.clock.Now()
		started := d.started
		if started.IsZero() {
			started = now
		}
		cause := fmt.Errorf("%w %d times: %w", ErrOutcomeRefused, tries, werr)
		text := storedText(cause.Error(), maxRefusalBytes)
		b := store.Burial{Lease: store.Lease{ID: d.id, Lease: d.lease}, At: now.UnixNano(),
			Reason:    fmt.Sprintf("outcome refused: the store refused to record attempt %d's outcome %d times", d.attempt, tries),
			LastError: &text,
			Record: store.Attempt{Attempt: d.attempt, StartedAt: started.UnixNano(), FinishedAt: now.UnixNano(),
				Error: text, Decision: string(DecisionGiveUp)}}
		if !asked {
			asked = true
			follow = p.followUp(d, cause, func() JobInfo { return p.deadInfo(d, &b) })
		}
		b.FollowUp = follow
		dead := Event{Type: EventDead, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt,
			Decision: DecisionGiveUp, Err: cause, Duration: took}
		err := p.writeBurial(d, b, dead)
		if err != nil && follow != nil && !errors.Is(err, ErrLeaseLost) && !deviceFault(err) {
			q.log.Error("litequeue: the store refused the dead letter of a refused outcome with its OnDead follow-up; it is written without it",
				LogJobID, d.id, LogQueue, d.queue, LogKind, d.kind, LogError, err.Error())
			b.FollowUp = nil
			err = p.writeBurial(d, b, dead)
		}
		switch {
		case errors.Is(err, ErrLeaseLost):
			q.emit(Event{Type: EventStale, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt, Err: cause})
		case err != nil:
			return err
		default:
			q.log.Error("litequeue: the store kept refusing an attempt's outcome; the job is a dead letter in its place",
				LogJobID, d.id, LogQueue, d.queue, LogKind, d.kind, LogAttempt, d.attempt, LogError, werr.Error())
		}
		return nil
	}
}

// maxRefusalBytes bounds the store's answer kept with a refused outcome's
// dead letter.
const maxRefusalBytes = 1 << 10

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
