package litequeue

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// EventEnqueued of the jobs enqueued in the application's transaction
// (EnqueueTx, EnqueueBatchTx). Such a job exists only once the caller
// commits, which the queue does not see happen; it reports the job
// enqueued once it sees the transaction committed, and never for one that
// rolled back:
//   - a claim of the job by this process sees it committed: the claim
//     reports it, before the job's EventStarted;
//   - else a watcher asks the store (store.TxWatcher): on SQLite in a
//     transaction of the queue's writer, which begins only once the
//     caller's has ended (it holds the write lock from its insert on); on
//     PostgreSQL by the transaction's id, at once and then on each wake-up
//     of the queue by another connection's write and every PollInterval
//     (DefaultPollInterval when polling is off) while it runs.
//
// On SQLite a rolled-back transaction gives its jobs' ids back to the next
// insert: a held job whose id another enqueue of this process receives is
// dropped as rolled back, and the watcher tells a job from a later one with
// its id by the enqueue time (see sqlite.Store.TxEnded for the one case it
// cannot tell). A store without a TxWatcher reports the jobs when they are
// written into the transaction. Close looks once more (waiting at most
// BusyTimeout) and drops what it cannot tell.

// txEnqueues holds the jobs enqueued in transactions not yet seen to end.
type txEnqueues struct {
	n       atomic.Int64 // unreported jobs; 0: claims need not look
	mu      sync.Mutex
	jobs    map[int64]*txJob // unreported, by id
	groups  []*txGroup       // in enqueue order, with unreported jobs
	running bool             // the watcher runs
	closed  bool
	wake    chan struct{}
	cancel  context.CancelFunc // ends the watcher's context (closeTx, past its grace)
	done    chan struct{}      // closed when the watcher returns

	// Set by the queue's core before the first add.
	emit     func(Event)   // reports a job enqueued
	log      *slog.Logger  // the queue's logger
	interval time.Duration // the watcher's poll (Options.PollInterval)
}

// txGroup is the jobs one call enqueued in one transaction.
type txGroup struct {
	mark store.TxMark
	jobs []*txJob
}

type txJob struct {
	id, created int64
	queue, kind string
	delay       time.Duration
	reported    bool
	group       *txGroup
}

// add holds g's jobs until the watcher (started, or woken, here) or a
// claim reports them.
func (t *txEnqueues) add(tw store.TxWatcher, g *txGroup) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if t.jobs == nil {
		t.jobs = map[int64]*txJob{}
		t.wake = make(chan struct{}, 1)
	}
	for _, j := range g.jobs {
		t.supersedeLocked(j.id)
		t.jobs[j.id] = j
	}
	t.n.Store(int64(len(t.jobs)))
	t.groups = append(t.groups, g)
	if t.running {
		t.poke()
		return
	}
	t.running = true
	ctx, cancel := context.WithCancel(context.Background())
	t.cancel, t.done = cancel, make(chan struct{})
	go t.watch(tw, ctx, cancel, t.done)
}

// supersedeLocked is supersede of one id. t.mu is held.
func (t *txEnqueues) supersedeLocked(id int64) {
	old := t.jobs[id]
	if old == nil {
		return
	}
	for _, j := range old.group.jobs {
		if t.jobs[j.id] == j {
			t.forget(j)
		}
	}
}

// poke wakes the watcher to look again.
func (t *txEnqueues) poke() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// report emits j's EventEnqueued. t.mu is held.
func (t *txEnqueues) report(j *txJob) {
	if !j.reported {
		j.reported = true
		t.emit(Event{Type: EventEnqueued, JobID: j.id, Queue: j.queue, Kind: j.kind, Delay: j.delay})
	}
	t.forget(j)
}

// forget drops j. t.mu is held.
func (t *txEnqueues) forget(j *txJob) {
	j.reported = true
	if t.jobs[j.id] == j {
		delete(t.jobs, j.id)
	}
	t.n.Store(int64(len(t.jobs)))
}

// watch asks tw what became of the watched transactions until none is
// left, reporting the jobs of those that committed.
func (t *txEnqueues) watch(tw store.TxWatcher, ctx context.Context, cancel context.CancelFunc, done chan struct{}) {
	defer close(done)
	interval := t.interval
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	for {
		t.mu.Lock()
		t.groups = pendingGroups(t.groups)
		groups := append([]*txGroup(nil), t.groups...)
		closing := t.closed
		if len(groups) == 0 {
			t.running = false
			cancel()
			t.mu.Unlock()
			return
		}
		t.mu.Unlock()
		marks := make([]store.TxMark, len(groups))
		for i, g := range groups {
			marks[i] = g.mark
		}
		states, err := tw.TxEnded(ctx, marks)
		t.mu.Lock()
		if err != nil && ctx.Err() == nil {
			t.log.Warn("litequeue: asking whether EnqueueTx transactions committed failed; asking again", LogError, err.Error())
		}
		for i, g := range groups {
			if err != nil || states[i] == store.TxOpen {
				if closing {
					t.log.Debug("litequeue: Close cannot tell whether an EnqueueTx transaction committed; its jobs are not reported enqueued",
						LogJobID, g.jobs[0].id)
					for _, j := range g.jobs {
						t.forget(j)
					}
				}
				continue
			}
			for _, j := range g.jobs {
				if states[i] == store.TxCommitted {
					t.report(j)
				} else {
					t.forget(j)
				}
			}
		}
		t.mu.Unlock()
		if closing {
			continue // nothing is left: the loop ends
		}
		if err == nil && !slicesHasOpen(states) {
			continue // look at what came meanwhile, if anything
		}
		timer := time.NewTimer(interval)
		select {
		case <-t.wake:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
	}
}

func slicesHasOpen(states []store.TxState) bool {
	for _, s := range states {
		if s == store.TxOpen {
			return true
		}
	}
	return false
}

// pendingGroups returns gs without the groups all of whose jobs were
// reported or dropped.
func pendingGroups(gs []*txGroup) []*txGroup {
	out := gs[:0]
	for _, g := range gs {
		for _, j := range g.jobs {
			if !j.reported {
				out = append(out, g)
				break
			}
		}
	}
	return out
}
