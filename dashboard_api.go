package litequeue

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/litequeue/litequeue/internal/store"
)

// FinishedCounts counts, by queue name, the jobs in state (StateCompleted,
// StateDead or StateCancelled) among the limit most recently finished jobs
// of that state, through an index: its cost is bounded by limit, not by the
// size of the file. capped is true when the file holds at least limit such
// jobs in all; the counts are then "at least" figures. A queue with none is
// absent from counts. limit 0 or less means DefaultCountLimit; any other
// state is an error wrapping ErrInvalidJob.
func (q *Queue) FinishedCounts(ctx context.Context, state State, limit int) (counts map[string]int, capped bool, err error) {
	if limit <= 0 {
		limit = DefaultCountLimit
	}
	var st store.State
	switch state {
	case StateCompleted:
		st = store.Completed
	case StateDead:
		st = store.Dead
	case StateCancelled:
		st = store.Cancelled
	default:
		return nil, false, fmt.Errorf("litequeue: finished counts: %q is not a finished state; use completed, dead or cancelled: %w", state, ErrInvalidJob)
	}
	counts, capped, err = q.store.FinishedCounts(ctx, st, limit)
	if err != nil {
		return nil, false, wrapf("litequeue: finished counts: %w", err)
	}
	return counts, capped, nil
}

// QueueConfigs returns the configuration of every queue in Options.Queues,
// sorted by name, with the defaults filled in (Concurrency and
// VisibilityTimeout as the queue runs them). A queue not configured there
// runs with NewQueueConfig's defaults and is absent; nil when none is
// configured.
func (q *Queue) QueueConfigs() []QueueConfig {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []QueueConfig
	for _, name := range slices.Sorted(maps.Keys(q.configs)) {
		out = append(out, q.configs[name])
	}
	return out
}

// RequeueCancelled moves cancelled jobs back to ready, due now, with their
// attempts reset (their history is kept), and returns how many moved, as
// Requeue does for dead letters. It is all or nothing: an unknown id
// (ErrNotFound), a job that is not cancelled (ErrWrongState), a job whose
// idempotency key is now held by a live job (ErrDuplicate), or a workflow's
// dependant that needs the success of a parent that died or was cancelled
// (ErrParentFailed) moves nothing, and the error names the id. A workflow's
// dependant whose parents all succeeded or are still live goes back to
// waiting for the live ones (ready when none is left); a workflow's parent
// brings back to waiting the dependants its cancel cancelled, as Requeue
// does for a dead one. A handler of the job that ignored its cancellation
// and still runs cannot record an outcome: its lease is gone.
func (q *Queue) RequeueCancelled(ctx context.Context, ids ...int64) (int, error) {
	if err := q.writable(); err != nil {
		return 0, err
	}
	moved, err := q.store.RequeueCancelled(ctx, ids, unixNanos(q.clock))
	var pf *store.ParentFailedError
	if errors.As(err, &pf) {
		return 0, fmt.Errorf("%w: job %d needs the success of job %d, which died or was cancelled; requeue job %d first (Requeue or RequeueCancelled)",
			ErrParentFailed, pf.ID, pf.Parent, pf.Parent)
	}
	if err != nil {
		return 0, wrapf("litequeue: %w", err)
	}
	q.afterRequeue(moved)
	return len(moved), nil
}

// RunNow makes a waiting job due now: a scheduled job, or one waiting out
// the backoff before its next attempt, becomes ready at once and keeps its
// attempt count and history; a process running its queue claims it as it
// would any ready job (in this process at once; on PostgreSQL the others
// are notified). A job that is ready already is left as it is. An unknown
// id is ErrNotFound; a running or finished job is ErrWrongState.
func (q *Queue) RunNow(ctx context.Context, id int64) error {
	if err := q.writable(); err != nil {
		return err
	}
	m, err := q.store.RunNow(ctx, id, unixNanos(q.clock))
	if err != nil {
		return wrapf("litequeue: %w", err)
	}
	q.wake(m.Queue)
	return nil
}
