package litequeue

import (
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/litequeue/litequeue/internal/kitlink"
	"github.com/litequeue/litequeue/internal/sqlite"
	"github.com/litequeue/litequeue/internal/store"
)

// The core: what every part of a queue shares — the options, clock, store,
// events and queue configurations. The running parts (the pools, their
// deliveries and the scheduler) hold the core, not the Queue, so they reach
// the handlers only through the copy Start gave them.

// core is the state shared by a Queue and its running parts.
type core struct {
	opts  Options
	clock Clock
	log   *slog.Logger

	store    store.Backend
	lite     *sqlite.Store // the SQLite store, nil on other backends
	readOnly bool

	randMu sync.Mutex
	rnd    *rand.Rand

	leaseSeq atomic.Int64
	cleanup  *alarm     // when the next retained completed job expires
	events   *eventPump // nil without Options.OnEvent
	hist     *history   // the per-minute history's counts in memory; nil on a read-only queue (history.go)
	// listeners are told every event, in order, in the goroutine that
	// emits it; they must not block.
	listeners []func(Event)
	// scheduleRound, when set (by tests), is told the clock time of each
	// finished scheduler round, the next wake-up it set (zero: none) and
	// how many wakes had been asked for when it began.
	scheduleRound atomic.Pointer[func(now, next time.Time, wakes uint64)]
	gate          enqueueGate // orders a job's EventEnqueued before its EventStarted (enqueue_order.go)
	txs           txEnqueues  // jobs enqueued in transactions not yet seen to commit (enqueue_tx.go)

	mu      sync.Mutex // guards configs and closed, and the Queue's own fields
	configs map[string]QueueConfig
	closed  bool

	hubOnce sync.Once
	hub     *hub // WatchProgress.s watchers (hub.go)

	faults kitlink.Faults // the test kit's outcome hooks, Drop and Lost (testsupport.go); zero otherwise

	// storedParents is set once this process stored a workflow that
	// depends on stored jobs (Workflow.NeedsJob): from then on any final
	// outcome may have resolved a child (flowResolved).
	storedParents atomic.Bool
}

// setup sets c up on st; lite is st when it is the SQLite store.
func (c *core) setup(o Options, st store.Backend, lite *sqlite.Store, readOnly bool) {
	c.opts = o
	c.clock = o.Clock
	c.log = o.Logger
	c.store = st
	c.lite = lite
	c.readOnly = readOnly
	c.rnd = o.Rand
	c.configs = map[string]QueueConfig{}
	c.cleanup = newAlarm(o.Clock)
	for _, qc := range o.Queues {
		c.configs[qc.Name] = qc.withDefaults()
	}
	if o.OnEvent != nil {
		c.events = newEventPump(o.OnEvent, o.EventBuffer, o.Logger)
	}
	if !readOnly {
		c.hist = newHistory(st, o.Logger)
		c.listeners = append(c.listeners, c.hist.record)
	}
	c.txs.log, c.txs.interval = o.Logger, o.PollInterval
	c.leaseSeq.Store(rand.Int64N(1 << 40))
}

// config returns the configuration of the named queue.
func (c *core) config(name string) QueueConfig {
	c.mu.Lock()
	defer c.mu.Unlock()
	if qc, ok := c.configs[name]; ok {
		return qc
	}
	return NewQueueConfig(name).withDefaults()
}

// writable returns ErrClosed after Close and ErrReadOnly on a read-only
// queue, nil when jobs may be written.
func (c *core) writable() error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if c.readOnly {
		return ErrReadOnly
	}
	return nil
}

// nextLease returns a lease number no other claim of this queue used.
func (c *core) nextLease() int64 { return c.leaseSeq.Add(1) }

// randDecide is p.DecideRand on the queue's seeded source of jitter.
func (c *core) randDecide(p RetryPolicy, attempt int) RetryDecision {
	c.randMu.Lock()
	defer c.randMu.Unlock()
	return p.DecideRand(attempt, c.rnd)
}
