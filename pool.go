package litequeue

import (
	"container/heap"
	"context"
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
// attempt and deciding its outcome (attempt.go), recording it
// (record.go), keeping leases (lease.go).

// delivery is the untyped state of one claimed job.
type delivery struct {
	q         *core
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
	meta      string       // the job's metadata JSON (metadata.go), "" for none
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
	q *core
	// handlers and middleware are the Queue's as Start found them: Register
	// and Use are refused while the queue runs.
	handlers   map[string]*handler
	middleware []Middleware
	base       context.Context // values for handlers; never cancelled by Start's caller alone
	pools      map[string]*pool

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
	proc      store.Process      // this run's row of the processes registry (process.go)
}

// pool runs one queue's handlers in this process.
type pool struct {
	q         *core
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
	unwritten  map[*delivery]outcome  // outcomes whose write failed, kept with their leases (record.go)
	nUnwritten atomic.Int32           // len(unwritten), read without mu
	rewriting  sync.Mutex             // one rewrite of the kept outcomes at a time

	workers sync.WaitGroup
	running atomic.Int64 // handlers running now (for tests and stats)

	paused    atomic.Bool  // the queue is paused: claim nothing, start nothing (see dispatch.go)
	recheck   atomic.Bool  // another process wrote: re-read the pause, look for cancelled jobs
	resuming  atomic.Int32 // Resumes of this process in flight: a re-read of the pause does not unpause (control.go)
	limited   atomic.Bool  // the queue has stored limits: claim through them (limits.go)
	claimedAt atomic.Int64 // the Clock's time of the last claim (limits.go)
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

// claimableLocked returns how many slots the dispatcher should claim for
// now, 0 for none: the free slots — the handler slots plus two prefetch
// allowances (prefetch.go), less the jobs held — unless the workers still
// have more than a round of claimed jobs waiting and fewer slots are free
// than one allowance. So a pool draining a backlog claims the next batch
// while a batch is still waiting, and the claim's statement (on
// PostgreSQL its round trip and commit) overlaps the handlers' work
// instead of leaving them idle until it returns; and free slots gather
// until a batch is worth its statement, since one claim of many rows costs
// one statement where many claims of a few rows cost one each. p.mu is
// held.
func (p *pool) claimableLocked() int {
	free := min(p.cfg.Concurrency+2*p.prefetch.n, p.capacity) - len(p.inflight) - p.reserved
	if free <= 0 || (p.ready.Len() > p.cfg.Concurrency && free < p.prefetch.n) {
		return 0
	}
	return free
}

// moreToClaimLocked reports whether the dispatcher, asleep, should be woken:
// its last claim was full, so more may be due, and it would claim now. p.mu
// is held.
func (p *pool) moreToClaimLocked() bool {
	return p.full && p.claimableLocked() > 0
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
	d := heap.Pop(&p.ready).(*delivery)
	if was := p.prefetch.n; p.prefetch.started(p.q.clock.Now()) > was && p.moreToClaimLocked() {
		p.signal() // a larger allowance: claim ahead now, not at the next freed slot
	}
	return d
}

// queued reports how many claimed deliveries wait for a worker.
func (p *pool) queued() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ready.Len()
}

// extendPeriod is how often the leases of claimed jobs are extended: every
// third of the visibility timeout.
func (p *pool) extendPeriod() time.Duration {
	return max(p.cfg.VisibilityTimeout/3, time.Millisecond)
}
