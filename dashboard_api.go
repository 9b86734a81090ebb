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
// (ErrNotFound), a job that is not cancelled (ErrWrongState), or a job whose
// idempotency key is now held by a live job (ErrDuplicate) moves nothing,
// and the error names the id. A handler of the job that ignored its
// cancellation and still runs cannot record an outcome: its lease is gone.
func (q *Queue) RequeueCancelled(ctx context.Context, ids ...int64) (int, error) {
	if err := q.writable(); err != nil {
		return 0, err
	}
	moved, err := q.store.RequeueCancelled(ctx, ids, unixNanos(q.clock))
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

// ListDeadGroup returns one page of the dead letters f selects (f.States is
// ignored) whose normalised error message is key (a DeadGroup.Key), highest
// id first, as ListJobs pages: p.Before is the cursor (0: from the newest),
// p.Limit the most jobs on the page (default DefaultPageLimit), and
// p.ScanLimit the most dead letters the page reads, through the index of
// finished jobs (default DefaultGroupLimit); a page that read that many
// before finding Limit matches is Partial, and Next continues below it.
// ScannedFrom and ScannedTo are the lowest and highest id read.
func (q *Queue) ListDeadGroup(ctx context.Context, key string, f JobQuery, p PageRequest) (JobPage, error) {
	if p.Limit <= 0 {
		p.Limit = DefaultPageLimit
	}
	if p.ScanLimit <= 0 {
		p.ScanLimit = DefaultGroupLimit
	}
	sq, ok, err := deadQuery(f, unixNanos(q.clock))
	if err != nil || !ok {
		return JobPage{}, err
	}
	cursor := p.Before
	if cursor <= 0 {
		cursor = 1<<63 - 1
	}
	var page JobPage
	var ids []int64
	keys := normalizer{}
	scanned := 0
	const chunk = bulkChunk * 4
scan:
	for scanned < p.ScanLimit {
		n := min(chunk, p.ScanLimit-scanned)
		msgs, err := q.store.DeadBefore(ctx, sq, cursor, n)
		if err != nil {
			return JobPage{}, wrapf("litequeue: list dead group: %w", err)
		}
		for i, m := range msgs {
			if page.ScannedTo == 0 {
				page.ScannedTo = m.ID
			}
			page.ScannedFrom, cursor = m.ID, m.ID
			scanned++
			if keys.key(m.Message) != key {
				continue
			}
			ids = append(ids, m.ID)
			if len(ids) == p.Limit {
				if i < len(msgs)-1 || len(msgs) == n {
					page.Next = m.ID // more may follow
				}
				break scan
			}
		}
		if len(msgs) < n {
			break // no dead letter is left below
		}
		if scanned >= p.ScanLimit {
			page.Next, page.Partial = cursor, true
		}
	}
	for _, id := range ids {
		j, err := q.Job(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue // deleted since it was read
		}
		if err != nil {
			return JobPage{}, err
		}
		page.Jobs = append(page.Jobs, j)
	}
	return page, nil
}

// DeleteDeadGroup deletes every dead letter f selects (f.States is ignored)
// whose normalised error message is key (a DeadGroup.Key), with its
// history, and returns how many it deleted. Like RequeueGroup it reads
// every dead letter f selects, in chunks, so the whole group goes, not only
// its recent part. An empty key deletes nothing and is an error wrapping
// ErrInvalidJob.
func (q *Queue) DeleteDeadGroup(ctx context.Context, key string, f JobQuery) (int, error) {
	if err := q.writable(); err != nil {
		return 0, err
	}
	if key == "" {
		return 0, fmt.Errorf("litequeue: delete dead group: no group key given (use a DeadGroup.Key): %w", ErrInvalidJob)
	}
	return q.eachOfDeadGroup(ctx, key, f, "delete dead group", func(ids []int64) (int, error) {
		return q.DeleteJobs(ctx, JobQuery{IDs: ids, States: []State{StateDead}})
	})
}

// eachOfDeadGroup reads every dead letter f selects (f.States is
// ignored), in chunks from the newest, and calls act with the ids of each
// chunk's dead letters whose normalised error message is key; it returns
// the sum of what act returns, and stops at the first error (what names
// the operation in a read's error).
func (q *Queue) eachOfDeadGroup(ctx context.Context, key string, f JobQuery, what string, act func(ids []int64) (int, error)) (int, error) {
	sq, ok, err := deadQuery(f, unixNanos(q.clock))
	if err != nil || !ok {
		return 0, err
	}
	const chunk = bulkChunk * 4
	cursor := int64(1<<63 - 1)
	total := 0
	keys := normalizer{}
	for {
		msgs, err := q.store.DeadBefore(ctx, sq, cursor, chunk)
		if err != nil {
			return total, wrapf("litequeue: "+what+": %w", err)
		}
		var ids []int64
		for _, m := range msgs {
			if keys.key(m.Message) == key {
				ids = append(ids, m.ID)
			}
		}
		if len(ids) > 0 {
			n, err := act(ids)
			total += n
			if err != nil {
				return total, err
			}
		}
		if len(msgs) < chunk {
			return total, nil
		}
		cursor = msgs[len(msgs)-1].ID
	}
}
