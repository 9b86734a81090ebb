package litequeue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/litequeue/litequeue/internal/kitlink"
	"github.com/litequeue/litequeue/internal/sqlite"
	"github.com/litequeue/litequeue/internal/store"
)

// The test kit (package litequeuetest) reaches the queue through the typed
// link of internal/kitlink, registered here; nothing here is exported.
func init() { kitlink.Register[*Queue, *Options](kitLink{}) }

// kitLink is the root package's kitlink.Link.
type kitLink struct{}

// Open opens the queue as Open does, over the store f.Wrap makes of the
// SQLite store, with the outcome hooks of f.
func (kitLink) Open(name string, opts *Options, f kitlink.Faults) (*Queue, error) {
	o, st, err := openStore(name, opts)
	if err != nil {
		return nil, err
	}
	return withLimits(withFaults(o, st, f))
}

// New makes the queue as New does on the application's db, over the store
// f.Wrap makes of the SQLite store, with the outcome hooks of f.
func (kitLink) New(db *sql.DB, opts *Options, f kitlink.Faults) (*Queue, error) {
	o, st, err := newStore(db, opts)
	if err != nil {
		return nil, err
	}
	return withLimits(withFaults(o, st, f))
}

// withFaults makes the queue on st with f's hooks.
func withFaults(o Options, st *sqlite.Store, f kitlink.Faults) *Queue {
	var b store.Backend = st
	if f.Wrap != nil {
		b = f.Wrap(st)
	}
	q := newQueue(o, b, st, o.ReadOnly)
	q.faults = kitlink.Faults{Drop: f.Drop, Lost: f.Lost}
	return q
}

func (kitLink) Handled(q *Queue) []kitlink.Pair { return q.handledPairs() }

func (kitLink) Store(q *Queue) store.Backend { return q.store }

func (kitLink) Load(ctx context.Context, q *Queue) (kitlink.Load, error) { return q.load(ctx) }

func (kitLink) Capture(register func(*Queue)) kitlink.Handler { return captureHandler(register) }

func (kitLink) Run(ctx context.Context, h kitlink.Handler, cfg *Queue, payload []byte, spec kitlink.Spec) error {
	return runHandler(ctx, h.(*handler), cfg, payload, spec)
}

func (kitLink) RunStored(ctx context.Context, h kitlink.Handler, q *Queue, payload []byte, spec kitlink.Spec) (int64, error) {
	return runStored(ctx, h.(*handler), q, payload, spec)
}

// Registered returns the kind and the queue h was registered for.
func (h *handler) Registered() (kind, queue string) { return h.kind, h.queue }

// dropOutcome asks the test kit's fault hooks whether the outcome of d's
// attempt, which ended with err, is lost with its process; if so it reports
// the loss. Without hooks it returns false.
func (c *core) dropOutcome(d *delivery, maxAttempts int, err error) bool {
	if c.faults.Drop == nil || !c.faults.Drop(d.outcome(maxAttempts, err)) {
		return false
	}
	c.outcomeLost(d, maxAttempts, err)
	return true
}

// outcomeLost tells the test kit's fault hooks, if any, that the outcome of
// d's attempt was not written: its row stays running until its lease ends.
func (c *core) outcomeLost(d *delivery, maxAttempts int, err error) {
	if c.faults.Lost != nil {
		c.faults.Lost(d.outcome(maxAttempts, err))
	}
}

func (d *delivery) outcome(maxAttempts int, err error) kitlink.Outcome {
	return kitlink.Outcome{ID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt, MaxAttempts: maxAttempts,
		Err: err, Started: !d.started.IsZero()}
}

// handledPairs lists the queue and kind of every registered handler.
func (q *Queue) handledPairs() []kitlink.Pair {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]kitlink.Pair, 0, len(q.handlers))
	for kind, h := range q.handlers {
		out = append(out, kitlink.Pair{Queue: h.queue, Kind: kind})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}

// testingStore returns q's store as the test kit's store.Testing.
func (q *Queue) testingStore() (store.Testing, error) {
	ts, ok := q.store.(store.Testing)
	if !ok {
		return nil, fmt.Errorf("litequeue: the queue's store (%T) has no test-kit operations", q.store)
	}
	return ts, nil
}

