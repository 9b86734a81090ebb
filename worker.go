package litequeue

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// CompleteTx marks the job succeeded inside the application's transaction tx,
// so the handler's own writes and the job's completion commit together or not
// at all (exactly-once for local effects). It needs a queue made by New on the
// same database. Like every write of a delivery it is conditional on the
// lease: if the lease was lost it returns ErrLeaseLost and tx should be rolled
// back. The handler must commit tx before it returns nil; if tx did not
// commit, the attempt counts as failed.
func (d *Delivery[J]) CompleteTx(ctx context.Context, tx *sql.Tx) error {
	if tx == nil {
		return ErrNoTx
	}
	return d.d.completeTx(ctx, tx)
}

// Register makes fn the handler of job type J on q: the queue runs fn for
// every job of J's kind, in J's queue. Register before Start.
//
// Register panics — these are programming errors — if J's kind or queue name
// is invalid, if the kind already has a handler on q, or if q has started.
func Register[J Job](q *Queue, fn func(ctx context.Context, d *Delivery[J]) error) {
	var zero J
	kind, queue := zero.Kind(), jobQueue(zero)
	if err := validName("kind", kind); err != nil {
		panic(fmt.Sprintf("litequeue.Register: %v", err))
	}
	if err := validName("queue", queue); err != nil {
		panic(fmt.Sprintf("litequeue.Register: %v", err))
	}
	h := &handler{kind: kind, queue: queue}
	// Whether J has a retry policy or a timeout of its own is a property of
	// its type, asked once here: asking each job converts it to an
	// interface, an allocation per job. (An interface type J is asked per
	// job: its values' types differ.)
	perJob := reflect.TypeFor[J]().Kind() == reflect.Interface
	_, policer := any(zero).(retryPolicer)
	_, timed := any(zero).(timeouter)
	policer, timed = policer || perJob, timed || perJob
	h.prepare = func(payload []byte) (jobOwn, func(context.Context, *delivery) error, error) {
		var job J
		var own jobOwn
		err := json.Unmarshal(payload, &job)
		if timed {
			own.timeout, own.hasTimeout = ownTimeout(job)
		}
		if err != nil {
			return own, nil, fmt.Errorf("payload does not decode into %T: %w", job, err)
		}
		var policy *RetryPolicy
		if policer {
			if rp, ok := any(job).(retryPolicer); ok {
				policy = rp.RetryPolicy()
			}
		}
		own.policy = policy
		run := func(ctx context.Context, d *delivery) error {
			m := d.metadata()
			return fn(ctx, &Delivery[J]{
				Job: job, ID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt,
				MaxAttempts: d.p.policy(policy).Attempts(), Priority: d.priority, Key: d.key,
				EnqueuedAt: time.Unix(0, d.createdAt), LastError: d.lastErr, d: d,
				Tags: m.tags, Metadata: m.metadata, Trace: m.trace, Occurrence: m.occurrence,
			})
		}
		return own, run, nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.run != nil {
		panic("litequeue.Register: queue already started; register every handler before Start")
	}
	if _, dup := q.handlers[kind]; dup {
		panic(fmt.Sprintf("litequeue.Register: kind %q already has a handler", kind))
	}
	q.handlers[kind] = h
}

func (r *runState) wake(queue string) {
	if p, ok := r.pools[queue]; ok {
		p.signal()
	}
}

func (r *runState) wakeAll() {
	r.sched.wake()
	for _, p := range r.pools {
		p.signal()
	}
}

// Start starts a pool of workers for every queue that has registered
// handlers and returns once they run. Workers claim only the kinds registered
// here, so processes with different handlers can share one file. ctx's values
// reach the handlers; cancelling ctx stops the queue as Stop with an expired
// context would. Start on a started queue returns ErrAlreadyStarted.
func (q *Queue) Start(ctx context.Context) error {
	if err := q.writable(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.run != nil {
		return ErrAlreadyStarted
	}
	r := newRunState(q, ctx)
	byQueue := map[string][]string{}
	for kind, h := range q.handlers {
		byQueue[h.queue] = append(byQueue[h.queue], kind)
	}
	if err := q.checkQueueConfigs(byQueue); err != nil {
		return err
	}
	for name, kinds := range byQueue {
		cfg, ok := q.configs[name]
		if !ok {
			cfg = NewQueueConfig(name).withDefaults()
		}
		r.pools[name] = newPool(q, r, cfg, kinds)
	}
	r.sched = newScheduler(&q.core, &r.bg, r.stopping, r.wake)
	// Registered before the first claim, which writes the process's id. A
	// failed registration does not stop the queue: the next heartbeat
	// writes the row.
	r.proc = processRow(&q.core, r)
	if err := r.beat(ctx); err != nil {
		q.log.Error("litequeue: registering the process (Processes shows it from its next heartbeat)", LogError, err.Error())
	}
	// The watch's baseline comes before the first claim, so that a write by
	// another process at any moment after it is noticed.
	if err := r.initPaused(ctx); err != nil {
		return wrapf("litequeue: start: %w", err)
	}
	if err := r.initLimits(ctx); err != nil {
		return wrapf("litequeue: start: %w", err)
	}
	watchCtx, stopWatch := context.WithCancel(context.Background())
	if err := q.store.Watch(watchCtx, q.opts.PollInterval, r.watchWake); err != nil {
		stopWatch()
		_ = q.store.Unregister(context.Background(), r.proc.ID)
		return wrapf("litequeue: start: %w", err)
	}
	r.stopWatch = stopWatch
	r.sched.start()
	q.run = r
	for _, p := range r.pools {
		for range p.cfg.Concurrency {
			p.workers.Add(1)
			go p.work()
		}
		r.bg.Add(1)
		go p.dispatch()
		r.keep.Add(1)
		go p.extendLeases()
	}
	r.bg.Add(1)
	go r.maintain()
	r.startHeartbeat()
	if ctx.Done() != nil {
		go func() {
			select {
			case <-ctx.Done():
				expired, cancel := context.WithCancel(context.Background())
				cancel()
				_ = q.stopRun(expired, r)
			case <-r.stopping:
			}
		}()
	}
	q.log.Info("litequeue: started", "queues", len(r.pools))
	return nil
}

// checkQueueConfigs reports handled queues without a QueueConfig and
// configured queues without a handler: an error under Options.StrictQueues,
// else a warning and an EventConfigWarning each. q.mu is held.
func (q *Queue) checkQueueConfigs(byQueue map[string][]string) error {
	var problems []error
	for _, name := range slices.Sorted(maps.Keys(byQueue)) {
		if _, ok := q.configs[name]; !ok {
			problems = append(problems, &QueueConfigError{Queue: name, Problem: fmt.Sprintf(
				"has handlers (kinds %s) but no entry in Options.Queues, so it runs with NewQueueConfig's defaults: one attempt, no retries", strings.Join(byQueue[name], ", "))})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(q.configs)) {
		if _, ok := byQueue[name]; !ok {
			problems = append(problems, &QueueConfigError{Queue: name, Problem: "is configured in Options.Queues but no registered handler uses it"})
		}
	}
	if q.opts.StrictQueues {
		return errors.Join(problems...)
	}
	for _, err := range problems {
		var qe *QueueConfigError
		errors.As(err, &qe)
		q.log.Warn("litequeue: queue configuration", LogQueue, qe.Queue, LogError, err.Error())
		q.deliver(Event{Type: EventConfigWarning, Time: q.clock.Now(), Queue: qe.Queue, Err: err})
	}
	return nil
}

// newRunState returns the state of a run of q whose handlers see ctx's
// values.
func newRunState(q *Queue, ctx context.Context) *runState {
	return &runState{q: &q.core, handlers: maps.Clone(q.handlers), middleware: slices.Clone(q.middleware),
		base: context.WithoutCancel(ctx), pools: map[string]*pool{},
		stopping: make(chan struct{}), settled: make(chan struct{}), stopped: make(chan struct{}), escalate: make(chan struct{})}
}

// newPool makes the pool that runs the given kinds of cfg's queue under r.
func newPool(q *Queue, r *runState, cfg QueueConfig, kinds []string) *pool {
	kinds = slices.Clone(kinds)
	sort.Strings(kinds)
	kj, _ := json.Marshal(kinds)
	p := &pool{
		q: &q.core, r: r, cfg: cfg, kindList: kinds, kindsJSON: string(kj),
		capacity:   cfg.Concurrency + 2*q.opts.ClaimBatch,
		prefetch:   newPrefetch(cfg.Concurrency, q.opts.ClaimBatch),
		wakeCh:     make(chan struct{}, 1),
		due:        newAlarm(q.clock),
		ext:        newAlarm(q.clock),
		inflight:   map[*delivery]struct{}{},
		completing: map[*delivery]struct{}{},
		kinds:      map[string]bool{},
	}
	for _, k := range kinds {
		p.kinds[k] = true
	}
	p.tokens = make(chan struct{}, p.capacity)
	return p
}

// Stop stops the workers gracefully: no new claims; jobs claimed but not
// started are released at once; running handlers may finish until ctx ends,
// and their leases are extended meanwhile. Then their contexts are cancelled
// and their leases released, so a restart (or another process) picks them up
// at once. A job released by shutdown does not use up an attempt. Pending
// successes are written, and their EventSucceeded delivered, before Stop
// returns; so are the per-minute history's counts (see FlushHistory). Stop returns nil on a queue that is not running. A handler that
// ignores its cancelled context keeps running after Stop returns; its result
// is dropped.
//
// A Stop called while another is in progress waits for it; if its own ctx
// ends first, the running handlers are released at once, as if the first
// Stop's context had ended.
func (q *Queue) Stop(ctx context.Context) error {
	q.mu.Lock()
	r := q.run
	q.mu.Unlock()
	if r == nil {
		return nil
	}
	return q.stopRun(ctx, r)
}

func (q *Queue) stopRun(ctx context.Context, r *runState) error {
	first := false
	r.stopOnce.Do(func() { first = true })
	if !first {
		select {
		case <-r.stopped:
		case <-ctx.Done():
			r.escOnce.Do(func() { close(r.escalate) })
			<-r.stopped
		}
		return r.stopErr
	}
	close(r.stopping)
	r.stopWatch()
	r.bg.Wait() // dispatchers and the maintenance loop have exited: no new claims
	// Jobs claimed but never started go back at once.
	for _, p := range r.pools {
		p.mu.Lock()
		p.stopped = true
		p.mu.Unlock()
		p.releaseQueued()
	}
	waited := make(chan struct{})
	go func() {
		for _, p := range r.pools {
			p.workers.Wait()
		}
		close(waited)
	}()
	select {
	case <-waited:
	case <-ctx.Done():
		r.releaseRunning()
	case <-r.escalate:
		r.releaseRunning()
	}
	close(r.settled)
	r.keep.Wait() // lease extension ran until every handler returned or was released
	// Commit pending successes (and anything else queued), and hand their
	// events to OnEvent.
	if e := q.store.Flush(context.Background()); e != nil {
		r.stopErr = e
	}
	// Outcomes whose writes failed get a last try; those still failing
	// are given up, and their jobs run again when their leases end.
	for _, p := range r.pools {
		p.rewrite()
		p.abandonUnwritten()
	}
	_ = q.FlushEvents(context.Background())
	// The per-minute history of the events so far, the current minute's
	// included: a process that stops within a minute keeps its counts.
	_ = q.FlushHistory(context.Background())
	if err := q.store.Unregister(context.Background(), r.proc.ID); err != nil {
		q.log.Error("litequeue: removing the process from the registry", LogError, err.Error())
	}
	q.mu.Lock()
	q.run = nil
	q.mu.Unlock()
	q.log.Info("litequeue: stopped")
	close(r.stopped)
	return r.stopErr
}

// Running reports how many handlers of the named queue run in this process
// now.
func (q *Queue) Running(queue string) int {
	q.mu.Lock()
	r := q.run
	q.mu.Unlock()
	if r == nil {
		return 0
	}
	if p, ok := r.pools[queue]; ok {
		return int(p.running.Load())
	}
	return 0
}

// Use adds middleware to every handler of q, in order: the first given is
// the outermost, so Use(a, b) runs a, then b, then the handler. Several
// calls append. Use before Start.
//
// Use panics — a programming error — if q has started or a middleware is
// nil.
func (q *Queue) Use(mw ...Middleware) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.run != nil {
		panic("litequeue.Use: queue already started; add middleware before Start")
	}
	for i, m := range mw {
		if m == nil {
			panic("litequeue.Use: middleware " + strconv.Itoa(i) + " is nil")
		}
	}
	q.middleware = append(q.middleware, mw...)
}
