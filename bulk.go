package litequeue

import (
	"context"

	"github.com/litequeue/litequeue/internal/store"
)

// bulkChunk is how many jobs one writer transaction of a bulk action
// changes, so that an action on a million jobs never holds the writer (and
// every enqueue and claim behind it) for long.
const bulkChunk = 500

// RequeueJobs moves every dead letter that f selects back to ready, due
// now, with its attempts reset (as Requeue does), and returns how many
// moved. f.States is ignored: only dead letters move. A dead letter whose
// idempotency key is now held by a live job stays dead and is not counted.
// The work is done in transactions of a few hundred jobs, newest first, so
// other writes of the queue go on meanwhile; a job that changes state
// between two of them is judged by its state when its turn comes.
func (q *Queue) RequeueJobs(ctx context.Context, f JobQuery) (int, error) {
	f.States = []State{StateDead}
	total, err := q.bulk(ctx, store.BulkRequeue, f, nil, func(r store.BulkResult) { q.afterRequeue(r.Moved) })
	if err != nil {
		return total, wrapf("litequeue: requeue matching jobs: %w", err)
	}
	return total, nil
}

// CancelJobs cancels every pending (ready or scheduled) job that f
// selects, as Cancel does (they are kept in state cancelled), and returns
// how many. Jobs in other states are never touched, whatever f.States says:
// f.States may narrow the selection to ready or to scheduled jobs; cancel
// running jobs by id with Cancel. It works in chunks like RequeueJobs.
// Each cancelled job reports EventCancelled, and its QueueConfig.OnCancel
// (when this Queue has one) is asked for a follow-up enqueued in the
// transaction of its chunk, as for Cancel.
func (q *Queue) CancelJobs(ctx context.Context, f JobQuery) (int, error) {
	f.States = narrow(f.States, StateReady, StateScheduled)
	if len(f.States) == 0 {
		return 0, nil
	}
	follow := q.cancelHook(unixNanos(q.clock))
	total, err := q.bulk(ctx, store.BulkCancel, f, follow, func(r store.BulkResult) {
		for _, c := range r.Cancelled {
			q.emit(Event{Type: EventCancelled, JobID: c.ID, Queue: c.Queue, Kind: c.Kind, Err: ErrJobCancelled})
		}
		follow.done(r.Cancelled)
	})
	follow.done(nil)
	if err != nil {
		return total, wrapf("litequeue: cancel matching jobs: %w", err)
	}
	return total, nil
}

// DeleteJobs deletes every dead, completed or cancelled job that f
// selects, with its history, and returns how many. Live jobs (pending or
// running) are never touched, whatever f.States says: cancel pending jobs
// with CancelJobs. It works in chunks like RequeueJobs.
func (q *Queue) DeleteJobs(ctx context.Context, f JobQuery) (int, error) {
	f.States = narrow(f.States, StateCompleted, StateDead, StateCancelled)
	if len(f.States) == 0 {
		return 0, nil
	}
	total, err := q.bulk(ctx, store.BulkDelete, f, nil, nil)
	if err != nil {
		return total, wrapf("litequeue: delete matching jobs: %w", err)
	}
	return total, nil
}

// RequeueMatching moves the dead letters f selects back to ready, as
// RequeueJobs does.
//
// Deprecated: use RequeueJobs.
func (q *Queue) RequeueMatching(ctx context.Context, f JobQuery) (int, error) {
	return q.RequeueJobs(ctx, f)
}

// CancelMatching cancels the pending jobs f selects, as CancelJobs does.
//
// Deprecated: use CancelJobs.
func (q *Queue) CancelMatching(ctx context.Context, f JobQuery) (int, error) {
	return q.CancelJobs(ctx, f)
}

// DeleteMatching deletes the finished jobs f selects, as DeleteJobs does.
//
// Deprecated: use DeleteJobs.
func (q *Queue) DeleteMatching(ctx context.Context, f JobQuery) (int, error) {
	return q.DeleteJobs(ctx, f)
}

// narrow returns the states of want that have also been asked for (all of
// want when asked is empty).
func narrow(asked []State, want ...State) []State {
	if len(asked) == 0 {
		return want
	}
	var out []State
	for _, w := range want {
		for _, a := range asked {
			if a == w {
				out = append(out, w)
				break
			}
		}
	}
	return out
}

// bulk applies op to the jobs f selects, newest first, a chunk at a time,
// each chunk in its own store transaction (selecting and applying in it),
// and returns how many changed; follow, when set, asks for the follow-ups
// of cancelled jobs; committed, when set, runs after each chunk that
// changed something. The clock is read for each chunk.
func (q *Queue) bulk(ctx context.Context, op store.BulkOp, f JobQuery, follow *cancelFollowUps, committed func(store.BulkResult)) (int, error) {
	if err := q.writable(); err != nil {
		return 0, err
	}
	if _, ok, err := storeQuery(f, 0); err != nil || !ok {
		return 0, err
	}
	total := 0
	cursor := int64(1<<63 - 1)
	for {
		sq, _, _ := storeQuery(f, unixNanos(q.clock))
		r, err := q.store.Bulk(ctx, op, sq, cursor, bulkChunk, follow.hook())
		if err != nil {
			return total, err
		}
		total += r.Changed
		if r.Changed > 0 && committed != nil {
			committed(r)
		}
		if r.Selected < bulkChunk {
			return total, nil
		}
		cursor = r.Last
	}
}

func (q *Queue) afterRequeue(moved []store.Moved) {
	queues := map[string]bool{}
	for _, j := range moved {
		queues[j.Queue] = true
		q.emit(Event{Type: EventRequeued, JobID: j.ID, Queue: j.Queue, Kind: j.Kind})
	}
	for name := range queues {
		q.wake(name)
	}
}
