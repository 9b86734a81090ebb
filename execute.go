package litequeue

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// Execution: running one attempt of a job in its handler, with its timeout and
// panics caught, and recording the outcome: success, retry or dead letter.

func (p *pool) work() {
	defer p.workers.Done()
	for {
		d := p.pop(p.r.stopping)
		if d == nil {
			return
		}
		p.execute(d)
	}
}

// execute runs one attempt and records its outcome.
func (p *pool) execute(d *delivery) {
	q := p.q
	h := q.handlerFor(d.kind)
	if h == nil { // cannot happen: we claim only registered kinds
		p.release([]*delivery{d})
		return
	}
	own, run, decodeErr := h.prepare(d.payload)
	policy := p.policy(own.policy)
	timeout := timeoutFor(own.timeout, own.hasTimeout, p.cfg.Timeout)
	if d.attempt > policy.Attempts() || decodeErr != nil {
		// No handler runs: the outcome is decided now.
		if _, ok := d.move(setOf(dQueued), dReturned); !ok {
			p.dropUnstarted(d)
			return
		}
		if d.attempt > policy.Attempts() {
			// The last allowed attempt died with its process: no crash loop.
			p.bury(d, policy)
		} else {
			p.fail(d, policy, Permanent(decodeErr), 0)
		}
		return
	}
	ctx, cancel := context.WithCancelCause(p.r.base)
	defer cancel(nil)
	var hctx context.Context = ctx
	if timeout > 0 {
		var c2 context.CancelFunc
		hctx, c2 = withClockTimeout(q.clock, ctx, timeout, &TimeoutError{Timeout: timeout})
		defer c2()
	}
	run = q.wrap(d, policy.Attempts(), timeout, run)
	d.mu.Lock()
	d.cancel = cancel
	d.mu.Unlock()
	if p.paused.Load() { // the queue was paused after this job was claimed
		if _, ok := d.move(setOf(dQueued), dReleased); ok {
			p.release([]*delivery{d})
			return
		}
	}
	if !d.start() { // released by shutdown, lost or cancelled before it started
		p.dropUnstarted(d)
		return
	}
	d.started = q.clock.Now()
	p.running.Add(1)
	q.awaitEnqueued(d)
	q.emit(Event{Type: EventStarted, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt})
	err := safeCall(hctx, d, run)
	from, ok := d.returned()
	// A test kit may lose the outcome here, as a process that dies now
	// would (testsupport.go): nothing more is written for it.
	lost := ok && q.dropOutcome(d, policy.Attempts(), err)
	p.finishReports(d, ok && !lost && !inCallersTx.has(from) && (err != nil || q.opts.CompletedRetention > 0))
	p.running.Add(-1)
	took := q.clock.Since(d.started)
	if !ok {
		p.dropResult(d, from, err, took)
		return
	}
	if lost {
		p.freed(d)
		return
	}
	if err != nil && timeout > 0 && errors.Is(hctx.Err(), context.DeadlineExceeded) && !errors.As(err, new(*TimeoutError)) {
		err = fmt.Errorf("%w: %w", &TimeoutError{Timeout: timeout}, err)
	}
	if err != nil {
		if !p.snoozed(d, policy, err, took) {
			p.fail(d, policy, err, took)
		}
		return
	}
	if inCallersTx.has(from) {
		p.finishTx(d, policy, took)
		return
	}
	at := unixNanos(q.clock)
	p.mu.Lock()
	p.completing[d] = struct{}{}
	p.mu.Unlock()
	q.store.Complete(store.Completion{Lease: store.Lease{ID: d.id, Lease: d.lease}, At: at,
		Keep: q.opts.CompletedRetention > 0, Notify: func(err error) {
			p.mu.Lock()
			delete(p.completing, d)
			p.mu.Unlock()
			if err := p.successWritten(d, took, err); err != nil {
				p.keepUnwritten(d, "writing a success failed", err,
					unwritten{write: p.successWrite(d, at, took), maxAttempts: policy.Attempts()})
			}
		}})
	if q.opts.CompletedRetention > 0 {
		q.noteRetained(unixNanos(q.clock))
	}
	// The slot is free now, not when the success commits: the next claim
	// then shares the writer's transaction with these successes instead of
	// waiting for a commit of its own.
	p.freed(d)
}

// dropUnstarted ends d, which was released, lost or cancelled before its
// handler started.
func (p *pool) dropUnstarted(d *delivery) {
	if d.state() == dCancelled {
		p.dropCancelled(d, nil, 0)
		return
	}
	p.forget(d)
}

