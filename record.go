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

// Recording an outcome: the one place where an attempt's outcome is
// written, then reported (events, history, progress watchers), and written
// again while the store fails to take it.

// record writes and reports o, the outcome of d's attempt, and frees d's
// slot; an outcome whose write fails keeps d's slot and lease and is written
// again later (keepUnwritten).
func (p *pool) record(d *delivery, o outcome) {
	q := p.q
	switch o.kind {
	case outRelease:
		p.release([]*delivery{d})
	case outReleased:
		if o.ran {
			q.log.Debug("litequeue: the handler of a released job returned; its result is dropped",
				LogJobID, d.id, LogQueue, d.queue, LogKind, d.kind, LogAttempt, d.attempt)
		}
		p.forget(d)
	case outLeaseLost:
		if o.ran {
			q.emit(Event{Type: EventStale, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt, Err: o.err})
		}
		p.forget(d)
	case outCancelled:
		d.publishOutcome(StateCancelled)
		q.emit(Event{Type: EventCancelled, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt,
			Err: errors.Join(ErrJobCancelled, o.err), Duration: o.took})
		p.forget(d)
	case outNotWritten:
		p.freed(d)
	case outSucceeded:
		p.mu.Lock()
		p.completing[d] = struct{}{}
		p.mu.Unlock()
		// The callback keeps only what a success needs, not the whole outcome.
		took, at, policy := o.took, o.at, o.policy
		q.store.Complete(store.Completion{Lease: store.Lease{ID: d.id, Lease: d.lease}, At: at,
			Keep: p.completedRetention() > 0, Flow: flowOf(d.meta), Notify: func(err error) {
				p.mu.Lock()
				delete(p.completing, d)
				p.mu.Unlock()
				if p.limited.Load() {
					p.signal() // its slot is free in the database now (limits.go)
				}
				if err := p.successWritten(d, took, err); err != nil {
					p.keepUnwritten(d, "writing a success failed", err,
						outcome{kind: outSucceeded, ran: true, took: took, at: at, policy: policy})
				}
			}})
		q.noteRetained(unixNanos(q.clock), p.completedRetention())
		// The slot is free now, not when the success commits: the next claim
		// then shares the writer's transaction with these successes instead of
		// waiting for a commit of its own.
		p.freed(d)
	case outSucceededTx:
		// Check that the CompleteTx transaction really committed.
		holds, err := q.store.Holds(context.Background(), store.Lease{ID: d.id, Lease: d.lease})
		if err == nil && holds {
			p.record(d, p.failed(d, o.policy, errors.New("CompleteTx was called but its transaction did not commit"), o.took))
			return
		}
		p.succeeded(d, o.took)
		p.freed(d)
	default: // outRetry, outDead, outSnoozed
		if err := p.write(d, &o); err != nil {
			o.tries = 1
			p.keepUnwritten(d, o.writeFailed(), err, o)
			return
		}
		p.freed(d)
	}
}

// successWritten reports the outcome of writing d's success: its events
// when it was written (err nil) or found its lease lost (stale: it no longer
// counts); any other error, which leaves the success unwritten, it returns.
func (p *pool) successWritten(d *delivery, took time.Duration, err error) error {
	switch {
	case err == nil:
		p.flowResolved(d)
		p.succeeded(d, took)
	case errors.Is(err, ErrLeaseLost):
		p.q.emit(Event{Type: EventStale, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt, Err: err})
	default:
		return err
	}
	return nil
}

// succeeded reports d's success, written.
func (p *pool) succeeded(d *delivery, took time.Duration) {
	d.publishCompleted()
	p.q.emit(Event{Type: EventSucceeded, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt, Duration: took})
}

// followUp returns the job QueueConfig.OnDead asks to enqueue with the
// burial of d, validated and encoded, or nil for none; info describes the
// dead letter (see deadInfo), asked only when there is an OnDead. A
// follow-up that does not validate (or an OnDead that panics) is logged,
// and the job is buried without it.
func (p *pool) followUp(d *delivery, cause error, info func() JobInfo) (nj *store.NewJob) {
	if p.cfg.OnDead == nil {
		return nil
	}
	q := p.q
	defer func() {
		if v := recover(); v != nil {
			q.log.Error("litequeue: QueueConfig.OnDead panicked; the job is dead-lettered without a follow-up",
				LogJobID, d.id, LogQueue, d.queue, LogError, fmt.Sprint(v))
			nj = nil
		}
	}()
	job, opts := p.cfg.OnDead(info(), cause)
	if job == nil {
		return nil
	}
	j, err := q.prepare(job, opts)
	if err != nil {
		q.log.Error("litequeue: the follow-up job of QueueConfig.OnDead is invalid; the job is dead-lettered without it",
			LogJobID, d.id, LogQueue, d.queue, LogError, err.Error())
		return nil
	}
	return &j
}

