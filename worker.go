package litequeue

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
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
	runAt     int64
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
	q        *Queue
	base     context.Context // values for handlers; never cancelled by Start's caller alone
	pools    map[string]*pool
	stopping chan struct{}
	bg       sync.WaitGroup // dispatchers, extenders, poller
	stopOnce sync.Once
}

func (r *runState) wake(queue string) {
	if p, ok := r.pools[queue]; ok {
		p.signal()
	}
}

func (r *runState) wakeAll() {
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
	jobs   chan *delivery

	mu       sync.Mutex
	inflight map[int64]*delivery
	full     bool // the last claim filled its batch: more may be due
	reserved int  // slots held for enqueues that claim their own job (see reserveDirect)
	stopped  bool // Stop has begun: nothing more goes into jobs
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
	r := &runState{q: q, base: context.WithoutCancel(ctx), pools: map[string]*pool{}, stopping: make(chan struct{})}
	byQueue := map[string][]string{}
	for kind, h := range q.handlers {
		byQueue[h.queue] = append(byQueue[h.queue], kind)
	}
	for name, kinds := range byQueue {
		sort.Strings(kinds)
		kj, _ := json.Marshal(kinds)
		cfg, ok := q.configs[name]
		if !ok {
			cfg = NewQueueConfig(name).withDefaults()
		}
		p := &pool{
			q: q, r: r, cfg: cfg, kindsJSON: string(kj),
			capacity: cfg.Concurrency + q.opts.ClaimBatch,
			wakeCh:   make(chan struct{}, 1),
			inflight: map[int64]*delivery{},
			kinds:    map[string]bool{},
		}
		for _, k := range kinds {
			p.kinds[k] = true
		}
		p.jobs = make(chan *delivery, p.capacity)
		r.pools[name] = p
	}
	q.run = r
	for _, p := range r.pools {
		for range p.cfg.Concurrency {
			p.workers.Add(1)
			go p.work()
		}
		r.bg.Add(2)
		go p.dispatch()
		go p.extendLeases()
	}
	r.bg.Add(1)
	go r.maintain()
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

// Stop stops the workers gracefully: no new claims; jobs claimed but not
// started are released at once; running handlers may finish until ctx ends.
// Then their contexts are cancelled and their leases released, so a restart
// (or another process) picks them up at once. A job released by shutdown does
// not use up an attempt. Pending successes are written before Stop returns.
// Stop returns nil on a queue that is not running. A handler that ignores its
// cancelled context keeps running after Stop returns; its result is dropped.
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
	var err error
	r.stopOnce.Do(func() {
		close(r.stopping)
		r.bg.Wait() // dispatchers and extenders have exited: no new claims
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
			for _, p := range r.pools {
				p.releaseRunning()
			}
		}
		// Commit pending successes (and anything else queued).
		if q.w != nil {
			if e := q.w.do(context.Background(), func(context.Context, execer) error { return nil }); e != nil && !errors.Is(e, ErrClosed) {
				err = e
			}
		}
		q.mu.Lock()
		q.run = nil
		q.mu.Unlock()
		q.log.Info("litequeue: stopped")
	})
	return err
}

