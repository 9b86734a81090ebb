package litequeue

import (
	"context"
	"fmt"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// Live control: pausing a queue, cancelling a job while it runs, and
// snoozing a job without using an attempt.

// Pause pauses the named queue, in the database, for every process on it:
// paused queues claim nothing new (nor does Enqueue hand a job of one
// straight to a worker), while handlers already running finish normally.
// In this process it takes effect before Pause returns — jobs claimed but
// not yet started go back, unrun, without using an attempt; other processes
// notice within Options.PollInterval (and release theirs). The pause
// survives restarts until Resume.
//
// A queue need not exist to be paused: pausing a queue with no jobs or no
// handlers yet is allowed, and applies to the jobs that come (an app can
// start with its background queue paused). Pausing a paused queue does
// nothing and returns nil. An invalid queue name is ErrInvalidJob; ErrClosed
// and ErrReadOnly as for every write.
func (q *Queue) Pause(ctx context.Context, queue string) error {
	if err := q.writable(); err != nil {
		return err
	}
	if err := validName("queue", queue); err != nil {
		return wrapf("litequeue: pause: %w", err)
	}
	changed, err := q.store.Pause(ctx, queue, unixNanos(q.clock))
	if err != nil {
		return wrapf("litequeue: pause queue %q: %w", queue, err)
	}
	if p := q.localPool(queue); p != nil {
		p.paused.Store(true)
		p.releaseQueued()
	}
	if changed {
		q.emit(Event{Type: EventPaused, Queue: queue})
	}
	return nil
}

// Resume resumes the named queue paused by Pause (in any process): its jobs
// are claimed again at once here, and within Options.PollInterval by other
// processes. Resuming a queue that is not paused does nothing and returns
// nil. Errors as for Pause.
func (q *Queue) Resume(ctx context.Context, queue string) error {
	if err := q.writable(); err != nil {
		return err
	}
	if err := validName("queue", queue); err != nil {
		return wrapf("litequeue: resume: %w", err)
	}
	// The local pool must not start anything before EventResumed: while
	// paused it re-reads the pause at every wake-up, and the store's
	// resume wakes it (its notification) before this emits the event.
	p := q.localPool(queue)
	if p != nil {
		p.resuming.Add(1)
		defer func() {
			p.resuming.Add(-1)
			p.signal()
		}()
	}
	changed, err := q.store.Resume(ctx, queue)
	if err != nil {
		return wrapf("litequeue: resume queue %q: %w", queue, err)
	}
	if changed { // before the pool starts anything: events keep their order
		q.emit(Event{Type: EventResumed, Queue: queue})
	}
	if p != nil {
		p.paused.Store(false)
	}
	return nil
}

// localPool returns the pool running the named queue in this process, or
// nil.
func (q *Queue) localPool(queue string) *pool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.run == nil {
		return nil
	}
	return q.run.pools[queue]
}

// Cancel cancels jobs by id and returns how many it cancelled. A pending
// (ready or scheduled) job becomes cancelled at once. A running job becomes
// cancelled at once too, and its handler's context is cancelled with cause
// ErrJobCancelled: at once when it runs in this process, within
// Options.PollInterval when it runs in another (or at its next lease
// extension, a third of the visibility timeout, if polling is off). A
// handler that ignores its context may run on, but its result is dropped,
// as with a lost lease: the job stays cancelled, it is not retried and is
// no dead letter.
//
// Cancelled jobs are kept, in state cancelled, until PurgeCancelled; a
// cancelled job's idempotency key is free again at once. The job's
// QueueConfig.OnCancel, when this Queue has one, is asked for a follow-up
// enqueued in the same transaction.
//
// Cancel is all or nothing: if any id is unknown (ErrNotFound) or names a
// job that is completed, dead or cancelled already (ErrWrongState), nothing
// is cancelled and the error names the id. Repeating an id counts it once.
func (q *Queue) Cancel(ctx context.Context, ids ...int64) (int, error) {
	if err := q.writable(); err != nil {
		return 0, err
	}
	now := unixNanos(q.clock)
	follow := q.cancelHook(now)
	cs, err := q.store.Cancel(ctx, ids, now, follow.hook())
	if err != nil {
		follow.done(nil)
		return 0, wrapf("litequeue: %w", err)
	}
	defer follow.done(cs)
	// A cancelled workflow parent may have made dependants due (Workflow.After).
	q.Notify()
	for _, c := range cs {
		if c.Running {
			if p := q.localPool(c.Queue); p != nil {
				if d := p.inflightLease(store.Lease{ID: c.ID, Lease: c.Lease}); d != nil {
					p.stopCancelled(d)
					continue // its worker reports EventCancelled
				}
			}
		}
		q.emit(Event{Type: EventCancelled, JobID: c.ID, Queue: c.Queue, Kind: c.Kind, Err: ErrJobCancelled})
	}
	return len(cs), nil
}

// PurgeCancelled deletes cancelled jobs, with their history, that were
// cancelled more than olderThan ago (0: all of them) and returns how many.
// A negative olderThan is an error.
func (q *Queue) PurgeCancelled(ctx context.Context, olderThan time.Duration) (int, error) {
	if err := q.writable(); err != nil {
		return 0, err
	}
	if olderThan < 0 {
		return 0, fmt.Errorf("litequeue: purge cancelled jobs: olderThan %s is negative; use 0 for all", olderThan)
	}
	n, err := q.store.PurgeCancelled(ctx, q.clock.Now().Add(-olderThan).UnixNano()+boolInt(olderThan == 0))
	if err != nil {
		return 0, wrapf("litequeue: purge cancelled jobs: %w", err)
	}
	return n, nil
}

// PausedQueues returns the queues paused by Pause (in any process), each
// with the time it was paused; an empty map when none is. Unlike Stats it
// reads only the small table of queue settings, never the jobs, so a
// dashboard may call it on every refresh. It works on a read-only queue.
func (q *Queue) PausedQueues(ctx context.Context) (map[string]time.Time, error) {
	paused, err := q.store.Paused(ctx)
	if err != nil {
		return nil, wrapf("litequeue: paused queues: %w", err)
	}
	out := make(map[string]time.Time, len(paused))
	for name, at := range paused {
		out[name] = time.Unix(0, at)
	}
	return out, nil
}