// deadInfo describes d's job as the burial b will leave it, for OnDead:
// the stored row (what the worker holds, if it cannot be read) in state
// dead, with b's attempt count, finish time, last error and reason, and
// its attempt history ending with b's record.
func (p *pool) deadInfo(d *delivery, b *store.Burial) JobInfo {
	q := p.q
	info := d.info()
	if j, atts, err := q.store.Job(context.Background(), d.id); err == nil {
		info = jobInfo(j, b.At)
		info.Attempts = attemptRecords(atts)
	} else {
		q.log.Warn("litequeue: reading a dying job for QueueConfig.OnDead failed; it is described as the worker holds it",
			LogJobID, d.id, LogQueue, d.queue, LogError, err.Error())
	}
	info.State = StateDead
	if b.Attempt > 0 {
		info.Attempt = b.Attempt
	}
	info.FinishedAt = time.Unix(0, b.At)
	if b.LastError != nil {
		info.LastError = *b.LastError
	}
	info.DeadReason = b.Reason
	info.Attempts = append(info.Attempts, attemptRecords([]store.Attempt{b.Record})...)
	return info
}

// write writes o, the outcome of d's attempt, and once it committed reports
// it. It returns nil when written or when the lease was lost (then nothing
// changed, and the loss is reported); any other error leaves o unwritten.
// A snooze past the queue's MaxSnoozes becomes, in o, the failure it
// counts as, and is written as that.
func (p *pool) write(d *delivery, o *outcome) error {
	q := p.q
	var err error
	switch o.kind {
	case outSucceeded:
		return p.successWrite(d, o)
	case outRetry:
		err = q.store.Retry(context.Background(), o.retry)
		if err == nil {
			d.publishOutcome(StateScheduled)
			p.dueAt(time.Unix(0, o.retry.Due))
			q.emit(Event{Type: EventRetrying, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt,
				Delay: o.delay, Decision: o.decision, Err: o.err, Duration: o.took})
		}
	case outDead:
		attempt := d.attempt
		if o.lostJob {
			attempt = o.burial.Attempt
		}
		err = p.writeBurial(d, o.burial, Event{Type: EventDead, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: attempt,
			Decision: o.decision, Err: o.err, Duration: o.took})
		if o.lostJob && errors.Is(err, ErrLeaseLost) {
			q.log.Warn("litequeue: a lost job was not dead-lettered: another worker holds it now", LogJobID, d.id, LogError, err.Error())
			return nil
		}
	case outSnoozed:
		err = q.store.Snooze(context.Background(), o.snooze)
		switch {
		case errors.Is(err, store.ErrSnoozeLimit):
			failed := p.failed(d, o.policy, &SnoozeLimitError{Max: o.snooze.Max, Delay: o.delay}, o.took)
			failed.tries, failed.asked, failed.refusal = o.tries, o.asked, o.refusal
			*o = failed
			return p.write(d, o)
		case err == nil:
			p.dueAt(time.Unix(0, o.snooze.Due))
			q.emit(Event{Type: EventSnoozed, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt,
				Delay: o.delay, Decision: DecisionSnooze, Duration: o.took})
		}
	default:
		panic(fmt.Sprintf("litequeue: outcome %d has no write", o.kind))
	}
	if errors.Is(err, ErrLeaseLost) {
		q.emit(Event{Type: EventStale, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt, Err: o.err})
		return nil
	}
	return err
}

// successWrite writes d's success o now, for a success whose first, queued
// write failed.
func (p *pool) successWrite(d *delivery, o *outcome) error {
	q := p.q
	done := make(chan error, 1)
	q.store.Complete(store.Completion{Lease: store.Lease{ID: d.id, Lease: d.lease}, At: o.at,
		Keep: p.completedRetention() > 0, Flow: flowOf(d.meta), Notify: func(err error) { done <- err }})
	err := q.store.Flush(context.Background())
	select {
	case werr := <-done:
		err = werr
	default:
		if err == nil {
			err = errors.New("litequeue: the success was not written")
		}
	}
	return p.successWritten(d, o.took, err)
}