// load reads how busy the handled jobs of q are at its Clock's now.
func (q *Queue) load(ctx context.Context) (kitlink.Load, error) {
	pairs := q.handledPairs()
	handled := make([]store.Handled, len(pairs))
	for i, p := range pairs {
		handled[i] = store.Handled{Queue: p.Queue, Kind: p.Kind}
	}
	ts, err := q.testingStore()
	if err != nil {
		return kitlink.Load{}, err
	}
	sl, err := ts.LoadOf(ctx, handled, unixNanos(q.clock))
	if err != nil {
		return kitlink.Load{}, wrapf("litequeue: reading the queue's load: %w", err)
	}
	l := kitlink.Load{Busy: sl.Busy, Unhandled: sl.Unhandled, HasNext: sl.HasNext, Unwritten: q.unwrittenCount()}
	if sl.HasNext {
		l.Next = time.Unix(0, sl.Next)
	}
	if l.Busy == 0 {
		return l, nil
	}
	// Ready jobs held by their queue's limits are not busy: they wait for
	// a slot or a rate window, which the Clock frees (limits_held.go).
	held, free, ok, err := q.heldByLimits(ctx, handled, unixNanos(q.clock))
	if err != nil {
		return kitlink.Load{}, wrapf("litequeue: reading the jobs held by limits: %w", err)
	}
	l.Busy -= held
	if ok && (!l.HasNext || free.Before(l.Next)) {
		l.Next, l.HasNext = free, true
	}
	return l, nil
}

// captureHandler registers on a bare queue (no file) and returns what was
// registered.
func captureHandler(register func(q *Queue)) *handler {
	bare := &Queue{handlers: map[string]*handler{}}
	bare.configs = map[string]QueueConfig{}
	register(bare)
	for _, h := range bare.handlers {
		return h
	}
	panic("litequeuetest: the register function registered no handler")
}

// runStored stores the job in q as claimed (a running row under a new
// lease, at spec.Attempt), runs h on it, and records the outcome as a
// worker would: a success completes the job (unless CompleteTx did), a
// failure schedules the retry or makes the dead letter, with the attempt in
// the job's history, and events are emitted.
func runStored(ctx context.Context, h *handler, q *Queue, payload []byte, spec kitlink.Spec) (int64, error) {
	if err := q.writable(); err != nil {
		return 0, err
	}
	queue := spec.Queue
	if queue == "" {
		queue = h.queue
	}
	// The pool is a stand-in for the dispatcher's: its alarm (which a retry
	// sets) has no listener; a retry wakes the queue's running dispatcher,
	// if any, instead.
	p := &pool{q: &q.core, cfg: q.config(queue), due: newAlarm(q.clock)}
	defer p.due.stop()
	now := q.clock.Now()
	created := spec.EnqueuedAt
	if created.IsZero() {
		created = now
	}
	nj := store.NewJob{Queue: queue, Kind: h.kind, Priority: spec.Priority, VisibleAt: created.UnixNano(),
		CreatedAt: created.UnixNano(), Payload: payload, Key: spec.Key}
	attempt := max(spec.Attempt, 1)
	lease := q.nextLease()
	ts, err := q.testingStore()
	if err != nil {
		return 0, err
	}
	id, err := ts.InsertRunning(ctx, nj, store.RunningClaim{Lease: lease, Attempt: attempt, At: now.UnixNano(),
		Until: now.Add(p.cfg.VisibilityTimeout).UnixNano(), LastError: spec.LastError})
	if err != nil {
		return 0, wrapf("litequeue: storing the job for the test: %w", err)
	}
	q.emit(Event{Type: EventEnqueued, JobID: id, Queue: queue, Kind: h.kind})
	d := &delivery{q: &q.core, p: p, id: id, lease: lease, queue: queue, kind: h.kind, attempt: attempt,
		priority: spec.Priority, payload: payload, key: spec.Key, createdAt: nj.CreatedAt, dueAt: nj.VisibleAt,
		lastErr: spec.LastError}
	own, run, decodeErr := h.prepare(payload)
	policy := p.policy(own.policy)
	timeout := timeoutFor(own.timeout, own.hasTimeout, p.cfg.Timeout)
	if decodeErr != nil {
		herr := Permanent(decodeErr)
		p.fail(d, policy, herr, 0)
		return id, herr
	}
	d.started = now
	d.start()
	q.emit(Event{Type: EventStarted, JobID: id, Queue: queue, Kind: h.kind, Attempt: attempt})
	hctx := ctx
	if t := timeout; t > 0 {
		var cancel context.CancelFunc
		hctx, cancel = withClockTimeout(q.clock, ctx, t, &TimeoutError{Timeout: t})
		defer cancel()
	}
	herr := safeCall(hctx, d, wrap(q.middlewareNow(), d, policy.Attempts(), timeout, run))
	from, _ := d.returned()
	inTx := inCallersTx.has(from)
	p.finishReports(d, !inTx && (herr != nil || p.completedRetention() > 0))
	took := q.clock.Since(now)
	if herr != nil && timeout > 0 && errors.Is(hctx.Err(), context.DeadlineExceeded) && !errors.As(herr, new(*TimeoutError)) {
		herr = fmt.Errorf("%w: %w", &TimeoutError{Timeout: timeout}, herr)
	}
	switch {
	case herr != nil:
		if !p.snoozed(d, policy, herr, took) {
			p.fail(d, policy, herr, took)
		}
		q.wake(queue)
	case inTx:
		p.finishTx(d, policy, took)
	default:
		done := make(chan error, 1)
		q.store.Complete(store.Completion{Lease: store.Lease{ID: id, Lease: lease}, At: unixNanos(q.clock),
			Keep: p.completedRetention() > 0, Notify: func(err error) { done <- err }})
		err := q.store.Flush(ctx)
		if err == nil {
			err = <-done
		}
		if err != nil {
			return id, wrapf("litequeue: recording the success of job %d: %w", id, err)
		}
		q.emit(Event{Type: EventSucceeded, JobID: id, Queue: queue, Kind: h.kind, Attempt: attempt, Duration: took})
	}
	return id, herr
}

