package litequeue

import (
	"container/heap"
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/litequeue/litequeue/internal/store"
)

// The pools of a started queue: one per named queue, each with its claimed
// deliveries, handler slots and the bookkeeping that frees them. What the
// pools do lives beside: claiming and handing out (dispatch.go), running an
// attempt (attempt.go), deciding (decide.go) and recording its outcome
// (record.go), keeping leases (lease.go).

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
	until     atomic.Int64 // when the lease ends, as last written (by the claim or an extension)

	st      atomic.Int32 // a deliveryState: changed only by its transitions (delivery_state.go)
	started time.Time
	cancel  context.CancelCauseFunc
	mu      sync.Mutex // guards cancel

	repOnce sync.Once
	rep     *reporter // progress and output (progress.go); nil until the first report
}

// handler is a registered handler, type-erased.
type handler struct {
	kind, queue string
	// prepare decodes a payload and returns the job's own settings and a
	// function that runs the handler on it.
	prepare func(payload []byte) (own jobOwn, run func(ctx context.Context, d *delivery) error, err error)
}

// jobOwn is what a decoded job says about its own attempts.
type jobOwn struct {
	policy     *RetryPolicy  // its RetryPolicy; nil: the queue's
	timeout    time.Duration // its Timeout, when hasTimeout
	hasTimeout bool
}

// runState is the state of a started queue.
type runState struct {
	q     *Queue
	base  context.Context // values for handlers; never cancelled by Start's caller alone
	pools map[string]*pool

	stopping  chan struct{}  // closed when Stop begins: no new claims
	settled   chan struct{}  // closed once running handlers returned or were released: leases need no more extending
	stopped   chan struct{}  // closed when Stop has finished
	escalate  chan struct{}  // closed by a Stop whose context ended while another Stop waits
	bg        sync.WaitGroup // dispatchers and the maintenance loop
	keep      sync.WaitGroup // lease extenders: they run until settled
	stopOnce  sync.Once
	escOnce   sync.Once
	stopErr   error
	stopWatch context.CancelFunc // ends the store's watch for other processes' writes
	sched     *scheduler         // enqueues the stored schedules' occurrences
}

// pool runs one queue's handlers in this process.
type pool struct {
	q         *Queue
	r         *runState
	cfg       QueueConfig
	kindList  []string // the kinds this pool runs, sorted
	kindsJSON string
	capacity  int

	wakeCh chan struct{}
	due    *alarm        // the dispatcher's wake-up at the next due time
	tokens chan struct{} // one per delivery in ready; capacity bounds the claimed jobs
	ext    *alarm        // when the leases of the claimed jobs are next extended

	mu       sync.Mutex
	ready    readyHeap              // claimed, not yet started: most urgent first
	inflight map[*delivery]struct{} // claimed, queued or running: each claim is its own entry
	full     bool                   // the last claim filled its batch: more may be due
	reserved int                    // slots held for enqueues that claim their own job (see reserveDirect)
	prefetch prefetch               // how many jobs to hold claimed beyond the handler slots
	stopped  bool                   // Stop has begun: nothing more goes into jobs
	kinds    map[string]bool

	completing map[*delivery]struct{} // successes queued for the store, not yet written (freed from inflight)
	unwritten  map[*delivery]outcome  // outcomes whose write failed, kept with their leases (unwritten.go)
	nUnwritten atomic.Int32           // len(unwritten), read without mu
	rewriting  sync.Mutex             // one rewrite of the kept outcomes at a time

	workers sync.WaitGroup
	running atomic.Int64 // handlers running now (for tests and stats)

	paused  atomic.Bool // the queue is paused: claim nothing, start nothing (see dispatch.go)
	recheck atomic.Bool // another process wrote: re-read the pause, look for cancelled jobs
}

func (p *pool) signal() {
	select {
	case p.wakeCh <- struct{}{}:
	default:
	}
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

func (h *readyHeap) Push(x any) { *h = append(*h, x.(*delivery)) }

func (h *readyHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return d
}

// unreserve ends a reservation that handed nothing off.
func (p *pool) unreserve() {
	p.mu.Lock()
	p.reserved--
	p.mu.Unlock()
}

// dueAt makes the dispatcher claim at t (at once if t has come), unless it
// is already set to claim earlier. It sets the Clock timer before returning,
// so the caller may report the job's new due time as an event right after.
func (p *pool) dueAt(t time.Time) {
	if p.due != nil { // nil in the pool of a test's stored attempt (testsupport.go)
		p.due.set(t, true)
	}
}

// freed is called when a delivery finishes: if the last claim was full
// there may be more work waiting for the slot, and the dispatcher is woken
// once it would claim — not for every freed slot, which would cost a
// wake-up of the dispatcher per job while free slots gather.
func (p *pool) freed(d *delivery) {
	p.mu.Lock()
	delete(p.inflight, d)
	wake := p.moreToClaimLocked()
	p.mu.Unlock()
	if wake {
		p.signal()
	}
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
			if d.releaseUnstarted() {
				ds = append(ds, d)
			} else {
				p.record(d, droppedOutcome(d.state(), false, nil, 0)) // lost or cancelled while it waited
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
		released := d.releaseBeforeOutcome()
		if !released && !d.inCallersTx() {
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
		return !d.releaseAgain()
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

// reporter is the progress and output state of one attempt.
type reporter struct {
	mu       sync.Mutex
	cur      Progress
	has      bool         // cur holds a report
	dirty    bool         // cur is not written yet
	output   []byte       // set by SetOutput; written when the attempt ends
	last     time.Time    // when the last write began
	timer    *clock.Timer // the next coalesced write, if scheduled
	writing  bool         // a write is in flight
	done     bool         // the handler returned: no more reports
	inflight sync.WaitGroup
}