// writeRefused writes the dead letter that replaces o, d's failed attempt's
// outcome, when the store keeps refusing it: the job becomes a dead letter
// with reason "outcome refused: …", its last error and attempt record
// saying what the store answered (werr, after o.tries writes), OnDead asked
// (once) for a follow-up — written with it, or without it if the store
// refuses that too — and EventDead reported with ErrOutcomeRefused.
func (p *pool) writeRefused(d *delivery, o *outcome, werr error) error {
	q := p.q
	now := q.clock.Now()
	started := d.started
	if started.IsZero() {
		started = now
	}
	cause := fmt.Errorf("%w %d times: %w", ErrOutcomeRefused, o.tries, werr)
	text := storedText(cause.Error(), maxRefusalBytes)
	b := store.Burial{Lease: store.Lease{ID: d.id, Lease: d.lease}, At: now.UnixNano(),
		Reason:    fmt.Sprintf("outcome refused: the store refused to record attempt %d's outcome %d times", d.attempt, o.tries),
		LastError: &text,
		Record: store.Attempt{Attempt: d.attempt, StartedAt: started.UnixNano(), FinishedAt: now.UnixNano(),
			Error: text, Decision: string(DecisionGiveUp)}}
	if !o.asked {
		o.asked = true
		o.refusal = p.followUp(d, cause, func() JobInfo { return p.deadInfo(d, &b) })
	}
	b.FollowUp = o.refusal
	dead := Event{Type: EventDead, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt,
		Decision: DecisionGiveUp, Err: cause, Duration: o.took}
	err := p.writeBurial(d, b, dead)
	if err != nil && o.refusal != nil && !errors.Is(err, ErrLeaseLost) && !deviceFault(err) {
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

// maxRefusalBytes bounds the store's answer kept with a refused outcome's
// dead letter.
const maxRefusalBytes = 1 << 10

// writeBurial writes b, the dead letter of d, and once it committed
// reports dead and, when b's follow-up was inserted, the follow-up's
// EventEnqueued, and wakes its queue. It returns the write's error
// (ErrLeaseLost when the lease was lost: nothing changed).
func (p *pool) writeBurial(d *delivery, b store.Burial, dead Event) error {
	q := p.q
	var followID int64
	b.FollowUpID = &followID
	b.Flow = flowOf(d.meta)
	if f := b.FollowUp; f != nil {
		q.gate.enter(*f)
		defer q.gate.leave(*f)
	}
	if err := q.store.Bury(context.Background(), b); err != nil {
		return err
	}
	p.flowResolved(d)
	d.publishOutcome(StateDead)
	q.emit(dead)
	if f := b.FollowUp; f != nil && followID != 0 {
		q.supersedeTx([]int64{followID})
		q.emit(Event{Type: EventEnqueued, JobID: followID, Queue: f.Queue, Kind: f.Kind, Delay: time.Duration(f.VisibleAt - f.CreatedAt)})
		if f.VisibleAt > f.CreatedAt {
			p.r.dueAt(f.Queue, f.Kind, f.VisibleAt)
		} else {
			p.r.wake(f.Queue)
		}
	}
	return nil
}

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

// releaseTimeout bounds how long a release on shutdown waits for the write
// lock; past it the jobs come back when their leases expire instead.
const releaseTimeout = 30 * time.Second

// release puts claimed jobs back to ready without using an attempt, those
// not yet decided otherwise (started, lost or cancelled: see
// delivery_state.go), and reports each with EventReleased.
func (p *pool) release(ds []*delivery) {
	ds = slices.DeleteFunc(ds, func(d *delivery) bool {
		return !d.releaseAgain()
	})
	if len(ds) == 0 {
		return
	}
	q := p.q
	now := unixNanos(q.clock)
	ctx, cancel := withClockTimeout(q.clock, context.Background(), releaseTimeout, errReleaseTimeout)
	defer cancel()
	err := q.store.Release(ctx, leasesOf(ds), now)
	for _, d := range ds {
		p.forget(d)
		if err == nil {
			q.emit(Event{Type: EventReleased, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt})
		}
	}
	if err != nil {
		q.log.Error("litequeue: release on shutdown failed; the jobs come back when their leases expire", LogQueue, p.cfg.Name, LogError, err.Error())
	}
}

var errReleaseTimeout = errors.New("litequeue: releasing jobs on shutdown waited too long for the write lock")
