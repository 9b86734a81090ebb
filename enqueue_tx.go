package litequeue

import (
	"context"
	"database/sql"
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

// enqueuedTx holds the jobs nj, stored with ids (dups[i] non-nil: not
// stored) on the application's tx, to be reported enqueued once tx
// commits. A store that cannot tell reports them now, when they were
// written into tx.
func (q *Queue) enqueuedTx(ctx context.Context, tx *sql.Tx, jobs []store.NewJob, ids []int64, dups []error) {
	g := &txGroup{}
	for i := range jobs {
		if dups != nil && dups[i] != nil {
			continue
		}
		nj := &jobs[i]
		g.jobs = append(g.jobs, &txJob{id: ids[i], created: nj.CreatedAt, queue: nj.Queue, kind: nj.Kind,
			delay: time.Duration(nj.VisibleAt - nj.CreatedAt), group: g})
	}
	if len(g.jobs) == 0 {
		return
	}
	tw, ok := q.store.(store.TxWatcher)
	if !ok {
		for _, j := range g.jobs {
			q.emit(Event{Type: EventEnqueued, JobID: j.id, Queue: j.queue, Kind: j.kind, Delay: j.delay})
		}
		return
	}
	mark, err := tw.TxMark(ctx, store.SQLTx(tx), g.jobs[0].id, g.jobs[0].created)
	if err != nil {
		q.log.Warn("litequeue: naming the transaction of an EnqueueTx failed; its jobs will not be reported enqueued",
			LogJobID, g.jobs[0].id, LogError, err.Error())
		return
	}
	g.mark = mark
	q.txs.add(&q.core, tw, g)
}

// add holds g's jobs until the watcher (started, or woken, here) or a
// claim reports them.
func (t *txEnqueues) add(q *core, tw store.TxWatcher, g *txGroup) {
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
	go t.watch(q, tw, ctx, cancel, t.done)
}

// supersede drops the jobs held under ids just given to other jobs: on
// SQLite a rolled-back transaction gives its ids back, and the next insert
// takes them, so a held job whose id comes back belonged to a transaction
// that rolled back — its whole group did.
func (c *core) supersedeTx(ids []int64) {
	t := &c.txs
	if t.n.Load() == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		t.supersedeLocked(id)
	}
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

// claimedTx reports the jobs of ds that were enqueued in a transaction and
// not reported yet: the claim saw them committed. It runs on the claim's
// commit path, before the jobs go to the workers.
func (c *core) claimedTx(ds []*delivery) {
	t := &c.txs
	if t.n.Load() == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, d := range ds {
		// An id given back by a rolled-back transaction may name a later
		// job: the enqueue time and kind tell.
		if j := t.jobs[d.id]; j != nil && j.created == d.createdAt && j.kind == d.kind {
			t.report(c, j)
		}
	}
}

// report emits j's EventEnqueued. t.mu is held.
func (t *txEnqueues) report(q *core, j *txJob) {
	if !j.reported {
		j.reported = true
		q.emit(Event{Type: EventEnqueued, JobID: j.id, Queue: j.queue, Kind: j.kind, Delay: j.delay})
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
func (t *txEnqueues) watch(q *core, tw store.TxWatcher, ctx context.Context, cancel context.CancelFunc, done chan struct{}) {
	defer close(done)
	interval := q.opts.PollInterval
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
			q.log.Warn("litequeue: asking whether EnqueueTx transactions committed failed; asking again", LogError, err.Error())
		}
		for i, g := range groups {
			if err != nil || states[i] == store.TxOpen {
				if closing {
					q.log.Debug("litequeue: Close cannot tell whether an EnqueueTx transaction committed; its jobs are not reported enqueued",
						LogJobID, g.jobs[0].id)
					for _, j := range g.jobs {
						t.forget(j)
					}
				}
				continue
			}
			for _, j := range g.jobs {
				if states[i] == store.TxCommitted {
					t.report(q, j)
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

// wakeTx makes the watcher look again now (another connection wrote: on
// PostgreSQL, maybe the commit of a watched transaction).
func (c *core) wakeTx() {
	t := &c.txs
	if t.n.Load() == 0 {
		return
	}
	t.mu.Lock()
	if t.running {
		t.poke()
	}
	t.mu.Unlock()
}

// closeTx ends the watcher: one last look, waiting at most grace for the
// store; what it cannot tell is dropped.
func (q *Queue) closeTx(grace time.Duration) {
	t := &q.txs
	t.mu.Lock()
	t.closed = true
	running, done, cancel := t.running, t.done, t.cancel
	if running {
		t.poke()
	}
	t.mu.Unlock()
	if !running {
		return
	}
	stop := time.AfterFunc(grace, cancel)
	<-done
	stop.Stop()
}
