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

// The Queue: what every part of a queue shares (options, clock, store,
// events, registered handlers, the running pools).

// Queue is a job queue on one SQLite file. It is safe for concurrent use.
type Queue struct {
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

	mu       sync.Mutex
	handlers map[string]*handler // by kind
	configs  map[string]QueueConfig
	run      *runState // non-nil while started
	closed   bool

	middleware []Middleware // see Use
	hubOnce    sync.Once
	hub        *hub // WatchProgress.s watchers (hub.go)

	faults kitlink.Faults // the test kit's outcome hooks, Drop and Lost (testsupport.go); zero otherwise
}

// newQueue makes a queue on st; lite is st when it is the SQLite store.
func newQueue(o Options, st store.Backend, lite *sqlite.Store, readOnly bool) *Queue {
	q := &Queue{
		opts:     o,
		clock:    o.Clock,
		log:      o.Logger,
		store:    st,
		lite:     lite,
		readOnly: readOnly,
		rnd:      o.Rand,
		handlers: map[string]*handler{},
		configs:  map[string]QueueConfig{},
		cleanup:  newAlarm(o.Clock),
	}
	for _, qc := range o.Queues {
		q.configs[qc.Name] = qc.withDefaults()
	}
	if o.OnEvent != nil {
		q.events = newEventPump(o.OnEvent, o.EventBuffer, o.Logger)
	}
	if !readOnly {
		q.hist = newHistory(st, o.Logger)
		q.listeners = append(q.listeners, q.hist.record)
	}
	q.leaseSeq.Store(rand.Int64N(1 << 40))
	return q
}

// config returns the configuration of the named queue.
func (q *Queue) config(name string) QueueConfig {
	q.mu.Lock()
	defer q.mu.Unlock()
	if c, ok := q.configs[name]; ok {
		return c
	}
	return NewQueueConfig(name).withDefaults()
}

func (q *Queue) writable() error {
	q.mu.Lock()
	closed := q.closed
	q.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if q.readOnly {
		return ErrReadOnly
	}
	return nil
}

func (q *Queue) nextLease() int64 { return q.leaseSeq.Add(1) }

func (q *Queue) randDecide(p RetryPolicy, attempt int) RetryDecision {
	q.randMu.Lock()
	defer q.randMu.Unlock()
	return p.DecideRand(attempt, q.rnd)
}