// dropResult ends d, whose handler returned err after its result had been
// dropped: in state st, the state the delivery holds. A cancelled job
// reports EventCancelled and a lost lease EventStale; a job released by
// Stop (or a pause) was reported by its release (EventReleased), and its
// handler's return changes nothing more.
func (p *pool) dropResult(d *delivery, st deliveryState, err error, took time.Duration) {
	switch st {
	case dCancelled:
		p.dropCancelled(d, err, took)
		return
	case dLost:
		p.q.emit(Event{Type: EventStale, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt, Err: err})
	case dReleased:
		p.q.log.Debug("litequeue: the handler of a released job returned; its result is dropped",
			LogJobID, d.id, LogQueue, d.queue, LogKind, d.kind, LogAttempt, d.attempt)
	}
	p.forget(d)
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

// finishTx checks that a CompleteTx transaction really committed.
func (p *pool) finishTx(d *delivery, policy RetryPolicy, took time.Duration) {
	holds, err := p.q.store.Holds(context.Background(), store.Lease{ID: d.id, Lease: d.lease})
	if err == nil && holds {
		p.fail(d, policy, errors.New("CompleteTx was called but its transaction did not commit"), took)
		return
	}
	p.succeeded(d, took)
	p.freed(d)
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

func (q *Queue) handlerFor(kind string) *handler {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.handlers[kind]
}

// PanicError is the failure recorded when a handler panics.
type PanicError struct {
	Value any    // what the handler panicked with
	Stack string // the goroutine's stack at the panic
}

func (e *PanicError) Error() string { return fmt.Sprintf("handler panicked: %v\n%s", e.Value, e.Stack) }

func safeCall(ctx context.Context, d *delivery, run func(context.Context, *delivery) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: string(debug.Stack())}
		}
	}()
	return run(ctx, d)
}

// decide applies the failure order: attempts used up, Permanent, RetryAfter,
// the queue's Strategy, the policy's backoff.
func (p *pool) decide(d *delivery, policy RetryPolicy, err error) (RetryDecision, Decision, string) {
	switch {
	case d.attempt >= policy.Attempts():
		return RetryDecision{}, DecisionGiveUp, fmt.Sprintf("attempts used up (%d of %d)", d.attempt, policy.Attempts())
	case IsPermanent(err):
		return RetryDecision{}, DecisionPermanent, "permanent error"
	}
	var ra *RetryAfterError
	if errors.As(err, &ra) {
		return RetryDecision{Retry: true, Delay: ra.Delay}, DecisionRetry, ""
	}
	def := p.q.randDecide(policy, d.attempt)
	if p.cfg.Strategy != nil {
		dec := p.cfg.Strategy(Failure{Attempt: d.attempt, Err: err, Job: d.info(), Policy: policy, Default: def})
		if !dec.Retry {
			return RetryDecision{}, DecisionGiveUp, "retry strategy refused"
		}
		return RetryDecision{Retry: true, Delay: max(dec.Delay, 0)}, DecisionRetry, ""
	}
	return def, DecisionRetry, ""
}

// fail records a failed attempt: the job is rescheduled or becomes a dead
// letter, with the attempt in its history, in one transaction.
func (p *pool) fail(d *delivery, policy RetryPolicy, herr error, took time.Duration) {
	p.settle(d, "recording a failure failed", policy.Attempts(), herr, p.failWrite(d, policy, herr, took), p.refusedWrite(d, policy, took))
}

// failWrite decides what follows d's failed attempt (once: jitter is drawn
// and OnDead asked now) and returns the write that records it and emits its
// events; it returns nil when written or when the lease was lost (then
// nothing changed). The error text is stored as storedText makes it.
func (p *pool) failWrite(d *delivery, policy RetryPolicy, herr error, took time.Duration) func() error {
	q := p.q
	dec, decision, reason := p.decide(d, policy, herr)
	now := q.clock.Now()
	started := d.started
	if started.IsZero() {
		started = now
	}
	msg := storedText(herr.Error(), MaxErrorBytes)
	due := addClamped(now, dec.Delay)
	if dec.Retry && dec.Delay > 0 && due-now.UnixNano() != int64(dec.Delay) {
		q.log.Warn("litequeue: retry delay runs past the latest time the queue can store; the retry is due then",
			LogJobID, d.id, LogQueue, d.queue, LogKind, d.kind, LogDelay, dec.Delay, "due", time.Unix(0, due).UTC())
		dec.Delay = time.Duration(due - now.UnixNano())
	}
	record := store.Attempt{Attempt: d.attempt, StartedAt: started.UnixNano(), FinishedAt: now.UnixNano(),
		Error: msg, Decision: string(decision), Delay: int64(dec.Delay)}
	l := store.Lease{ID: d.id, Lease: d.lease}
	var burial store.Burial
	if !dec.Retry {
		burial = store.Burial{Lease: l, At: now.UnixNano(), Reason: reason, LastError: &msg, Record: record}
		burial.FollowUp = p.followUp(d, herr, func() JobInfo { return p.deadInfo(d, &burial) })
	}
	return func() error {
		var err error
		if dec.Retry {
			err = q.store.Retry(context.Background(), store.Retry{Lease: l, Due: due, LastError: msg, Record: record})
			if err == nil {
				d.publishOutcome(StateScheduled)
				p.dueAt(time.Unix(0, due))
				q.emit(Event{Type: EventRetrying, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt,
					Delay: dec.Delay, Decision: decision, Err: herr, Duration: took})
			}
		} else {
			err = p.writeBurial(d, burial, Event{Type: EventDead, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt,
				Decision: decision, Err: herr, Duration: took})
		}
		if errors.Is(err, ErrLeaseLost) {
			q.emit(Event{Type: EventStale, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt, Err: herr})
			return nil
		}
		return err
	}
}