// runHandler runs one attempt of h on payload as a worker would, without a
// claim: the delivery has no lease. q, when not nil, is the queue whose
// configuration applies.
func runHandler(ctx context.Context, h *handler, q *Queue, payload []byte, spec kitlink.Spec) error {
	if q == nil {
		o := (*Options)(nil).withDefaults()
		q = &Queue{handlers: map[string]*handler{}}
		q.opts, q.clock, q.log, q.rnd, q.configs = o, o.Clock, o.Logger, o.Rand, map[string]QueueConfig{}
	}
	queue := spec.Queue
	if queue == "" {
		queue = h.queue
	}
	p := &pool{q: &q.core, cfg: q.config(queue)}
	created := spec.EnqueuedAt
	if created.IsZero() {
		created = q.clock.Now()
	}
	d := &delivery{q: &q.core, p: p, id: spec.ID, queue: queue, kind: h.kind, attempt: max(spec.Attempt, 1),
		priority: spec.Priority, payload: payload, key: spec.Key, createdAt: created.UnixNano(),
		dueAt: created.UnixNano(), lastErr: spec.LastError, started: q.clock.Now()}
	d.start()
	own, run, err := h.prepare(payload)
	if err != nil {
		return Permanent(err)
	}
	run = wrap(q.middlewareNow(), d, p.policy(own.policy).Attempts(), timeoutFor(own.timeout, own.hasTimeout, p.cfg.Timeout), run)
	if t := timeoutFor(own.timeout, own.hasTimeout, p.cfg.Timeout); t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = withClockTimeout(q.clock, ctx, t, &TimeoutError{Timeout: t})
		defer cancel()
		err := safeCall(ctx, d, run)
		if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && !errors.As(err, new(*TimeoutError)) {
			err = fmt.Errorf("%w: %w", &TimeoutError{Timeout: t}, err)
		}
		return err
	}
	return safeCall(ctx, d, run)
}

// middlewareNow returns the middleware added to q so far.
func (q *Queue) middlewareNow() []Middleware {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.middleware
}