// releaseQueued returns the claimed, unstarted jobs of p.
func (p *pool) releaseQueued() {
	var ds []*delivery
	for {
		select {
		case d := <-p.jobs:
			ds = append(ds, d)
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
	for _, d := range p.inflight {
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
	ctx, cancel := q.clock.WithTimeout(context.Background(), releaseTimeout)
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

func (p *pool) forget(d *delivery) {
	p.mu.Lock()
	delete(p.inflight, d.id)
	p.mu.Unlock()
}

// claimSQL claims up to ?6 due rows of one priority of a queue, in due-time
// order, for the kinds this process handles. A running row whose lease has
// lapsed is due too: its worker is gone. The claim takes a new lease, moves
// the visibility timestamp to the lease's end and counts the attempt.
//
// One priority at a time keeps the claim a range scan of the claim index
// (queue, priority, visible_at): across priorities SQLite could not stop at
// the first row that is not yet due, and would walk every scheduled row.
const claimSQL = `UPDATE lq_jobs
SET state = 1, visible_at = ?1, lease = ?2, attempt = attempt + 1, attempted_at = ?3,
    last_error = CASE WHEN state = 1 THEN 'lease expired: the worker of attempt ' || attempt || ' was lost' ELSE last_error END
WHERE id IN (
    SELECT id FROM lq_jobs
    WHERE queue = ?4 AND state IN (0, 1) AND priority = ?7 AND visible_at <= ?3
      AND kind IN (SELECT value FROM json_each(?5))
    ORDER BY visible_at, id
    LIMIT ?6)
RETURNING id, kind, attempt, priority, payload, idem_key, created_at, last_error, run_at`

// nextPrioritySQL finds the most urgent priority of a queue's live rows at or
// after ?2 with one seek of the claim index.
const nextPrioritySQL = `SELECT min(priority) FROM lq_jobs WHERE queue = ?1 AND state IN (0, 1) AND priority >= ?2`

// priorities calls fn for each priority of queue's live rows, most urgent
// first, until fn returns false. Each step is one index seek, so a claim costs
// O(P log n) for P distinct priorities, not a scan of the backlog.
func priorities(ctx context.Context, stmt *sql.Stmt, queue string, fn func(prio int64) (more bool, err error)) error {
	from := int64(math.MinInt64)
	for {
		var prio sql.NullInt64
		if err := stmt.QueryRowContext(ctx, queue, from).Scan(&prio); err != nil {
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
	q := p.q
	now := q.clock.Now()
	lease := q.nextLease()
	until := now.Add(p.cfg.VisibilityTimeout).UnixNano()
	var ds []*delivery
	err := q.w.do(context.Background(), func(ctx context.Context, tx execer) error {
		ds = ds[:0]
		claim, err := q.w.stmt(ctx, claimSQL)
		if err != nil {
			return err
		}
		next, err := q.w.stmt(ctx, nextPrioritySQL)
		if err != nil {
			return err
		}
		return priorities(ctx, next, p.cfg.Name, func(prio int64) (bool, error) {
			rows, err := claim.QueryContext(ctx, until, lease, now.UnixNano(), p.cfg.Name, p.kindsJSON, n-len(ds), prio)
			if err != nil {
				return false, err
			}
			defer rows.Close()
			for rows.Next() {
				d := &delivery{q: q, p: p, lease: lease, queue: p.cfg.Name}
				var key, lastErr sql.NullString
				if err := rows.Scan(&d.id, &d.kind, &d.attempt, &d.priority, &d.payload, &key, &d.createdAt, &lastErr, &d.runAt); err != nil {
					return false, err
				}
				d.key, d.lastErr = key.String, lastErr.String
				ds = append(ds, d)
			}
			return len(ds) < n, rows.Err()
		})
	})
	if err != nil {
		return 0, err
	}
	// RETURNING has no order: hand the batch out in priority, then
	// first-due order.
	sort.Slice(ds, func(i, j int) bool {
		a, b := ds[i], ds[j]
		if a.priority != b.priority {
			return a.priority < b.priority
		}
		if a.runAt != b.runAt {
			return a.runAt < b.runAt
		}
		return a.id < b.id
	})
	p.mu.Lock()
	for _, d := range ds {
		p.inflight[d.id] = d
	}
	p.mu.Unlock()
	for _, d := range ds {
		p.jobs <- d // never blocks: capacity bounds the claimed jobs
	}
	return len(ds), nil
}

// reserveDirect reserves a slot of the pool running queue's jobs of kind
// when that pool is idle — started, nothing claimed waiting in memory, a
// worker free — so that an enqueue of a job due now can claim it in its own
// transaction and hand it straight to a worker: one commit instead of two
// between Enqueue and the handler. It returns nil when the enqueue should
// take the usual path (insert, then wake the dispatcher).
func (r *runState) reserveDirect(queue, kind string) *pool {
	p, ok := r.pools[queue]
	if !ok || !p.kinds[kind] {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped || len(p.jobs) > 0 || p.running.Load() >= int64(p.cfg.Concurrency) ||
		p.capacity-len(p.inflight)-p.reserved <= 0 {
		return nil
	}
	p.reserved++
	return p
}

const claimOneSQL = `UPDATE lq_jobs SET state = 1, visible_at = ?1, lease = ?2, attempt = attempt + 1, attempted_at = ?3
WHERE id = ?4 AND state = 0`

// claimOne claims the job nj just inserted as id, inside the enqueue's
// transaction, under a new lease, and returns its delivery.
func (p *pool) claimOne(ctx context.Context, tx execer, id int64, nj *newJob) (*delivery, error) {
	now := p.q.clock.Now()
	lease := p.q.nextLease()
	res, err := tx.ExecContext(ctx, claimOneSQL, now.Add(p.cfg.VisibilityTimeout).UnixNano(), lease, now.UnixNano(), id)
	if err != nil {
		return nil, err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return nil, nil
	}
	return &delivery{q: p.q, p: p, id: id, lease: lease, queue: nj.queue, kind: nj.kind, attempt: 1,
		priority: nj.priority, payload: nj.payload, key: nj.key, createdAt: nj.createdAt, runAt: nj.runAt}, nil
}

// direct ends a reservation: it hands d (nil if the enqueue did not commit a
// claim) to the workers, or releases it if the pool began to stop meanwhile.
func (p *pool) direct(d *delivery) {
	p.mu.Lock()
	p.reserved--
	if d == nil {
		p.mu.Unlock()
		return
	}
	if p.stopped {
		p.mu.Unlock()
		p.release([]*delivery{d})
		return
	}
	p.inflight[d.id] = d
	p.jobs <- d // never blocks: the reservation held its slot
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
	next, err := tx.PrepareContext(ctx, nextPrioritySQL)
	if err != nil {
		return time.Time{}, false, err
	}
	defer next.Close()
	due, err := tx.PrepareContext(ctx, nextDueSQL)
	if err != nil {
		return time.Time{}, false, err
	}
	defer due.Close()
	var earliest int64
	err = priorities(ctx, next, p.cfg.Name, func(prio int64) (bool, error) {
		var v int64
		err := due.QueryRowContext(ctx, p.cfg.Name, prio, p.kindsJSON).Scan(&v)
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
	var timer *clock.Timer
	var timerC <-chan time.Time
	stopTimer := func() {
		if timer != nil {
			timer.Stop()
			timer, timerC = nil, nil
		}
	}
	defer stopTimer()
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
			p.mu.Unlock()
			// While the workers still have more than a round of claimed jobs
			// waiting, let free slots gather: one claim of many rows costs a
			// statement where many claims of a few rows cost one each.
			if free <= 0 || (len(p.jobs) > p.cfg.Concurrency && free < p.q.opts.ClaimBatch/2) {
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
					stopTimer()
					timer = p.q.clock.Timer(time.Second)
					timerC = timer.C
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
					stopTimer()
					due, ok, err := p.nextDue()
					if err != nil {
						p.q.log.Error("litequeue: next due time", LogQueue, p.cfg.Name, LogError, err.Error())
						due, ok = p.q.clock.Now().Add(time.Second), true
					}
					if ok {
						timer = p.q.clock.Timer(p.q.clock.Until(due))
						timerC = timer.C
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
		case <-timerC:
			timer, timerC = nil, nil
			dirty = true
		}
	}
}

// freed is called when a delivery finishes: if the last claim was full there
// may be more work waiting for the slot.
func (p *pool) freed(d *delivery) {
	p.mu.Lock()
	delete(p.inflight, d.id)
	full := p.full
	p.mu.Unlock()
	if full {
		p.signal()
	}
}

func (p *pool) work() {
	defer p.workers.Done()
	for {
		select {
		case <-p.r.stopping:
			return
		default:
		}
		select {
		case <-p.r.stopping:
			return
		case d := <-p.jobs:
			p.execute(d)
		}
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
		hctx, c2 = q.clock.WithTimeout(ctx, p.cfg.Timeout)
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
	if err != nil && p.cfg.Timeout > 0 && errors.Is(hctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("job timeout %s passed: %w", p.cfg.Timeout, err)
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
	err := q.w.do(context.Background(), func(ctx context.Context, tx execer) error {
		var res sql.Result
		var err error
		if dec.Retry {
			res, err = tx.ExecContext(ctx, retrySQL, now.Add(dec.Delay).UnixNano(), msg, d.id, d.lease)
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
		q.emit(Event{Type: EventRetrying, JobID: d.id, Queue: d.queue, Kind: d.kind, Attempt: d.attempt,
			Delay: dec.Delay, Decision: decision, Err: herr, Duration: took})
		p.signal() // recompute the next due time
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
// the visibility timeout. A job whose lease was lost has its handler's
// context cancelled with ErrLeaseLost and its result dropped.
func (p *pool) extendLeases() {
	defer p.r.bg.Done()
	t := p.q.clock.Ticker(max(p.cfg.VisibilityTimeout/3, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-p.r.stopping:
			return
		case <-t.C:
		}
		p.mu.Lock()
		ds := make([]*delivery, 0, len(p.inflight))
		for _, d := range p.inflight {
			ds = append(ds, d)
		}
		p.mu.Unlock()
		if len(ds) == 0 {
			continue
		}
		until := p.q.clock.Now().Add(p.cfg.VisibilityTimeout).UnixNano()
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
			continue
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
}

// maintain polls for other connections' writes and cleans up retained
// completed jobs.
func (r *runState) maintain() {
	defer r.bg.Done()
	q := r.q
	var pollC <-chan time.Time
	if q.opts.PollInterval > 0 {
		t := q.clock.Ticker(q.opts.PollInterval)
		defer t.Stop()
		pollC = t.C
	}
	var cleanC <-chan time.Time
	if q.opts.CompletedRetention > 0 {
		t := q.clock.Ticker(DefaultCleanupInterval)
		defer t.Stop()
		cleanC = t.C
	}
	var last int64 = -1
	for {
		select {
		case <-r.stopping:
			return
		case <-pollC:
			var v int64
			err := q.w.read(context.Background(), func(ctx context.Context, tx execer) error {
				return tx.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v)
			})
			if err != nil {
				continue
			}
			if last >= 0 && v != last {
				r.wakeAll()
			}
			last = v
		case <-cleanC:
			cutoff := q.clock.Now().Add(-q.opts.CompletedRetention).UnixNano()
			if _, err := q.purgeCompletedBefore(context.Background(), cutoff); err != nil {
				q.log.Error("litequeue: cleaning up completed jobs", LogError, err.Error())
			}
		}
	}
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
