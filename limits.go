package litequeue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// Flow control: limits stored with a queue and honoured by every process on
// the database, inside each claim's transaction (docs/flow-control.md).

// QueueLimits are a queue's flow-control limits, the same for every process
// on the file or database. The zero value limits nothing; each zero field
// means no limit of its kind.
type QueueLimits struct {
	// Concurrency is the most jobs of the queue that run at once across all
	// processes (QueueConfig.Concurrency bounds one process's handlers).
	Concurrency int
	// KeyConcurrency is the most jobs of one group (EnqueueOptions.Group,
	// or the job type's Group method) that run at once across all
	// processes. Jobs without a group are not limited by it. A group at its
	// limit does not hold back the jobs of other groups.
	KeyConcurrency int
	// Ordered makes each group run one job at a time, in enqueue (id)
	// order: a job of the group waiting for its retry, or snoozed, holds
	// the later ones back; its dead letter or cancel releases them.
	Ordered bool
	// Rate limits the starts of the queue's jobs: never more than Rate.N
	// in any window of Rate.Per, across all processes. Jobs over it stay
	// pending, with no attempt used, and start as the window moves on (in
	// the Clock's time).
	Rate Rate
	// KeyRate limits the starts of each group's jobs the same way.
	KeyRate Rate
}

// Rate is at most N starts in any window of Per. The zero value is no
// limit; N <= 0 with Per set, or Per under a millisecond with N set, is
// ErrInvalidLimits.
type Rate struct {
	N   int
	Per time.Duration
}

// MinRatePer is the shortest Rate.Per.
const MinRatePer = time.Millisecond

// ErrInvalidLimits: QueueLimits that cannot be honoured (a negative limit,
// a Rate with N but no Per or Per but no N, a Per under MinRatePer). The
// error says which field and what to use; nothing was written.
var ErrInvalidLimits = errors.New("litequeue: invalid queue limits")

// validate checks l for queue.
func (l QueueLimits) validate(queue string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: queue %q: %s", ErrInvalidLimits, queue, fmt.Sprintf(format, args...))
	}
	if l.Concurrency < 0 {
		return bad("Concurrency is %d; use 0 for no limit or a positive number", l.Concurrency)
	}
	if l.KeyConcurrency < 0 {
		return bad("KeyConcurrency is %d; use 0 for no limit or a positive number", l.KeyConcurrency)
	}
	for _, r := range []struct {
		name string
		r    Rate
	}{{"Rate", l.Rate}, {"KeyRate", l.KeyRate}} {
		switch {
		case r.r == Rate{}:
		case r.r.N <= 0:
			return bad("%s.N is %d with Per %s; use a positive N, or the zero Rate for no limit", r.name, r.r.N, r.r.Per)
		case r.r.Per < MinRatePer:
			return bad("%s.Per is %s; use at least %s", r.name, r.r.Per, MinRatePer)
		}
	}
	return nil
}

func (l QueueLimits) stored() store.Limits {
	return store.Limits{Concurrency: l.Concurrency, KeyConcurrency: l.KeyConcurrency, Ordered: l.Ordered,
		RateN: l.Rate.N, RatePer: int64(l.Rate.Per), KeyRateN: l.KeyRate.N, KeyRatePer: int64(l.KeyRate.Per)}
}

func limitsOf(s store.Limits) QueueLimits {
	return QueueLimits{Concurrency: s.Concurrency, KeyConcurrency: s.KeyConcurrency, Ordered: s.Ordered,
		Rate: Rate{N: s.RateN, Per: time.Duration(s.RatePer)}, KeyRate: Rate{N: s.KeyRateN, Per: time.Duration(s.KeyRatePer)}}
}

// grouper is the job type's group for the per-group limits.
type grouper interface{ Group() string }

// prepareGroup sets nj's group from o or the job type.
func prepareGroup(job Job, o *EnqueueOptions, nj *store.NewJob) error {
	g := o.Group
	if g == "" {
		if gr, ok := job.(grouper); ok {
			g = gr.Group()
		}
	}
	if g == "" {
		return nil
	}
	if err := validName("group", g); err != nil {
		return err
	}
	nj.Group = g
	return nil
}

