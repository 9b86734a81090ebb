package litequeue

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// Attempts: a worker takes a claimed delivery, runs one attempt of its job in
// its handler (with its timeout, its middleware and panics caught), and
// turns what happened into an outcome, which record writes and reports
// (record.go).

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
	h := q.handlerFor(d.kind)
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
	run = q.wrap(d, policy.Attempts(), timeout, run)
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
	p.finishReports(d, ok && !lost && !inCallersTx.has(from) && (err != nil || q.opts.CompletedRetention > 0))
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

// awaitEnqueued waits, before d's EventStarted, until its EventEnqueued was
// emitted if an enqueue of this process still reports it.
func (q *Queue) awaitEnqueued(d *delivery) { q.gate.wait(d) }

// wrap returns run inside q's middleware, in the order of Use.
func (q *Queue) wrap(d *delivery, maxAttempts int, timeout time.Duration, run func(context.Context, *delivery) error) func(context.Context, *delivery) error {
	q.mu.Lock()
	mw := q.middleware
	q.mu.Unlock()
	if len(mw) == 0 {
		return run
	}
	h := HandlerFunc(func(ctx context.Context, _ AttemptInfo) error { return run(ctx, d) })
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	info := AttemptInfo{ID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt, MaxAttempts: maxAttempts,
		Priority: d.priority, Key: d.key, EnqueuedAt: time.Unix(0, d.createdAt), Timeout: timeout}
	return func(ctx context.Context, _ *delivery) error { return h(ctx, info) }
}
