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

// The stored attempts of the test kit (testsupport.go) record their
// outcomes through these.

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
