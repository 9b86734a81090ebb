package litequeuetest

import (
	"context"
	"fmt"
	"time"

	"github.com/litequeue/litequeue"
)

// Schedules under the kit: Drain and Advance move the clock to each
// occurrence of a schedule on the way, as time passes for a running
// process, so no occurrence is jumped over and counted as missed.

// nextOccurrence returns the earliest next run, after the clock's time, of
// a schedule that is neither paused nor waiting for its previous job; ok
// is false when there is none.
func (k *Kit) nextOccurrence(ctx context.Context) (next time.Time, ok bool, err error) {
	ss, err := k.Queue.Schedules(ctx)
	if err != nil {
		return time.Time{}, false, err
	}
	now := k.Clock.Now()
	for _, s := range ss {
		if s.Paused || s.Waiting || !s.NextRun.After(now) {
			continue
		}
		if !ok || s.NextRun.Before(next) {
			next, ok = s.NextRun, true
		}
	}
	return next, ok, nil
}

// dueSchedules returns the names of the schedules with an occurrence due
// at the clock's time that the scheduler has not handled yet.
func (k *Kit) dueSchedules(ctx context.Context) ([]string, error) {
	ss, err := k.Queue.Schedules(ctx)
	if err != nil {
		return nil, err
	}
	now := k.Clock.Now()
	var due []string
	for _, s := range ss {
		if !s.Paused && !s.Waiting && !s.NextRun.After(now) {
			due = append(due, s.Name)
		}
	}
	return due, nil
}

// settleSchedules waits until the scheduler has handled every occurrence
// due at the clock's time (it enqueues them on its own goroutine), then
// until no handled job is ready or running, and returns the queue's load.
func (k *Kit) settleSchedules(ctx context.Context) error {
	deadline := time.Now().Add(k.timeout())
	for {
		due, err := k.dueSchedules(ctx)
		if err != nil || len(due) == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: schedules %v stayed due at %s for %s of real time without being enqueued", ErrStuck, due, k.Clock.Now().Format(time.RFC3339), k.timeout())
		}
		_, changed := k.progress()
		t := time.NewTimer(time.Millisecond)
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
	}
}

// Advance moves the clock forward by d as time passes for a running
// process: to each next due time of a handled job and each next occurrence
// of a schedule on the way, running what is due at each (so a day of a
// schedule every minute enqueues and runs its 1,440 occurrences, none
// missed), and at last to the clock's time plus d. It returns once nothing
// handled is ready or running. Unlike Drain it leaves jobs due after that
// time for later. It starts the queue if the kit has not.
//
// A bare Kit.Clock.Add(d) jumps over the occurrences instead: the
// scheduler then treats them as missed while the process was down (the
// schedule's Missed policy: by default the latest runs once and the rest
// are counted in ScheduleInfo.MissedCount). Advance is bounded as Drain
// is (ErrLimit, ErrStuck). A negative d is an error.
func (k *Kit) Advance(ctx context.Context, d time.Duration) (DrainResult, error) {
	if d < 0 {
		return DrainResult{}, fmt.Errorf("litequeuetest: Advance by a negative duration %s", d)
	}
	m := k.mark()
	if err := k.start(); err != nil {
		return DrainResult{}, err
	}
	end := k.Clock.Now().Add(d)
	for {
		unhandled, next, ok, err := k.step(ctx, m)
		if err != nil {
			return k.result(m, unhandled), err
		}
		if !ok || next.After(end) {
			if k.Clock.Now().Before(end) {
				k.Clock.Set(end.In(k.Clock.Now().Location()))
				continue
			}
			return k.result(m, unhandled), nil
		}
		k.Clock.Set(next.In(k.Clock.Now().Location()))
	}
}

// step lets the scheduler enqueue what is due, runs every due handled job,
// checks the attempt bound of the run that began at m, and returns the
// next time anything is due: a handled job's or a schedule's occurrence.
func (k *Kit) step(ctx context.Context, m mark) (unhandled int, next time.Time, ok bool, err error) {
	if err := k.settleSchedules(ctx); err != nil {
		return 0, time.Time{}, false, err
	}
	l, err := k.quiet(ctx)
	if err != nil {
		return l.Unhandled, time.Time{}, false, err
	}
	if n := k.countSince(m.events, litequeue.EventStarted); n >= k.maxAttempts() {
		return l.Unhandled, time.Time{}, false, fmt.Errorf("%w: %d handler calls started (Kit.MaxAttempts)", ErrLimit, n)
	}
	occ, hasOcc, err := k.nextOccurrence(ctx)
	if err != nil {
		return l.Unhandled, time.Time{}, false, err
	}
	next, ok = l.Next, l.HasNext
	if hasOcc && (!ok || occ.Before(next)) {
		next, ok = occ, true
	}
	return l.Unhandled, next, ok, nil
}
