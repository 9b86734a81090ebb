package litequeue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// Recording an outcome: the one place where an attempt's outcome is
// written, then reported (events, history, progress watchers).

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