// bury dead-letters a job claimed after its last allowed attempt was lost
// with its process, without running it again.
func (p *pool) bury(d *delivery, policy RetryPolicy) {
	q := p.q
	now := q.clock.Now().UnixNano()
	// The last real attempt was the policy's last: later claims were only
	// meant to bury the job, and may themselves have died with a process.
	lost := min(d.attempt-1, policy.Attempts())
	reason := fmt.Sprintf("attempts used up: attempt %d of %d was lost with its process (lease expired)", lost, policy.Attempts())
	cause := errors.New(reason)
	burial := store.Burial{Lease: store.Lease{ID: d.id, Lease: d.lease}, At: now, Reason: reason, Attempt: lost,
		Record: store.Attempt{Attempt: lost, StartedAt: now, FinishedAt: now, Error: "lease expired: the worker was lost", Decision: string(DecisionGiveUp)}}
	burial.FollowUp = p.followUp(d, cause, func() JobInfo { return p.deadInfo(d, &burial) })
	dead := Event{Type: EventDead, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: lost, Decision: DecisionGiveUp, Err: cause}
	p.settle(d, "dead-lettering a lost job failed", policy.Attempts(), cause, func() error {
		err := p.writeBurial(d, burial, dead)
		if errors.Is(err, ErrLeaseLost) {
			q.log.Warn("litequeue: a lost job was not dead-lettered: another worker holds it now", LogJobID, d.id, LogError, err.Error())
			return nil
		}
		return err
	}, nil)
}

// releaseQueued returns the claimed, unstarted jobs of p.
func (p *pool) releaseQueued() {
	var ds []*delivery
	for {
		select {
		case <-p.tokens:
			p.mu.Lock()
			d := heap.Pop(&p.ready).(*delivery)
			p.mu.Unlock()
			if _, ok := d.move(setOf(dQueued), dReleased); ok {
				ds = append(ds, d)
			} else {
				p.dropUnstarted(d) // lost or cancelled while it waited
			}
			continue
		default:
		}
		break
	}
	p.release(ds)
}

// releaseRunning releases the jobs of p whose handlers have not returned
// and cancels those handlers' contexts with ErrQueueStopped. A handler that
// put its success into the caller's transaction (CompleteTx) is cancelled
// but not released: that transaction decides its outcome. An outcome being
// written, or kept because its write failed, is not released: its handler
// finished, and Stop tries its write once more.
func (p *pool) releaseRunning() {
	var ds []*delivery
	for _, d := range p.claimed() {
		_, released := d.move(beforeOutcome, dReleased)
		if !released && !inCallersTx.has(d.state()) {
			continue
		}
		d.mu.Lock()
		if d.cancel != nil {
			d.cancel(ErrQueueStopped)
		}
		d.mu.Unlock()
		if released {
			ds = append(ds, d)
		}
	}
	p.release(ds)
}

// releaseTimeout bounds how long a release on shutdown waits for the write
// lock; past it the jobs come back when their leases expire instead.
const releaseTimeout = 30 * time.Second

// release puts claimed jobs back to ready without using an attempt, those
// not yet decided otherwise (started, lost or cancelled: see
// delivery_state.go), and reports each with EventReleased.
func (p *pool) release(ds []*delivery) {
	ds = slices.DeleteFunc(ds, func(d *delivery) bool {
		_, ok := d.move(releasable, dReleased)
		return !ok
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

func (p *pool) forget(d *delivery) {
	p.mu.Lock()
	delete(p.inflight, d)
	p.mu.Unlock()
}

// claimed returns every delivery p holds claimed, queued or running.
func (p *pool) claimed() []*delivery {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Collect(maps.Keys(p.inflight))
}

// leasesOf names the claimed rows of ds.
func leasesOf(ds []*delivery) []store.Lease {
	leases := make([]store.Lease, len(ds))
	for i, d := range ds {
		leases[i] = store.Lease{ID: d.id, Lease: d.lease}
	}
	return leases
}