// SetLimits stores queue's limits, for every process on the database, and
// returns nil once they are stored: claims that commit after it honour
// them. Processes running the queue notice within Options.PollInterval
// (this one at once). Jobs of the queue running when limits are first set
// count against them. QueueLimits{} removes every limit. Invalid limits are
// ErrInvalidLimits and an invalid queue name ErrInvalidJob, with nothing
// written; ErrClosed and ErrReadOnly as for every write.
func (q *Queue) SetLimits(ctx context.Context, queue string, l QueueLimits) error {
	if err := q.writable(); err != nil {
		return err
	}
	if err := validName("queue", queue); err != nil {
		return wrapf("litequeue: set limits: %w", err)
	}
	if err := l.validate(queue); err != nil {
		return err
	}
	if _, err := q.store.SetLimits(ctx, queue, l.stored()); err != nil {
		return wrapf("litequeue: set limits of queue %q: %w", queue, err)
	}
	if p := q.localPool(queue); p != nil {
		p.limited.Store(l.stored().Any())
		p.signal()
	}
	return nil
}

// Limits returns the stored limits of every queue that has any.
func (q *Queue) Limits(ctx context.Context) (map[string]QueueLimits, error) {
	ls, err := q.store.Limits(ctx)
	if err != nil {
		return nil, wrapf("litequeue: read limits: %w", err)
	}
	out := make(map[string]QueueLimits, len(ls))
	for name, l := range ls {
		out[name] = limitsOf(l)
	}
	return out, nil
}

// storeConfiguredLimits writes the limits of the queues whose QueueConfig
// sets any (a configuration without limits leaves the stored ones alone),
// logging a warning when another process stored different ones: the last
// writer wins.
func (q *Queue) storeConfiguredLimits() error {
	if q.readOnly {
		return nil
	}
	for _, qc := range q.opts.Queues {
		l := qc.Limits.stored()
		if !l.Any() {
			continue
		}
		prev, err := q.store.SetLimits(context.Background(), qc.Name, l)
		if err != nil {
			return wrapf("litequeue: store the limits of queue %q: %w", qc.Name, err)
		}
		if prev.Any() && prev != l {
			q.log.Warn("litequeue: queue limits differ from those stored by another process; this process's replace them",
				LogQueue, qc.Name, "stored", fmt.Sprintf("%+v", limitsOf(prev)), "configured", fmt.Sprintf("%+v", qc.Limits))
		}
	}
	return nil
}

// initLimits reads which of r's queues have limits, at Start.
func (r *runState) initLimits(ctx context.Context) error {
	ls, err := r.q.store.Limits(ctx)
	if err != nil {
		return err
	}
	for name, p := range r.pools {
		_, ok := ls[name]
		p.limited.Store(ok)
	}
	return nil
}

// recheckLimits re-reads whether p's queue has limits, after another
// process's write.
func (p *pool) recheckLimits(ctx context.Context) {
	ls, err := p.q.store.Limits(ctx)
	if err != nil {
		p.q.log.Error("litequeue: reading queue limits", LogQueue, p.cfg.Name, LogError, err.Error())
		return
	}
	_, ok := ls[p.cfg.Name]
	p.limited.Store(ok)
}

// limitedDue is the dispatcher's next alarm after a limited claim that took
// fewer jobs than it asked for: the next due time when it is still to come,
// else (due jobs held back by the limits) the next time after now when a
// job comes due or a counted lease ends (a slot frees by itself if its
// worker is gone). Slots freed by jobs that end wake the dispatcher by
// their writes.
//
// The times are taken after the claim's own time, not the Clock's now: a
// Clock moved on during the claim makes the alarm fire at once, and the
// next claim sees the new time.
func (p *pool) limitedDue(due time.Time, ok bool) (time.Time, bool) {
	now := time.Unix(0, p.claimedAt.Load())
	if ok && due.After(now) {
		return due, true
	}
	free, fok, err := p.q.store.LimitsNextFree(context.Background(), p.cfg.Name, p.kindList, now.UnixNano())
	if err != nil {
		p.q.log.Error("litequeue: next free slot", LogQueue, p.cfg.Name, LogError, err.Error())
		return now.Add(time.Second), true
	}
	if !fok {
		return time.Time{}, false
	}
	return time.Unix(0, free), true
}

// withLimits stores q's configured limits (storeConfiguredLimits) and
// returns q, or closes it and returns the error.
func withLimits(q *Queue) (*Queue, error) {
	if err := q.storeConfiguredLimits(); err != nil {
		q.Close()
		return nil, err
	}
	return q, nil
}
