package litequeue

import (
	"context"
	"database/sql"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

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
	q.txs.add(tw, g)
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
			t.report(j)
		}
	}
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
