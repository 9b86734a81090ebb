package litequeue

import (
	"container/heap"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Delivery is one attempt at a job, handed to its handler.
type Delivery[J Job] struct {
	// Job is the decoded payload.
	Job J
	// ID is the job's stable identity, the same on every attempt.
	ID int64
	// Queue and Kind are where the job lives and what runs it.
	Queue, Kind string
	// Attempt is this attempt's number: 1 on the first try.
	Attempt int
	// MaxAttempts is the policy's total attempts in force for the job.
	MaxAttempts int
	// Priority is the job's priority (lower runs first).
	Priority int
	// Key is the job's idempotency key, empty if none.
	Key string
	// EnqueuedAt is when the job was first enqueued.
	EnqueuedAt time.Time
	// LastError is the error of the previous attempt, empty on the first.
	LastError string

	d *delivery
}

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

// delivery is the untyped state of one claimed job.
type delivery struct {
	q         *Queue
	p         *pool
	id        int64
	lease     int64
	queue     string
	kind      string
	attempt   int
	priority  int
	payload   []byte
	key       string
	createdAt int64
	dueAt     int64 // when this attempt became due: the order among claimed jobs
	lastErr   string

	started  time.Time
	cancel   context.CancelCauseFunc
	mu       sync.Mutex // guards cancel
	inTx     atomic.Bool
	released atomic.Bool // shutdown or lease loss: this worker's result is dropped
}

func (d *delivery) info() JobInfo {
	return JobInfo{
		ID: d.id, Queue: d.queue, Kind: d.kind, State: StateRunning, Attempt: d.attempt,
		Priority: d.priority, Key: d.key, Payload: json.RawMessage(d.payload),
		CreatedAt: time.Unix(0, d.createdAt), LastError: d.lastErr,
	}
}

func (d *delivery) completeTx(ctx context.Context, tx *sql.Tx) error {
	var res sql.Result
	var err error
	if r := d.q.opts.CompletedRetention; r > 0 {
		now := unixNanos(d.q.clock)
		res, err = tx.ExecContext(ctx, completeKeepSQL, now, d.id, d.lease)
		d.q.noteRetained(now)
	} else {
		res, err = tx.ExecContext(ctx, completeDeleteSQL, d.id, d.lease)
	}
	if err != nil {
		return fmt.Errorf("litequeue: complete job %d: %w", d.id, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("litequeue: complete job %d: %w", d.id, ErrLeaseLost)
	}
	d.inTx.Store(true)
	return nil
}

// handler is a registered handler, type-erased.
type handler struct {
	kind, queue string
	// prepare decodes a payload and returns the job's own policy (nil if it
	// has none) and a function that runs the handler on it.
	prepare func(payload []byte) (policy *RetryPolicy, run func(ctx context.Context, d *delivery) error, err error)
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
	h.prepare = func(payload []byte) (*RetryPolicy, func(context.Context, *delivery) error, error) {
		var job J
		if err := json.Unmarshal(payload, &job); err != nil {
			return nil, nil, fmt.Errorf("payload does not decode into %T: %w", job, err)
		}
		var policy *RetryPolicy
		if rp, ok := any(job).(retryPolicer); ok {
			policy = rp.RetryPolicy()
		}
		run := func(ctx context.Context, d *delivery) error {
			return fn(ctx, &Delivery[J]{
				Job: job, ID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt,
				MaxAttempts: d.p.policy(policy).Attempts(), Priority: d.priority, Key: d.key,
				EnqueuedAt: time.Unix(0, d.createdAt), LastError: d.lastErr, d: d,
			})
		}
		return policy, run, nil
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

// runState is the state of a started queue.
type runState struct {
	q     *Queue
	base  context.Context // values for handlers; never cancelled by Start's caller alone
	pools map[string]*pool

	stopping chan struct{}  // closed when Stop begins: no new claims
	settled  chan struct{}  // closed once running handlers returned or were released: leases need no more extending
	stopped  chan struct{}  // closed when Stop has finished
	escalate chan struct{}  // closed by a Stop whose context ended while another Stop waits
	bg       sync.WaitGroup // dispatchers and the maintenance loop
	keep     sync.WaitGroup // lease extenders: they run until settled
	stopOnce sync.Once
	escOnce  sync.Once
	stopErr  error
	sched    *scheduler // enqueues the stored schedules' occurrences
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

// pool runs one queue's handlers in this process.
type pool struct {
	q         *Queue
	r         *runState
	cfg       QueueConfig
	kindsJSON string
	capacity  int

	wakeCh chan struct{}
	due    *alarm        // the dispatcher's wake-up at the next due time
	tokens chan struct{} // one per delivery in ready; capacity bounds the claimed jobs
	busy   chan struct{} // signalled when inflight stops being empty

	mu       sync.Mutex
	ready    readyHeap              // claimed, not yet started: most urgent first
	inflight map[*delivery]struct{} // claimed, queued or running: each claim is its own entry
	full     bool                   // the last claim filled its batch: more may be due
	reserved int                    // slots held for enqueues that claim their own job (see reserveDirect)
	stopped  bool                   // Stop has begun: nothing more goes into jobs
	kinds    map[string]bool

	workers sync.WaitGroup
	running atomic.Int64 // handlers running now (for tests and stats)
}

func (p *pool) signal() {
	select {
	case p.wakeCh <- struct{}{}:
	default:
	}
}

// policy returns the policy in force: the job's own when non-nil, else the
// queue's.
func (p *pool) policy(own *RetryPolicy) RetryPolicy {
	if own != nil {
		return *own
	}
	return p.cfg.Retry
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
	// The poller's baseline comes before the first claim, so that a write by
	// another process at any moment after it is noticed at the next poll.
	var version int64 = -1
	if q.opts.PollInterval > 0 {
		v, err := q.dataVersion(ctx)
		if err != nil {
			return fmt.Errorf("litequeue: start: %w", err)
		}
		version = v
	}
	r.sched = startScheduler(q, r)
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
	go r.maintain(version)
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
		if q.opts.OnEvent != nil {
			q.opts.OnEvent(Event{Type: EventConfigWarning, Time: q.clock.Now(), Queue: qe.Queue, Err: err})
		}
	}
	return nil
}

// newRunState returns the state of a run of q whose handlers see ctx's
// values.
func newRunState(q *Queue, ctx context.Context) *runState {
	return &runState{q: q, base: context.WithoutCancel(ctx), pools: map[string]*pool{},
		stopping: make(chan struct{}), settled: make(chan struct{}), stopped: make(chan struct{}), escalate: make(chan struct{})}
}

// newPool makes the pool that runs the given kinds of cfg's queue under r.
func newPool(q *Queue, r *runState, cfg QueueConfig, kinds []string) *pool {
	kinds = slices.Clone(kinds)
	sort.Strings(kinds)
	kj, _ := json.Marshal(kinds)
	p := &pool{
		q: q, r: r, cfg: cfg, kindsJSON: string(kj),
		capacity: cfg.Concurrency + q.opts.ClaimBatch,
		wakeCh:   make(chan struct{}, 1),
		due:      newAlarm(q.clock),
		busy:     make(chan struct{}, 1),
		inflight: map[*delivery]struct{}{},
		kinds:    map[string]bool{},
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
// returns. Stop returns nil on a queue that is not running. A handler that
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
	r.bg.Wait() // dispatchers and the poller have exited: no new claims
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
	// Commit pending successes (and anything else queued).
	if q.w != nil {
		if e := q.w.do(context.Background(), func(context.Context, execer) error { return nil }); e != nil && !errors.Is(e, ErrClosed) {
			r.stopErr = e
		}
	}
	q.mu.Lock()
	q.run = nil
	q.mu.Unlock()
	q.log.Info("litequeue: stopped")
	close(r.stopped)
	return r.stopErr
}

func (r *runState) releaseRunning() {
	for _, p := range r.pools {
		p.releaseRunning()
	}
}

// push queues claimed deliveries for the workers, most urgent first.
func (p *pool) push(ds ...*delivery) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pushLocked(ds...)
}

func (p *pool) pushLocked(ds ...*delivery) {
	wasIdle := len(p.inflight) == 0
	for _, d := range ds {
		p.inflight[d] = struct{}{}
		heap.Push(&p.ready, d)
		p.tokens <- struct{}{} // never blocks: capacity bounds the claimed jobs
	}
	if wasIdle && len(ds) > 0 {
		select {
		case p.busy <- struct{}{}:
		default:
		}
	}
}

// pop takes the most urgent queued delivery, waiting for one until stop is
// closed (then it returns nil).
func (p *pool) pop(stop <-chan struct{}) *delivery {
	select {
	case <-stop:
		return nil
	default:
	}
	select {
	case <-stop:
		return nil
	case <-p.tokens:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return heap.Pop(&p.ready).(*delivery)
}

// queued reports how many claimed deliveries wait for a worker.
func (p *pool) queued() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ready.Len()
}

// releaseQueued returns the claimed, unstarted jobs of p.
func (p *pool) releaseQueued() {
	var ds []*delivery
	for {
		select {
		case <-p.tokens:
			p.mu.Lock()
			ds = append(ds, heap.Pop(&p.ready).(*delivery))
			p.mu.Unlock()
			continue
		default:
		}
		break
	}
	p.release(ds)
}

// releaseRunning cancels the running handlers of p and releases their jobs.
func (p *pool) releaseRunning() {
	p.mu.Lock()
	ds := make([]*delivery, 0, len(p.inflight))
	for d := range p.inflight {
		ds = append(ds, d)
	}
	p.mu.Unlock()
	for _, d := range ds {
		d.released.Store(true)
		d.mu.Lock()
		if d.cancel != nil {
			d.cancel(errShutdown)
		}
		d.mu.Unlock()
	}
	p.release(ds)
}

var errShutdown = errors.New("litequeue: queue stopped")

const releaseSQL = `UPDATE lq_jobs SET state = 0, visible_at = ?, lease = NULL, attempt = max(attempt - 1, 0)
	WHERE id = ? AND lease = ? AND state = 1`

// releaseTimeout bounds how long a release on shutdown waits for the write
// lock; past it the jobs come back when their leases expire instead.
const releaseTimeout = 30 * time.Second

// release puts claimed jobs back to ready without using an attempt.
func (p *pool) release(ds []*delivery) {
	if len(ds) == 0 {
		return
	}
	q := p.q
	now := unixNanos(q.clock)
	ctx, cancel := withClockTimeout(q.clock, context.Background(), releaseTimeout, errReleaseTimeout)
	defer cancel()
	err := q.w.do(ctx, func(ctx context.Context, tx execer) error {
		for _, d := range ds {
			if _, err := tx.ExecContext(ctx, releaseSQL, now, d.id, d.lease); err != nil {
				return err
			}
		}
		return nil
	})
	for _, d := range ds {
		d.released.Store(true)
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

// claimSQL claims up to ?6 due rows of one priority of a queue, in due-time
// order, for the kinds this process handles. A running row whose lease has
// lapsed is due too: its worker is gone. The claim takes a new lease, moves
// the visibility timestamp to the lease's end, counts the attempt and keeps
// the time the row became due in due_at (SET reads the old visible_at), by
// which the workers take the batch.
//
// One priority at a time keeps the claim a range scan of the claim index
// (queue, priority, visible_at): across priorities SQLite could not stop at
// the first row that is not yet due, and would walk every scheduled row.
const claimSQL = `UPDATE lq_jobs
SET state = 1, visible_at = ?1, lease = ?2, attempt = attempt + 1, attempted_at = ?3, due_at = visible_at,
    last_error = CASE WHEN state = 1 THEN 'lease expired: the worker of attempt ' || attempt || ' was lost' ELSE last_error END
WHERE id IN (
    SELECT id FROM lq_jobs
    WHERE queue = ?4 AND state IN (0, 1) AND priority = ?7 AND visible_at <= ?3
      AND kind IN (SELECT value FROM json_each(?5))
    ORDER BY visible_at, id
    LIMIT ?6)
RETURNING id, kind, attempt, priority, payload, idem_key, created_at, last_error, due_at`

// nextPrioritySQL finds the most urgent priority of a queue's live rows at or
// after ?2 with one seek of the claim index.
const nextPrioritySQL = `SELECT min(priority) FROM lq_jobs WHERE queue = ?1 AND state IN (0, 1) AND priority >= ?2`

// priorities calls fn for each priority of queue's live rows, most urgent
// first, until fn returns false. Each step is one index seek, so a claim costs
// O(P log n) for P distinct priorities, not a scan of the backlog.
func priorities(ctx context.Context, tx execer, queue string, fn func(prio int64) (more bool, err error)) error {
	from := int64(math.MinInt64)
	for {
		var prio sql.NullInt64
		if err := tx.QueryRowContext(ctx, nextPrioritySQL, queue, from).Scan(&prio); err != nil {
			return err
		}
		if !prio.Valid {
			return nil
		}
		more, err := fn(prio.Int64)
		if err != nil || !more || prio.Int64 == math.MaxInt64 {
			return err
		}
		from = prio.Int64 + 1
	}
}

// claim takes up to n due jobs and queues them for the workers. It returns
// how many it took.
func (p *pool) claim(n int) (int, error) {
	var ds []*delivery
	err := p.q.w.doAfter(context.Background(), func(ctx context.Context, tx execer) error {
		var err error
		ds, err = p.claimTx(ctx, tx, n)
		return err
	}, func() { p.push(ds...) }) // in commit order: no later claim is handed out first
	if err != nil {
		return 0, err
	}
	return len(ds), nil
}

// claimTx claims up to n due jobs of p's queue and kinds on tx, most urgent
// first, under one new lease.
func (p *pool) claimTx(ctx context.Context, tx execer, n int) ([]*delivery, error) {
	q := p.q
	now := q.clock.Now()
	lease := q.nextLease()
	until := addClamped(now, p.cfg.VisibilityTimeout)
	var ds []*delivery
	err := priorities(ctx, tx, p.cfg.Name, func(prio int64) (bool, error) {
		rows, err := tx.QueryContext(ctx, claimSQL, until, lease, now.UnixNano(), p.cfg.Name, p.kindsJSON, n-len(ds), prio)
		if err != nil {
			return false, err
		}
		defer rows.Close()
		for rows.Next() {
			d := &delivery{q: q, p: p, lease: lease, queue: p.cfg.Name}
			var key, lastErr sql.NullString
			if err := rows.Scan(&d.id, &d.kind, &d.attempt, &d.priority, &d.payload, &key, &d.createdAt, &lastErr, &d.dueAt); err != nil {
				return false, err
			}
			d.key, d.lastErr = key.String, lastErr.String
			ds = append(ds, d)
		}
		return len(ds) < n, rows.Err()
	})
	return ds, err
}

// readyHeap orders claimed deliveries by priority, then by the time each
// became due, then by id: the order the README promises.
type readyHeap []*delivery

func (h readyHeap) Len() int { return len(h) }
func (h readyHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.priority != b.priority {
		return a.priority < b.priority
	}
	if a.dueAt != b.dueAt {
		return a.dueAt < b.dueAt
	}
	return a.id < b.id
}
func (h readyHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *readyHeap) Push(x any)   { *h = append(*h, x.(*delivery)) }
func (h *readyHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return d
}

// reserveDirect reserves a slot of the pool running queue's jobs of kind
// when that pool is idle — started, nothing claimed waiting in memory, a
// worker free — so that an enqueue of a job due now can claim in its own
// transaction and hand the claimed job straight to a worker: one commit
// instead of two between Enqueue and the handler. It returns nil when the
// enqueue should take the usual path (insert, then wake the dispatcher).
func (r *runState) reserveDirect(queue, kind string) *pool {
	p, ok := r.pools[queue]
	if !ok || !p.kinds[kind] {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped || p.ready.Len() > 0 || p.running.Load() >= int64(p.cfg.Concurrency) ||
		p.capacity-len(p.inflight)-p.reserved <= 0 {
		return nil
	}
	p.reserved++
	return p
}

// claimDirect claims, inside the enqueue's transaction, the most urgent due
// job of the reserving pool — the job just inserted, unless an older or more
// urgent one is due too: the hand-off never overtakes a due job.
func (p *pool) claimDirect(ctx context.Context, tx execer) (*delivery, error) {
	ds, err := p.claimTx(ctx, tx, 1)
	if err != nil || len(ds) == 0 {
		return nil, err
	}
	return ds[0], nil
}

// handOff ends a reservation, on the writer right after the enqueue's
// commit: it queues d (nil if the enqueue claimed nothing) for the workers
// and reports true, or reports false if the pool began to stop meanwhile —
// then the caller releases d.
func (p *pool) handOff(d *delivery) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d == nil {
		return true
	}
	if p.stopped {
		return false
	}
	p.pushLocked(d)
	return true
}

// unreserve ends a reservation that handed nothing off.
func (p *pool) unreserve() {
	p.mu.Lock()
	p.reserved--
	p.mu.Unlock()
}

// nextDueSQL is the earliest visibility timestamp of one priority's live
// rows of a queue's kinds: a walk of the claim index in due order that stops
// at the first row of a handled kind.
const nextDueSQL = `SELECT visible_at FROM lq_jobs
WHERE queue = ?1 AND state IN (0, 1) AND priority = ?2 AND kind IN (SELECT value FROM json_each(?3))
ORDER BY visible_at LIMIT 1`

// nextDue returns when the earliest live job of p's kinds becomes claimable,
// or ok false if there is none. It reads in one snapshot, one priority at a
// time (see claimSQL).
func (p *pool) nextDue() (t time.Time, ok bool, err error) {
	ctx := context.Background()
	tx, err := p.q.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return time.Time{}, false, err
	}
	defer tx.Rollback()
	var earliest int64
	err = priorities(ctx, tx, p.cfg.Name, func(prio int64) (bool, error) {
		var v int64
		err := tx.QueryRowContext(ctx, nextDueSQL, p.cfg.Name, prio, p.kindsJSON).Scan(&v)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return false, err
		case !ok || v < earliest:
			earliest, ok = v, true
		}
		return true, nil
	})
	if err != nil || !ok {
		return time.Time{}, false, err
	}
	return time.Unix(0, earliest), true, nil
}

// dispatch claims due jobs whenever there are free slots and there may be
// work: after a wake-up (an enqueue here, another process's write, a freed
// slot after a full claim) or when a Clock timer reaches the next due time.
// It never polls the table in a loop.
func (p *pool) dispatch() {
	defer p.r.bg.Done()
	defer p.due.stop()
	dirty := true
	for {
		select {
		case <-p.r.stopping:
			return
		default:
		}
		if dirty {
			p.mu.Lock()
			free := p.capacity - len(p.inflight) - p.reserved
			waiting := p.ready.Len()
			p.mu.Unlock()
			// While the workers still have more than a round of claimed jobs
			// waiting, let free slots gather: one claim of many rows costs a
			// statement where many claims of a few rows cost one each.
			if free <= 0 || (waiting > p.cfg.Concurrency && free < p.q.opts.ClaimBatch/2) {
				p.mu.Lock()
				p.full = true
				p.mu.Unlock()
				dirty = false
			} else {
				n := min(free, p.q.opts.ClaimBatch)
				got, err := p.claim(n)
				switch {
				case err != nil:
					p.q.log.Error("litequeue: claim failed; retrying", LogQueue, p.cfg.Name, LogError, err.Error())
					p.due.set(p.q.clock.Now().Add(time.Second), true)
					dirty = false
				case got == n:
					p.mu.Lock()
					p.full = true
					p.mu.Unlock()
					// More may be due: loop while slots are free.
				default:
					p.mu.Lock()
					p.full = false
					p.mu.Unlock()
					dirty = false
					due, ok, err := p.nextDue()
					// An alarm set earlier than this stays: it may be a due time
					// written after this read, and an early wake-up costs one
					// empty claim.
					switch {
					case err != nil:
						p.q.log.Error("litequeue: next due time", LogQueue, p.cfg.Name, LogError, err.Error())
						p.due.set(p.q.clock.Now().Add(time.Second), true)
					case ok:
						p.due.set(due, true)
					}
				}
				if dirty {
					continue
				}
			}
		}
		select {
		case <-p.r.stopping:
			return
		case <-p.wakeCh:
			dirty = true
		case <-p.due.C:
			dirty = true
		}
	}
}

// dueAt makes the dispatcher claim at t (at once if t has come), unless it
// is already set to claim earlier. It sets the Clock timer before returning,
// so the caller may report the job's new due time as an event right after.
func (p *pool) dueAt(t time.Time) {
	p.due.set(t, true)
}

// freed is called when a delivery finishes: if the last claim was full there
// may be more work waiting for the slot.
func (p *pool) freed(d *delivery) {
	p.mu.Lock()
	delete(p.inflight, d)
	full := p.full
	p.mu.Unlock()
	if full {
		p.signal()
	}
}

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
	policy := p.policy(own)
	if d.attempt > policy.Attempts() {
		// The last allowed attempt died with its process: no crash loop.
		p.bury(d, policy)
		return
	}
	if decodeErr != nil {
		p.fail(d, policy, Permanent(decodeErr), 0)
		return
	}
	ctx, cancel := context.WithCancelCause(p.r.base)
	defer cancel(nil)
	var hctx context.Context = ctx
	if p.cfg.Timeout > 0 {
		var c2 context.CancelFunc
		hctx, c2 = withClockTimeout(q.clock, ctx, p.cfg.Timeout, &TimeoutError{Timeout: p.cfg.Timeout})
		defer c2()
	}
	d.mu.Lock()
	d.cancel = cancel
	d.mu.Unlock()
	if d.released.Load() { // released by shutdown before it started
		p.forget(d)
		return
	}
	d.started = q.clock.Now()
	p.running.Add(1)
	q.emit(Event{Type: EventStarted, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt})
	err := safeCall(hctx, d, run)
	p.running.Add(-1)
	took := q.clock.Since(d.started)
	if d.released.Load() {
		// Shutdown released the job, or the lease was lost: the result no
		// longer counts.
		q.emit(Event{Type: EventStale, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt, Err: err})
		p.forget(d)
		return
	}
	if err != nil && p.cfg.Timeout > 0 && errors.Is(hctx.Err(), context.DeadlineExceeded) && !errors.As(err, new(*TimeoutError)) {
		err = fmt.Errorf("%w: %w", &TimeoutError{Timeout: p.cfg.Timeout}, err)
	}
	if err != nil {
		p.fail(d, policy, err, took)
		return
	}
	if d.inTx.Load() {
		p.finishTx(d, policy, took)
		return
	}
	q.w.complete(completion{id: d.id, lease: d.lease, queue: d.queue, kind: d.kind, at: unixNanos(q.clock), notify: func(err error) {
		switch {
		case err == nil:
			q.emit(Event{Type: EventSucceeded, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt, Duration: took})
		case errors.Is(err, ErrLeaseLost):
			q.emit(Event{Type: EventStale, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt, Err: err})
		default:
			q.log.Error("litequeue: writing a success failed; the job runs again when its lease expires",
				LogJobID, d.id, LogQueue, d.queue, LogKind, d.kind, LogError, err.Error())
		}
	}})
	// The slot is free now, not when the success commits: the next claim
	// then shares the writer's transaction with these successes instead of
	// waiting for a commit of its own.
	p.freed(d)
}

// finishTx checks that a CompleteTx transaction really committed.
func (p *pool) finishTx(d *delivery, policy RetryPolicy, took time.Duration) {
	var n int
	err := p.q.db.QueryRowContext(context.Background(),
		`SELECT count(*) FROM lq_jobs WHERE id = ? AND lease = ? AND state = 1`, d.id, d.lease).Scan(&n)
	if err == nil && n == 1 {
		p.fail(d, policy, errors.New("CompleteTx was called but its transaction did not commit"), took)
		return
	}
	p.q.emit(Event{Type: EventSucceeded, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt, Duration: took})
	p.freed(d)
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
func (p *pool) decide(d *delivery, policy RetryPolicy, err error) (RetryDecision, string, string) {
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

const (
	retrySQL = `UPDATE lq_jobs SET state = 0, visible_at = ?, lease = NULL, last_error = ?
		WHERE id = ? AND lease = ? AND state = 1`
	buryFailedSQL = `UPDATE lq_jobs SET state = 3, lease = NULL, finished_at = ?, last_error = ?, dead_reason = ?
		WHERE id = ? AND lease = ? AND state = 1`
	buryLostSQL = `UPDATE lq_jobs SET state = 3, lease = NULL, finished_at = ?, dead_reason = ?, attempt = ?
		WHERE id = ? AND lease = ? AND state = 1`
	attemptSQL = `INSERT INTO lq_attempts (job_id, attempt, started_at, finished_at, error, decision, delay)
		VALUES (?, ?, ?, ?, ?, ?, ?)`
	completeDeleteSQL = `DELETE FROM lq_jobs WHERE id = ? AND lease = ? AND state = 1`
	completeKeepSQL   = `UPDATE lq_jobs SET state = 2, lease = NULL, finished_at = ?1, visible_at = ?1
		WHERE id = ?2 AND lease = ?3 AND state = 1`
)

// fail records a failed attempt: the job is rescheduled or becomes a dead
// letter, with the attempt in its history, in one transaction.
func (p *pool) fail(d *delivery, policy RetryPolicy, herr error, took time.Duration) {
	q := p.q
	defer p.freed(d)
	dec, decision, reason := p.decide(d, policy, herr)
	now := q.clock.Now()
	started := d.started
	if started.IsZero() {
		started = now
	}
	msg := herr.Error()
	due := addClamped(now, dec.Delay)
	if dec.Retry && dec.Delay > 0 && due-now.UnixNano() != int64(dec.Delay) {
		q.log.Warn("litequeue: retry delay runs past the latest time the queue can store; the retry is due then",
			LogJobID, d.id, LogQueue, d.queue, LogKind, d.kind, LogDelay, dec.Delay, "due", time.Unix(0, due).UTC())
		dec.Delay = time.Duration(due - now.UnixNano())
	}
	err := q.w.do(context.Background(), func(ctx context.Context, tx execer) error {
		var res sql.Result
		var err error
		if dec.Retry {
			res, err = tx.ExecContext(ctx, retrySQL, due, msg, d.id, d.lease)
		} else {
			res, err = tx.ExecContext(ctx, buryFailedSQL, now.UnixNano(), msg, reason, d.id, d.lease)
		}
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return ErrLeaseLost
		}
		_, err = tx.ExecContext(ctx, attemptSQL, d.id, d.attempt, started.UnixNano(), now.UnixNano(), msg, decision, int64(dec.Delay))
		return err
	})
	switch {
	case errors.Is(err, ErrLeaseLost):
		q.emit(Event{Type: EventStale, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt, Err: herr})
	case err != nil:
		q.log.Error("litequeue: recording a failure failed; the job runs again when its lease expires",
			LogJobID, d.id, LogQueue, d.queue, LogKind, d.kind, LogError, err.Error())
	case dec.Retry:
		p.dueAt(time.Unix(0, due))
		q.emit(Event{Type: EventRetrying, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt,
			Delay: dec.Delay, Decision: decision, Err: herr, Duration: took})
	default:
		q.emit(Event{Type: EventDead, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt,
			Decision: decision, Err: herr, Duration: took})
	}
}

// bury dead-letters a job claimed after its last allowed attempt was lost
// with its process, without running it again.
func (p *pool) bury(d *delivery, policy RetryPolicy) {
	q := p.q
	defer p.freed(d)
	now := q.clock.Now().UnixNano()
	// The last real attempt was the policy's last: later claims were only
	// meant to bury the job, and may themselves have died with a process.
	lost := min(d.attempt-1, policy.Attempts())
	reason := fmt.Sprintf("attempts used up: attempt %d of %d was lost with its process (lease expired)", lost, policy.Attempts())
	err := q.w.do(context.Background(), func(ctx context.Context, tx execer) error {
		res, err := tx.ExecContext(ctx, buryLostSQL, now, reason, lost, d.id, d.lease)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return ErrLeaseLost
		}
		_, err = tx.ExecContext(ctx, attemptSQL, d.id, lost, now, now, "lease expired: the worker was lost", DecisionGiveUp, 0)
		return err
	})
	if err != nil {
		q.log.Error("litequeue: dead-lettering a lost job failed", LogJobID, d.id, LogError, err.Error())
		return
	}
	q.emit(Event{Type: EventDead, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: lost,
		Decision: DecisionGiveUp, Err: errors.New(reason)})
}

// writeCompletions writes a batch of successes inside the writer's
// transaction. Each is conditional on its lease; one whose lease was lost
// gets ErrLeaseLost and changes nothing.
func (q *Queue) writeCompletions(ctx context.Context, tx execer, cs []completion) ([]error, error) {
	results := make([]error, len(cs))
	if q.opts.CompletedRetention <= 0 {
		return results, deleteCompleted(ctx, tx, cs, results)
	}
	stmt, err := q.w.stmt(ctx, completeKeepSQL)
	if err != nil {
		return nil, err
	}
	for i, c := range cs {
		res, err := stmt.ExecContext(ctx, c.at, c.id, c.lease)
		if err != nil {
			return nil, err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			results[i] = ErrLeaseLost
		}
	}
	if len(cs) > 0 {
		q.noteRetained(cs[0].at)
	}
	return results, nil
}

// completeDeleteManySQL deletes the succeeded jobs of one lease (one claim)
// in one statement; a row whose lease is no longer that lease stays.
const completeDeleteManySQL = `DELETE FROM lq_jobs
WHERE id IN (SELECT value FROM json_each(?1)) AND lease = ?2 AND state = 1
RETURNING id`

// deleteCompleted deletes the jobs of successes cs, one statement per lease
// (a claim takes one lease for its whole batch), and sets results[i] to
// ErrLeaseLost for every job whose row did not hold its lease any more.
func deleteCompleted(ctx context.Context, tx execer, cs []completion, results []error) error {
	byLease := map[int64][]int{} // lease -> indexes in cs
	var leases []int64
	for i, c := range cs {
		if _, ok := byLease[c.lease]; !ok {
			leases = append(leases, c.lease)
		}
		byLease[c.lease] = append(byLease[c.lease], i)
	}
	deleted := make(map[int64]bool, len(cs))
	var ids []byte
	for _, lease := range leases {
		idx := byLease[lease]
		ids = appendIDsJSON(ids[:0], len(idx), func(k int) int64 { return cs[idx[k]].id })
		// TEXT, not a BLOB: json_each would read a BLOB as JSONB.
		rows, err := tx.QueryContext(ctx, completeDeleteManySQL, string(ids), lease)
		if err != nil {
			return err
		}
		clear(deleted)
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			deleted[id] = true
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return err
		}
		if err := rows.Close(); err != nil {
			return err
		}
		for _, i := range byLease[lease] {
			if !deleted[cs[i].id] {
				results[i] = ErrLeaseLost
			}
		}
	}
	return nil
}

const extendSQL = `UPDATE lq_jobs SET visible_at = ? WHERE id = ? AND lease = ? AND state = 1`

// extendLeases pushes the leases of p's claimed jobs forward every third of
// the visibility timeout while p holds any, until every handler has returned
// or been released (also during a graceful Stop). A job whose lease was lost
// has its handler's context cancelled with ErrLeaseLost and its result
// dropped. With nothing claimed it sets no timer.
func (p *pool) extendLeases() {
	defer p.r.keep.Done()
	period := max(p.cfg.VisibilityTimeout/3, time.Millisecond)
	for {
		p.mu.Lock()
		idle := len(p.inflight) == 0
		p.mu.Unlock()
		if idle {
			select {
			case <-p.r.settled:
				return
			case <-p.busy:
			}
			continue
		}
		t := p.q.clock.Timer(period)
		select {
		case <-p.r.settled:
			t.Stop()
			return
		case <-t.C:
		}
		p.extend()
	}
}

// extend pushes the lease of every claimed job of p forward by the
// visibility timeout.
func (p *pool) extend() {
	p.mu.Lock()
	ds := make([]*delivery, 0, len(p.inflight))
	for d := range p.inflight {
		ds = append(ds, d)
	}
	p.mu.Unlock()
	if len(ds) == 0 {
		return
	}
	until := addClamped(p.q.clock.Now(), p.cfg.VisibilityTimeout)
	var lost []*delivery
	err := p.q.w.do(context.Background(), func(ctx context.Context, tx execer) error {
		lost = lost[:0]
		for _, d := range ds {
			res, err := tx.ExecContext(ctx, extendSQL, until, d.id, d.lease)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n != 1 {
				lost = append(lost, d)
			}
		}
		return nil
	})
	if err != nil {
		p.q.log.Error("litequeue: extending leases failed", LogQueue, p.cfg.Name, LogError, err.Error())
		return
	}
	for _, d := range lost {
		if d.released.Swap(true) {
			continue
		}
		d.mu.Lock()
		if d.cancel != nil {
			d.cancel(ErrLeaseLost)
		}
		d.mu.Unlock()
		p.q.log.Warn("litequeue: lease lost; the handler's result will be dropped", LogJobID, d.id, LogQueue, d.queue, LogKind, d.kind)
	}
}

// dataVersion reads PRAGMA data_version on the writer's connection, where it
// changes only for other connections' commits.
func (q *Queue) dataVersion(ctx context.Context) (int64, error) {
	var v int64
	err := q.w.read(ctx, func(ctx context.Context, tx execer) error {
		return tx.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v)
	})
	return v, err
}

// maintain polls for other connections' writes, from the baseline version
// read by Start (-1: polling is off), and deletes retained completed jobs
// when they expire.
//
// The poll runs on real time, not the Clock: it watches other processes,
// which write in real time, and decides no schedule. Retention runs on the
// cleanup alarm, set for the next expiry (by completions, and here after each
// cleanup), so a queue with nothing retained sets no timer.
func (r *runState) maintain(version int64) {
	defer r.bg.Done()
	q := r.q
	var pollC <-chan time.Time
	if q.opts.PollInterval > 0 {
		t := time.NewTicker(q.opts.PollInterval)
		defer t.Stop()
		pollC = t.C
	}
	armClean := func(after time.Time) {
		if q.opts.CompletedRetention <= 0 {
			return
		}
		oldest, ok, err := q.oldestCompleted(context.Background())
		if err != nil {
			q.log.Error("litequeue: finding the next retained job to clean up", LogError, err.Error())
			return
		}
		if ok {
			// Expiries closer together than the cleanup interval share a run.
			q.cleanup.set(latest(time.Unix(0, addClamped(oldest, q.opts.CompletedRetention)), after), true)
		}
	}
	armClean(time.Time{})
	for {
		select {
		case <-r.stopping:
			return
		case <-pollC:
			v, err := q.dataVersion(context.Background())
			if err != nil {
				continue
			}
			if v != version {
				r.wakeAll()
			}
			version = v
		case <-q.cleanup.C:
			now := q.clock.Now()
			cutoff := now.Add(-q.opts.CompletedRetention).UnixNano()
			if _, err := q.purgeCompletedBefore(context.Background(), cutoff); err != nil {
				q.log.Error("litequeue: cleaning up completed jobs", LogError, err.Error())
			}
			armClean(now.Add(DefaultCleanupInterval))
		}
	}
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// oldestCompletedSQL finds the earliest finish of a retained completed job
// with one seek of lq_jobs_finished.
const oldestCompletedSQL = `SELECT min(finished_at) FROM lq_jobs WHERE state = 2`

func (q *Queue) oldestCompleted(ctx context.Context) (time.Time, bool, error) {
	var v sql.NullInt64
	if err := q.db.QueryRowContext(ctx, oldestCompletedSQL).Scan(&v); err != nil || !v.Valid {
		return time.Time{}, false, err
	}
	return time.Unix(0, v.Int64), true, nil
}

// noteRetained sets the cleanup alarm for a job completed at the Unix
// nanosecond at and kept for CompletedRetention, unless it is set earlier.
func (q *Queue) noteRetained(at int64) {
	q.cleanup.set(time.Unix(0, addClamped(time.Unix(0, at), q.opts.CompletedRetention)), true)
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
