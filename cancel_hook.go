package litequeue

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// cancelFollowUps asks QueueConfig.OnCancel for the follow-ups of the jobs
// one Cancel or CancelJobs cancels. The store calls hook inside the
// cancelling transaction; each job's OnCancel is asked once per call even
// when the transaction runs again, and its follow-up passes the enqueue
// gate until done reported it.
type cancelFollowUps struct {
	q       *Queue
	now     int64
	mu      sync.Mutex
	asked   map[int64]*store.NewJob
	entered []store.NewJob
}

// cancelHook returns the follow-up asker for a cancel at now, or nil when
// no queue of q has an OnCancel.
func (q *Queue) cancelHook(now int64) *cancelFollowUps {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, c := range q.configs {
		if c.OnCancel != nil {
			return &cancelFollowUps{q: q, now: now, asked: map[int64]*store.NewJob{}}
		}
	}
	return nil
}

// hook is the store.CancelHook of f; nil when f is nil.
func (f *cancelFollowUps) hook() store.CancelHook {
	if f == nil {
		return nil
	}
	return f.ask
}

func (f *cancelFollowUps) ask(c store.CancelledJob) *store.NewJob {
	f.mu.Lock()
	nj, ok := f.asked[c.ID]
	f.mu.Unlock()
	if ok {
		return nj
	}
	nj = f.followUp(c)
	f.mu.Lock()
	f.asked[c.ID] = nj
	if nj != nil {
		f.entered = append(f.entered, *nj)
	}
	f.mu.Unlock()
	if nj != nil {
		f.q.gate.enter(*nj)
	}
	return nj
}

// followUp asks c's queue's OnCancel for its follow-up, validated and
// encoded; nil for none. A follow-up that does not validate, or an
// OnCancel that panics, is logged and the job is cancelled without it.
func (f *cancelFollowUps) followUp(c store.CancelledJob) (nj *store.NewJob) {
	q := f.q
	cfg := q.config(c.Queue)
	if cfg.OnCancel == nil {
		return nil
	}
	defer func() {
		if v := recover(); v != nil {
			q.log.Error("litequeue: QueueConfig.OnCancel panicked; the job is cancelled without a follow-up",
				LogJobID, c.ID, LogQueue, c.Queue, LogError, fmt.Sprint(v))
			nj = nil
		}
	}()
	job, opts := cfg.OnCancel(cancelledInfo(c, f.now))
	if job == nil {
		return nil
	}
	j, err := q.prepare(job, opts)
	if err != nil {
		q.log.Error("litequeue: the follow-up job of QueueConfig.OnCancel is invalid; the job is cancelled without it",
			LogJobID, c.ID, LogQueue, c.Queue, LogError, err.Error())
		return nil
	}
	return &j
}

// cancelledInfo describes c as its cancel at now leaves it.
func cancelledInfo(c store.CancelledJob, now int64) JobInfo {
	return JobInfo{ID: c.ID, Queue: c.Queue, Kind: c.Kind, State: StateCancelled, Attempt: c.Attempt,
		Priority: c.Priority, Key: c.Key, Payload: json.RawMessage(c.Payload),
		CreatedAt: time.Unix(0, c.CreatedAt), FinishedAt: time.Unix(0, now)}
}

// done reports the follow-ups of cs that were inserted (EventEnqueued,
// after the jobs' own events) and wakes their queues, then closes the
// enqueue gate of every follow-up asked for. Call it once the store
// returned, committed or not (cs nil).
func (f *cancelFollowUps) done(cs []store.CancelledJob) {
	if f == nil {
		return
	}
	q := f.q
	var ids []int64
	for _, c := range cs {
		if c.FollowUp != nil && c.FollowUpID != 0 {
			ids = append(ids, c.FollowUpID)
		}
	}
	if len(ids) > 0 {
		q.supersedeTx(ids)
	}
	for _, c := range cs {
		fu := c.FollowUp
		if fu == nil || c.FollowUpID == 0 {
			continue
		}
		q.emit(Event{Type: EventEnqueued, JobID: c.FollowUpID, Queue: fu.Queue, Kind: fu.Kind, Delay: time.Duration(fu.VisibleAt - fu.CreatedAt)})
		if fu.VisibleAt > fu.CreatedAt {
			q.dueAt(fu.Queue, fu.Kind, fu.VisibleAt)
		} else {
			q.wake(fu.Queue)
		}
	}
	f.mu.Lock()
	entered := f.entered
	f.entered = nil
	f.mu.Unlock()
	q.gate.leave(entered...)
}
