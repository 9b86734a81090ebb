package litequeue

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// Live control: pausing a queue, cancelling a job while it runs, and
// snoozing a job without using an attempt.

// StateCancelled is the state of a cancelled job: kept (listed by Jobs,
// counted by Stats) until PurgeCancelled deletes it, never run again.
const StateCancelled State = "cancelled"

// ErrJobCancelled is the cause with which a running handler's context is
// cancelled when its job is cancelled (by Cancel here or in another
// process, or by lqinspect cancel): errors.Is(context.Cause(ctx),
// ErrJobCancelled) tells it from a shutdown, a timeout or a lost lease.
var ErrJobCancelled = errors.New("litequeue: job cancelled")

// Events of live control.
const (
	EventCancelled EventType = "cancelled" // a job was cancelled: by this process's Cancel, or its handler here was stopped
	EventSnoozed   EventType = "snoozed"   // a handler snoozed its job: it runs again after Delay, the attempt given back
	EventPaused    EventType = "paused"    // Pause paused Queue (reported by the process that paused it)
	EventResumed   EventType = "resumed"   // Resume resumed Queue (reported by the process that resumed it)
)

// DecisionSnooze is the Decision of an attempt history record written by a
// snooze.
const DecisionSnooze Decision = "snooze"

// DefaultMaxSnoozes is QueueConfig.MaxSnoozes' default.
const DefaultMaxSnoozes = 100

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
	changed, err := q.store.Resume(ctx, queue)
	if err != nil {
		return wrapf("litequeue: resume queue %q: %w", queue, err)
	}
	if changed { // before the pool starts anything: events keep their order
		q.emit(Event{Type: EventResumed, Queue: queue})
	}
	if p := q.localPool(queue); p != nil {
		p.paused.Store(false)
		p.signal()
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
// cancelled job's idempotency key is free again at once.
//
// Cancel is all or nothing: if any id is unknown (ErrNotFound) or names a
// job that is completed, dead or cancelled already (ErrWrongState), nothing
// is cancelled and the error names the id. Repeating an id counts it once.
func (q *Queue) Cancel(ctx context.Context, ids ...int64) (int, error) {
	if err := q.writable(); err != nil {
		return 0, err
	}
	cs, err := q.store.Cancel(ctx, ids, unixNanos(q.clock))
	if err != nil {
		return 0, wrapf("litequeue: %w", err)
	}
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

// watchWake is the store's wake-up for other processes' writes: every pool
// re-reads its pause and looks for cancelled jobs among those it runs,
// then claims.
func (r *runState) watchWake() {
	r.q.wakeTx()
	for _, p := range r.pools {
		p.recheck.Store(true)
		p.signal()
	}
}

// holdForControl is the dispatcher's check before a claim: after another
// process's write it re-reads the queue's pause and stops handlers whose
// jobs were cancelled. It reports true while the queue is paused, having
// released the jobs claimed but not yet started.
func (p *pool) holdForControl() bool {
	recheck := p.recheck.Swap(false)
	if recheck || p.paused.Load() {
		// While paused, every wake-up re-reads the pause: another process
		// may have resumed the queue with this one's polling off.
		ctx := context.Background()
		if paused, err := p.q.store.Paused(ctx); err != nil {
			p.q.log.Error("litequeue: reading paused queues", LogQueue, p.cfg.Name, LogError, err.Error())
		} else {
			_, ok := paused[p.cfg.Name]
			p.paused.Store(ok)
		}
	}
	if recheck {
		ctx := context.Background()
		if ds := p.claimed(); len(ds) > 0 {
			idx, err := p.q.store.WhichCancelled(ctx, leasesOf(ds))
			if err != nil {
				p.q.log.Error("litequeue: looking for cancelled jobs", LogQueue, p.cfg.Name, LogError, err.Error())
			}
			for _, i := range idx {
				p.stopCancelled(ds[i])
			}
		}
	}
	if !p.paused.Load() {
		return false
	}
	p.releaseQueued()
	return true
}

// initPaused reads which of r's queues are paused, at Start.
func (r *runState) initPaused(ctx context.Context) error {
	paused, err := r.q.store.Paused(ctx)
	if err != nil {
		return err
	}
	for name, p := range r.pools {
		_, ok := paused[name]
		p.paused.Store(ok)
	}
	return nil
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

// addPaused marks the paused queues in stats, adding those without jobs,
// sorted by queue name.
func (q *Queue) addPaused(ctx context.Context, stats []QueueStats) ([]QueueStats, error) {
	paused, err := q.store.Paused(ctx)
	if err != nil {
		return nil, wrapf("litequeue: stats: %w", err)
	}
	seen := map[string]bool{}
	for i := range stats {
		if at, ok := paused[stats[i].Queue]; ok {
			stats[i].Paused, stats[i].PausedAt = true, time.Unix(0, at)
		}
		seen[stats[i].Queue] = true
	}
	added := false
	for name, at := range paused {
		if !seen[name] {
			stats = append(stats, QueueStats{Queue: name, Paused: true, PausedAt: time.Unix(0, at)})
			added = true
		}
	}
	if added {
		sort.Slice(stats, func(i, j int) bool { return stats[i].Queue < stats[j].Queue })
	}
	return stats, nil
}

// SnoozeError asks for the job to run again after Delay without using an
// attempt. Make one with Snooze.
type SnoozeError struct {
	Delay time.Duration
}

func (e *SnoozeError) Error() string { return fmt.Sprintf("snoozed for %s", e.Delay) }

// Snooze returns the error a handler returns to put its job off for d
// without using an attempt: the job becomes scheduled, due after d, and its
// next run has the same Attempt number. Use it when the job is not ready
// to run yet — a resource it waits for, polling an outside state — and
// RetryAfter (which counts an attempt) when the attempt failed.
//
// A job may snooze QueueConfig.MaxSnoozes times (DefaultMaxSnoozes by
// default); the snooze after that counts as a failed attempt with a
// *SnoozeLimitError, and the policy retries it or gives up as with any
// failure. d of 0 runs the job again as soon as a worker is free. A
// negative d is a bug in the handler: the attempt fails (counted, so the
// retry policy applies) with an error wrapping ErrNegativeSnooze.
func Snooze(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: Snooze(%s); use 0 to run again at once", ErrNegativeSnooze, d)
	}
	return &SnoozeError{Delay: d}
}

// ErrNegativeSnooze is the failure of a handler that returned Snooze with a
// negative duration.
var ErrNegativeSnooze = errors.New("litequeue: snooze duration is negative")

// SnoozeLimitError is the failure recorded when a job snoozes more often
// than QueueConfig.MaxSnoozes allows.
type SnoozeLimitError struct {
	Max   int           // the queue's MaxSnoozes
	Delay time.Duration // the refused snooze's delay
}

func (e *SnoozeLimitError) Error() string {
	return fmt.Sprintf("litequeue: the job snoozed %d times, the most QueueConfig.MaxSnoozes allows; this snooze (for %s) counts as a failed attempt", e.Max, e.Delay)
}
