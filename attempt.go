package litequeue

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// Attempts: a worker takes a claimed delivery, runs one attempt of its job in
// its handler (with its timeout, its middleware and panics caught), and
// decides from what the handler returned and the retry policy what follows —
// a success, a retry after a delay, a dead letter or a snooze — as an
// outcome, which record writes and reports (record.go).

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
	p.record(d, p.runAttempt(d))
}

// runAttempt runs d's handler, if it is to run, and returns the attempt's
// outcome.
func (p *pool) runAttempt(d *delivery) outcome {
	q := p.q
	h := p.r.handlers[d.kind]
	if h == nil { // cannot happen: we claim only registered kinds
		return outcome{kind: outRelease}
	}
	own, run, decodeErr := h.prepare(d.payload)
	policy := p.policy(own.policy)
	timeout := timeoutFor(own.timeout, own.hasTimeout, p.cfg.Timeout)
	if d.attempt > policy.Attempts() || decodeErr != nil {
		// No handler runs: the outcome is decided now.
		if !d.decideUnstarted() {
			return droppedOutcome(d.state(), false, nil, 0)
		}
		if d.attempt > policy.Attempts() {
			// The last allowed attempt died with its process: no crash loop.
			return p.lostAttempt(d, policy)
		}
		return p.failed(d, policy, Permanent(decodeErr), 0)
	}
	ctx, cancel := context.WithCancelCause(p.r.base)
	defer cancel(nil)
	var hctx context.Context = ctx
	if timeout > 0 {
		var c2 context.CancelFunc
		hctx, c2 = withClockTimeout(q.clock, ctx, timeout, &TimeoutError{Timeout: timeout})
		defer c2()
	}
	run = wrap(p.r.middleware, d, policy.Attempts(), timeout, run)
	d.mu.Lock()
	d.cancel = cancel
	d.mu.Unlock()
	if p.paused.Load() && d.releaseUnstarted() { // the queue was paused after this job was claimed
		return outcome{kind: outRelease}
	}
	if !d.start() { // released by shutdown, lost or cancelled before it started
		return droppedOutcome(d.state(), false, nil, 0)
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
	// A workflow's parent writes its output for its children to read
	// (workflow.go) even when its row is deleted on success.
	p.finishReports(d, ok && !lost && !inCallersTx.has(from) && (err != nil || p.completedRetention() > 0 || flowOf(d.meta)&store.FlowParent != 0))
	p.running.Add(-1)
	took := q.clock.Since(d.started)
	if !ok {
		return droppedOutcome(from, true, err, took)
	}
	if lost {
		return outcome{kind: outNotWritten, ran: true, err: err, took: took, policy: policy}
	}
	if err != nil && timeout > 0 && errors.Is(hctx.Err(), context.DeadlineExceeded) && !errors.As(err, new(*TimeoutError)) {
		err = fmt.Errorf("%w: %w", &TimeoutError{Timeout: timeout}, err)
	}
	return p.returnedWith(d, policy, inCallersTx.has(from), err, took)
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

// awaitEnqueued waits, before d's EventStarted, until its EventEnqueued was
// emitted if an enqueue of this process still reports it.
func (c *core) awaitEnqueued(d *delivery) { c.gate.wait(d.queue, d.kind, d.createdAt, d.attempt) }

// returnedWith is the outcome of d's attempt whose handler returned err
// after took; inTx when it put its success into the caller's transaction.
func (p *pool) returnedWith(d *delivery, policy RetryPolicy, inTx bool, err error, took time.Duration) outcome {
	if err != nil {
		if se := (*SnoozeError)(nil); errors.As(err, &se) {
			return p.snoozedFor(d, policy, se, err, took)
		}
		return p.failed(d, policy, err, took)
	}
	if inTx {
		return outcome{kind: outSucceededTx, ran: true, took: took, policy: policy}
	}
	return outcome{kind: outSucceeded, ran: true, took: took, policy: policy, at: unixNanos(p.q.clock)}
}

// droppedOutcome is the outcome of an attempt whose result was dropped before it
// had one: st is the state its delivery holds (cancelled, lost, released);
// ran tells whether its handler ran (and returned err after took).
func droppedOutcome(st deliveryState, ran bool, err error, took time.Duration) outcome {
	o := outcome{kind: outReleased, ran: ran, err: err, took: took}
	switch st {
	case dCancelled:
		o.kind = outCancelled
	case dLost:
		o.kind = outLeaseLost
	}
	return o
}

// failed decides what follows d's failed attempt, which ended with herr
// after took: a retry after a delay or a dead letter. It is decided once:
// jitter is drawn and OnDead asked now. The error text is stored as
// storedText makes it.
func (p *pool) failed(d *delivery, policy RetryPolicy, herr error, took time.Duration) outcome {
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
	record := p.r.stamp(store.Attempt{Attempt: d.attempt, StartedAt: started.UnixNano(), FinishedAt: now.UnixNano(),
		Error: msg, Decision: string(decision), Delay: int64(dec.Delay)})
	l := store.Lease{ID: d.id, Lease: d.lease}
	o := outcome{ran: true, err: herr, took: took, policy: policy, decision: decision, delay: dec.Delay}
	if dec.Retry {
		o.kind = outRetry
		o.retry = store.Retry{Lease: l, Due: due, LastError: msg, Record: record}
		return o
	}
	o.kind = outDead
	o.burial = store.Burial{Lease: l, At: now.UnixNano(), Reason: reason, LastError: &msg, Record: record}
	o.burial.FollowUp = p.followUp(d, herr, func() JobInfo { return p.deadInfo(d, &o.burial) })
	return o
}

// lostAttempt is the dead letter of a job claimed after its last allowed
// attempt was lost with its process: it does not run again.
func (p *pool) lostAttempt(d *delivery, policy RetryPolicy) outcome {
	now := p.q.clock.Now().UnixNano()
	// The last real attempt was the policy's last: later claims were only
	// meant to bury the job, and may themselves have died with a process.
	lost := min(d.attempt-1, policy.Attempts())
	reason := fmt.Sprintf("attempts used up: attempt %d of %d was lost with its process (lease expired)", lost, policy.Attempts())
	o := outcome{kind: outDead, lostJob: true, err: errors.New(reason), policy: policy, decision: DecisionGiveUp}
	o.burial = store.Burial{Lease: store.Lease{ID: d.id, Lease: d.lease}, At: now, Reason: reason, Attempt: lost,
		Record: store.Attempt{Attempt: lost, StartedAt: now, FinishedAt: now, Error: "lease expired: the worker was lost", Decision: string(DecisionGiveUp)}}
	o.burial.FollowUp = p.followUp(d, o.err, func() JobInfo { return p.deadInfo(d, &o.burial) })
	return o
}

// snoozedFor is the outcome of d's attempt whose handler snoozed (se, in
// err): the job is rescheduled without using its attempt or, past the
// queue's MaxSnoozes (which the store checks), fails with a
// *SnoozeLimitError.
func (p *pool) snoozedFor(d *delivery, policy RetryPolicy, se *SnoozeError, err error, took time.Duration) outcome {
	now := p.q.clock.Now()
	due := addClamped(now, se.Delay)
	started := d.started
	if started.IsZero() {
		started = now
	}
	maxSnoozes := p.cfg.MaxSnoozes
	if maxSnoozes <= 0 {
		maxSnoozes = DefaultMaxSnoozes
	}
	return outcome{kind: outSnoozed, ran: true, err: err, took: took, policy: policy, decision: DecisionSnooze, delay: se.Delay,
		snooze: store.Snooze{Lease: store.Lease{ID: d.id, Lease: d.lease}, Due: due, Max: maxSnoozes,
			Record: p.r.stamp(store.Attempt{Attempt: d.attempt, StartedAt: started.UnixNano(), FinishedAt: now.UnixNano(),
				Error: se.Error(), Decision: string(DecisionSnooze), Delay: int64(se.Delay)})}}
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

// timeoutFor returns the timeout in force for an attempt: the job type's
// own when it is positive, none when it is negative, the queue's when it is
// zero or the type has none.
func timeoutFor(own time.Duration, hasOwn bool, queueTimeout time.Duration) time.Duration {
	switch {
	case hasOwn && own > 0:
		return own
	case hasOwn && own < 0:
		return 0
	}
	return queueTimeout
}

// policy returns the policy in force: the job's own when non-nil, else the
// queue's.
func (p *pool) policy(own *RetryPolicy) RetryPolicy {
	if own != nil {
		return *own
	}
	return p.cfg.Retry
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

// wrap returns run inside the middleware mw, the first outermost (the order
// of Use).
func wrap(mw []Middleware, d *delivery, maxAttempts int, timeout time.Duration, run func(context.Context, *delivery) error) func(context.Context, *delivery) error {
	if len(mw) == 0 {
		return run
	}
	h := HandlerFunc(func(ctx context.Context, _ AttemptInfo) error { return run(ctx, d) })
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	m := d.metadata()
	info := AttemptInfo{ID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt, MaxAttempts: maxAttempts,
		Priority: d.priority, Key: d.key, EnqueuedAt: time.Unix(0, d.createdAt), Timeout: timeout,
		Trace: m.trace, Tags: m.tags, Metadata: m.metadata}
	return func(ctx context.Context, _ *delivery) error { return h(ctx, info) }
}
