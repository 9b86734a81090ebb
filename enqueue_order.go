package litequeue

import (
	"sync"
	"sync/atomic"

	"github.com/litequeue/litequeue/internal/store"
)

// Event order between an enqueue and the job's start. An enqueue reports
// EventEnqueued once its insert committed, but from that commit on a worker
// of this process may claim the job (on the direct hand-off, in the very
// transaction of the insert) and report EventStarted before the enqueue's
// goroutine gets to its event. OnEvent promises emission order, so the
// worker waits: an enqueue opens the gate for its jobs before it writes and
// closes it after it reported them, and a worker about to report a first
// attempt waits while an enqueue of a job like it is open.
//
// A job is known to the worker by its queue, kind and enqueue time (its id
// comes back to the enqueue only with the commit). Two jobs of one kind
// enqueued into one queue in the same nanosecond of the Clock (a mock
// clock that does not move) share a key: the worker then waits for both
// enqueues, which costs it the time until the other reports, never more.
// With no enqueue open, the check is one atomic load.

// enqueueGate holds the enqueues between their write and their
// EventEnqueued.
type enqueueGate struct {
	open    atomic.Int64 // enqueues open now; 0: nothing to wait for
	mu      sync.Mutex
	keys    map[gateKey]int           // open enqueues by job
	waiters map[gateKey]chan struct{} // closed when the key's last enqueue closes
}

type gateKey struct {
	queue, kind string
	created     int64
}

func keyOf(nj *store.NewJob) gateKey { return gateKey{nj.Queue, nj.Kind, nj.CreatedAt} }

// enter opens the gate for jobs, before they are written.
func (g *enqueueGate) enter(jobs ...store.NewJob) {
	g.mu.Lock()
	if g.keys == nil {
		g.keys = map[gateKey]int{}
	}
	for i := range jobs {
		g.keys[keyOf(&jobs[i])]++
	}
	g.open.Add(int64(len(jobs)))
	g.mu.Unlock()
}

// leave closes the gate for jobs, after their events were emitted (or they
// were not written).
func (g *enqueueGate) leave(jobs ...store.NewJob) {
	g.mu.Lock()
	for i := range jobs {
		k := keyOf(&jobs[i])
		if g.keys[k]--; g.keys[k] > 0 {
			continue
		}
		delete(g.keys, k)
		if ch, ok := g.waiters[k]; ok {
			close(ch)
			delete(g.waiters, k)
		}
	}
	g.open.Add(-int64(len(jobs)))
	g.mu.Unlock()
}

// wait returns once no enqueue of the job of queue and kind enqueued at the
// Unix nanosecond created is open. Only a first attempt can overtake its
// enqueue.
func (g *enqueueGate) wait(queue, kind string, created int64, attempt int) {
	if attempt != 1 || g.open.Load() == 0 {
		return
	}
	k := gateKey{queue, kind, created}
	g.mu.Lock()
	if g.keys[k] == 0 {
		g.mu.Unlock()
		return
	}
	ch, ok := g.waiters[k]
	if !ok {
		if g.waiters == nil {
			g.waiters = map[gateKey]chan struct{}{}
		}
		ch = make(chan struct{})
		g.waiters[k] = ch
	}
	g.mu.Unlock()
	<-ch
}
