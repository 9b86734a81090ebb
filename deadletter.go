package litequeue

import (
	"context"
	"time"
)

// Dead letters are jobs that gave up: their attempts were used up, they
// failed with a Permanent error, a retry Strategy refused them, or their
// payload could not be decoded. They stay in the file, in state dead, with
// their queue, kind, payload, attempt history, reason (JobInfo.DeadReason)
// and time (JobInfo.FinishedAt) until requeued or purged. There is no hidden
// cap: nothing is dropped silently.

// DeadFilter selects dead letters for RequeueAll and PurgeDead. Zero fields
// select all.
//
// Deprecated: use JobQuery with RequeueJobs and DeleteJobs.
type DeadFilter struct {
	Queue string
	Kind  string
	// OlderThan selects dead letters that died more than this long ago
	// (PurgeDead only); 0 means any age.
	OlderThan time.Duration
	// IDs, when not empty, restricts the selection to these ids.
	IDs []int64
}

// DeadLetters lists dead letters, newest first unless f.Order says
// otherwise. f.States is ignored. Like Jobs it returns every match unless
// f.Limit asks for fewer: a zero JobFilter lists them all.
func (q *Queue) DeadLetters(ctx context.Context, f JobFilter) ([]JobInfo, error) {
	f.States = []State{StateDead}
	return q.Jobs(ctx, f)
}

// DeadLetter returns one dead letter with its attempt history. It wraps
// ErrNotFound if no job has the id and ErrWrongState if the job is not dead.
func (q *Queue) DeadLetter(ctx context.Context, id int64) (JobInfo, error) {
	j, err := q.Job(ctx, id)
	if err != nil {
		return JobInfo{}, err
	}
	if j.State != StateDead {
		return JobInfo{}, wrapf("litequeue: job %d is %s, not a dead letter: %w", id, j.State, ErrWrongState)
	}
	return j, nil
}

// Requeue moves dead letters back to ready, due now, with their attempts
// reset (their history is kept), and returns how many moved. It is all or
// nothing: an unknown id (ErrNotFound), a job that is not dead
// (ErrWrongState), or a dead letter whose idempotency key is now held by a
// live job (ErrDuplicate) moves nothing, and the error names the id.
func (q *Queue) Requeue(ctx context.Context, ids ...int64) (int, error) {
	if err := q.writable(); err != nil {
		return 0, err
	}
	moved, err := q.store.Requeue(ctx, ids, unixNanos(q.clock))
	if err != nil {
		return 0, wrapf("litequeue: %w", err)
	}
	q.afterRequeue(moved)
	return len(moved), nil
}

// RequeueAll moves every dead letter f selects (f.OlderThan is ignored) back
// to ready as Requeue does, and returns how many moved. A dead letter whose
// idempotency key is now held by a live job stays dead and is not counted.
//
// Deprecated: use RequeueJobs.
func (q *Queue) RequeueAll(ctx context.Context, f DeadFilter) (int, error) {
	return q.RequeueJobs(ctx, JobQuery{Queue: f.Queue, Kind: f.Kind, IDs: f.IDs})
}

// PurgeDead deletes the dead letters f selects, with their history, and
// returns how many it deleted.
//
// Deprecated: use DeleteJobs with States {StateDead} (and FinishedBefore
// for f.OlderThan).
func (q *Queue) PurgeDead(ctx context.Context, f DeadFilter) (int, error) {
	jq := JobQuery{Queue: f.Queue, Kind: f.Kind, IDs: f.IDs, States: []State{StateDead}}
	if f.OlderThan > 0 {
		jq.FinishedBefore = q.clock.Now().Add(-f.OlderThan)
	}
	return q.DeleteJobs(ctx, jq)
}
