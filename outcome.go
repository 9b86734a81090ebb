package litequeue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// Outcomes: what became of one attempt, as one value that record writes and
// reports — the store's write, the events, this process's progress
// watchers, the slot freed — and, when the write fails, keeps to be written
// again (unwritten.go) by the same write.

// outcomeKind says what became of an attempt.
type outcomeKind uint8

const (
	// outSucceeded: the handler returned nil; the success is written in the
	// store's next batch of completions.
	outSucceeded outcomeKind = iota
	// outSucceededTx: the handler put its success into the caller's
	// transaction (CompleteTx); it holds if that transaction committed.
	outSucceededTx
	// outRetry: the attempt failed; the job runs again after delay.
	outRetry
	// outDead: the job is a dead letter, for its burial's reason.
	outDead
	// outSnoozed: the job runs again after delay without using its attempt.
	outSnoozed
	// outCancelled: the job was cancelled; the handler's result is dropped.
	outCancelled
	// outRelease: the job is given back now without using an attempt (a
	// pause before its handler started).
	outRelease
	// outReleased: the job was given back by Stop or a pause, whose release
	// reported it; the handler's result is dropped.
	outReleased
	// outLeaseLost: the lease was lost before the outcome; the handler's
	// result is dropped.
	outLeaseLost
	// outNotWritten: the outcome is lost with its process (the test kit's
	// fault): nothing is written, the row stays running until its lease
	// ends, and the job runs again.
	outNotWritten
)

// outcome is what became of one attempt, with all its record needs.
type outcome struct {
	kind   outcomeKind
	ran    bool          // its handler ran (false: decided before it started)
	err    error         // the handler's error; the cause of a retry or dead letter
	took   time.Duration // how long the handler ran
	policy RetryPolicy   // the retry policy in force for the job

	// Decided once, when the outcome is made, so that a write tried again
	// (unwritten.go) records the same: jitter is drawn and OnDead asked once.
	at       int64         // outSucceeded: when it completed, in Unix nanoseconds
	decision Decision      // outRetry, outDead, outSnoozed
	delay    time.Duration // outRetry, outSnoozed
	retry    store.Retry   // outRetry
	burial   store.Burial  // outDead
	snooze   store.Snooze  // outSnoozed
	// lostJob marks the outDead of a job whose last allowed attempt was lost
	// with its process: a lost lease is only logged, and the store's refusal
	// never replaces it.
	lostJob bool

	tries   int           // failed writes so far (unwritten.go)
	asked   bool          // OnDead was asked for refusal's follow-up
	refusal *store.NewJob // the follow-up of the dead letter that replaces a refused outcome
}

// refusable reports whether o is a failed attempt's outcome that a dead
// letter replaces when the store keeps refusing it (unwritten.go).
func (o *outcome) refusable() bool {
	return (o.kind == outRetry || o.kind == outDead || o.kind == outSnoozed) && !o.lostJob
}

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
			Keep: q.opts.CompletedRetention > 0, Notify: func(err error) {
				p.mu.Lock()
				delete(p.completing, d)
				p.mu.Unlock()
				if err := p.successWritten(d, took, err); err != nil {
					p.keepUnwritten(d, "writing a success failed", err,
						outcome{kind: outSucceeded, ran: true, took: took, at: at, policy: policy})
				}
			}})
		if q.opts.CompletedRetention > 0 {
			q.noteRetained(unixNanos(q.clock))
		}
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

// writeFailed is what the log says when o's first write fails.
func (o *outcome) writeFailed() string {
	switch {
	case o.lostJob:
		return "dead-lettering a lost job failed"
	case o.kind == outSnoozed:
		return "recording a snooze failed"
	}
	return "recording a failure failed"
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
	return p.successWritten(d, o.took, err)
}

// successWritten reports the outcome of writing d's success: its events
// when it was written (err nil) or found its lease lost (stale: it no longer
// counts); any other error, which leaves the success unwritten, it returns.
func (p *pool) successWritten(d *delivery, took time.Duration, err error) error {
	switch {
	case err == nil:
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
	if f := b.FollowUp; f != nil {
		q.gate.enter(*f)
		defer q.gate.leave(*f)
	}
	if err := q.store.Bury(context.Background(), b); err != nil {
		return err
	}
	d.publishOutcome(StateDead)
	q.emit(dead)
	if f := b.FollowUp; f != nil && followID != 0 {
		q.supersedeTx([]int64{followID})
		q.emit(Event{Type: EventEnqueued, JobID: followID, Queue: f.Queue, Kind: f.Kind, Delay: time.Duration(f.VisibleAt - f.CreatedAt)})
		if f.VisibleAt > f.CreatedAt {
			q.dueAt(f.Queue, f.Kind, f.VisibleAt)
		} else {
			q.wake(f.Queue)
		}
	}
	return nil
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

// The stored attempts of the test kit (testsupport.go) record their
// outcomes through these.

// fail records d's failed attempt, which ended with herr after took: the
// job is rescheduled or becomes a dead letter, with the attempt in its
// history, in one transaction.
func (p *pool) fail(d *delivery, policy RetryPolicy, herr error, took time.Duration) {
	p.record(d, p.failed(d, policy, herr, took))
}

// snoozed records d's attempt as snoozed if err is a snooze, and reports
// whether it was.
func (p *pool) snoozed(d *delivery, policy RetryPolicy, err error, took time.Duration) bool {
	var se *SnoozeError
	if !errors.As(err, &se) {
		return false
	}
	p.record(d, p.snoozedFor(d, policy, se, err, took))
	return true
}

// finishTx records d's success put into the caller's transaction
// (CompleteTx), once that transaction is found committed.
func (p *pool) finishTx(d *delivery, policy RetryPolicy, took time.Duration) {
	p.record(d, outcome{kind: outSucceededTx, ran: true, took: took, policy: policy})
}
