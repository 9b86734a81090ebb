package litequeue

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// scheduler enqueues the occurrences of the stored schedules while the
// queue runs. Every started process runs one; they need no leader: each
// firing is conditional on the schedule being as planned (see
// scheduleStore.FireSchedule), so of processes racing on one occurrence one
// enqueues it and the others find it done.
//
// It sleeps on one alarm of the queue's Clock, set for the earliest next
// occurrence (no ticker: a mock clock advanced across a week fires it once
// per occurrence), and is woken by changes to schedules made here and, via
// the queue's data_version poll, by other processes.
type scheduler struct {
	q *core
	// Of the run the scheduler belongs to: its goroutines (Stop waits for
	// them), closed when Stop begins, and the wake-up of a queue's pool.
	bg        *sync.WaitGroup
	stopping  <-chan struct{}
	wakeQueue func(queue string)
	wakeCh    chan struct{}
	alarm     *alarm
	wakes     atomic.Uint64 // calls of wake, for tests to tell which rounds saw which changes
	// events are the events of the round under way, emitted once its
	// alarm is set (the alarm's contract: a test that waits for an event
	// and then advances a mock clock must find the alarm set); wakeQueues
	// are the queues that got jobs, woken after the events (so a job's
	// EventEnqueued comes before its EventStarted).
	events     []Event
	wakeQueues []string
	// gated are the jobs of the round's firings, for which the enqueue
	// gate is open until their events are emitted: a worker that claims
	// one meanwhile waits to report it started (enqueue_order.go).
	gated []store.NewJob
}

// newScheduler makes the scheduler of a run: bg counts its goroutines,
// stopping is closed when the run's Stop begins, wakeQueue wakes a queue's
// pool. start starts it.
func newScheduler(c *core, bg *sync.WaitGroup, stopping <-chan struct{}, wakeQueue func(queue string)) *scheduler {
	return &scheduler{q: c, bg: bg, stopping: stopping, wakeQueue: wakeQueue,
		wakeCh: make(chan struct{}, 1), alarm: newAlarm(c.clock)}
}

// start runs the scheduler until its run stops; Stop waits for it with the
// dispatchers.
func (s *scheduler) start() {
	s.bg.Add(1)
	go s.loop()
}

// wake makes the scheduler reload the schedules now. Safe on nil.
func (s *scheduler) wake() {
	if s == nil {
		return
	}
	s.wakes.Add(1)
	select {
	case s.wakeCh <- struct{}{}:
	default:
	}
}

// scheduleRetry is how long the scheduler waits, on the Clock, after a
// round failed (the database stayed locked, the disk is full).
const scheduleRetry = 5 * time.Second

func (s *scheduler) loop() {
	defer s.bg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		wakes := s.wakes.Load()
		now := s.q.clock.Now()
		next, err := s.round(ctx, now)
		if ctx.Err() != nil {
			s.alarm.stop()
			s.emitEvents()
			return
		}
		if err != nil {
			s.q.log.Error("litequeue: scheduler", LogError, err.Error())
			next = now.Add(scheduleRetry)
		}
		if next.IsZero() {
			s.alarm.stop()
		} else {
			s.alarm.set(next, false)
		}
		s.emitEvents()
		if h := s.q.scheduleRound.Load(); h != nil {
			(*h)(now, next, wakes)
		}
		select {
		case <-s.stopping:
			s.alarm.stop()
			return
		case <-s.alarm.C:
		case <-s.wakeCh:
		}
	}
}

// round fires every due schedule at now and returns the earliest moment
// something is due next (zero: nothing).
func (s *scheduler) round(ctx context.Context, now time.Time) (time.Time, error) {
	st := s.q.store
	var earliest time.Time
	soonest := func(t time.Time) {
		if !t.IsZero() && (earliest.IsZero() || t.Before(earliest)) {
			earliest = t
		}
	}
	var firstErr error
	for attempt := 0; ; attempt++ {
		list, err := st.Schedules(ctx, "")
		if err != nil {
			return time.Time{}, err
		}
		stale := false
		earliest = time.Time{}
		for i := range list {
			ss := &list[i]
			if ss.Paused {
				continue
			}
			if at := time.Unix(0, ss.NextAt); at.After(now) {
				soonest(at)
				continue
			}
			t, err := scheduleTiming(ss)
			if err != nil {
				s.q.log.Error("litequeue: schedule has an unreadable definition; remove or register it again", LogSchedule, ss.Name, LogError, err.Error())
				continue
			}
			f, err := plan(ss, t, now)
			if err != nil {
				s.q.log.Error("litequeue: schedule has an unreadable definition; remove or register it again", LogSchedule, ss.Name, LogError, err.Error())
				continue
			}
			s.q.gate.enter(f.Jobs...)
			res, err := st.FireSchedule(ctx, f)
			if err != nil || res.Stale || res.Held {
				s.q.gate.leave(f.Jobs...)
			} else {
				s.gated = append(s.gated, f.Jobs...)
			}
			switch {
			case err != nil:
				if firstErr == nil {
					firstErr = wrapf("schedule %q: %w", ss.Name, err)
				}
				soonest(now.Add(scheduleRetry))
			case res.Stale:
				stale = true
			case res.Held:
				soonest(now.Add(waitCheck(now.Sub(time.Unix(0, ss.NextAt)))))
			default:
				s.report(ss, &f, res)
				soonest(time.Unix(0, f.NewNext))
			}
		}
		if !stale {
			return earliest, firstErr
		}
		if attempt == 3 {
			// Another process keeps changing schedules: look again soon.
			soonest(now.Add(ScheduleWaitCheck))
			return earliest, firstErr
		}
	}
}

// emitEvents emits the events the round kept, closes the enqueue gate for
// the round's jobs, then wakes the queues that got jobs.
func (s *scheduler) emitEvents() {
	for _, ev := range s.events {
		s.q.emit(ev)
	}
	s.q.gate.leave(s.gated...)
	s.gated = s.gated[:0]
	for _, name := range s.wakeQueues {
		s.wakeQueue(name)
	}
	s.events, s.wakeQueues = s.events[:0], s.wakeQueues[:0]
}

// report logs a firing, wakes the queue's dispatchers for its jobs and
// keeps its events for the end of the round.
func (s *scheduler) report(ss *store.Schedule, f *store.Firing, res store.FireResult) {
	q := s.q
	if f.Skipped > 0 {
		q.log.Warn("litequeue: schedule skipped missed occurrences", LogSchedule, ss.Name,
			"count", f.Skipped, "first", time.Unix(0, f.SkipFirst), "last", time.Unix(0, f.SkipLast),
			"missed_policy", describeMissed(MissedPolicy(ss.Missed), ss.CatchUp))
	}
	if res.Ended {
		q.log.Info("litequeue: schedule ended: no occurrence is left", LogSchedule, ss.Name, "runs", ss.RunCount+int64(len(res.IDs)))
	}
	if res.OverlapHit {
		q.log.Info("litequeue: schedule skipped an occurrence: its previous job is still pending or running",
			LogSchedule, ss.Name, "count", len(f.Jobs))
		return
	}
	for i, id := range res.IDs {
		if i < len(res.Dups) && res.Dups[i] != nil {
			// As Enqueue reports a unique job's twin.
			q.log.Info("litequeue: schedule occurrence is a duplicate of a unique job; nothing enqueued", LogSchedule, ss.Name,
				"occurrence", time.Unix(0, f.Jobs[i].VisibleAt), LogJobID, id)
			s.events = append(s.events, Event{Type: EventDuplicate, JobID: id, Queue: ss.Queue, Kind: ss.Kind, Err: res.Dups[i]})
			continue
		}
		if !res.New[i] {
			continue
		}
		q.log.Info("litequeue: schedule enqueued", LogSchedule, ss.Name, "occurrence", time.Unix(0, f.Jobs[i].VisibleAt), LogJobID, id)
		if u := f.Jobs[i].Unique; u != nil && u.Replaced != 0 {
			s.events = append(s.events, Event{Type: EventReplaced, JobID: u.Replaced, Queue: ss.Queue, Kind: ss.Kind})
		}
		s.events = append(s.events, Event{Type: EventEnqueued, JobID: id, Queue: ss.Queue, Kind: ss.Kind})
	}
	if len(res.IDs) > 0 && !slices.Contains(s.wakeQueues, ss.Queue) {
		s.wakeQueues = append(s.wakeQueues, ss.Queue)
	}
}

// waitCheck is when an occurrence held for waited so far looks again
// whether the previous job finished: after half that time, from one second
// up to ScheduleWaitCheck.
func waitCheck(waited time.Duration) time.Duration {
	return min(max(waited/2, time.Second), ScheduleWaitCheck)
}

// scheduleKeep is how many of the latest due occurrences a plan looks at
// one by one; older ones are only counted (and skipped as missed).
const scheduleKeep = 2*MaxCatchUp + 1

// plan decides, at now, what to do with the schedule's due occurrences
// (those from NextAt up to now). Occurrences at most Grace old are on time
// and all enqueued; older ones were missed and go by the Missed policy.
// Each job carries the schedule's uniqueness; an error says the stored
// uniqueness is unreadable.
func plan(s *store.Schedule, t *timing, now time.Time) (store.Firing, error) {
	first := time.Unix(0, s.NextAt)
	latest, dropped, d0, d1, next := t.dueSlots(first, now, scheduleKeep)
	latest, room := bound(s, latest)
	grace := time.Duration(s.Grace)
	if grace <= 0 {
		grace = DefaultScheduleGrace
	}
	late := func(at time.Time) bool {
		// An occurrence held by OverlapWait was on time when it came; the
		// immediate first run of a schedule that has not run is never
		// missed.
		return now.Sub(at) > grace && !(s.Waiting && at.Equal(first)) &&
			!(s.RunFirst && s.LastAt == 0 && s.RunCount == 0 && at.Equal(first))
	}
	var missed, fire []time.Time
	for _, at := range latest {
		if late(at) {
			missed = append(missed, at)
		} else {
			fire = append(fire, at)
		}
	}
	var fireLate []time.Time
	switch MissedPolicy(s.Missed) {
	case MissedRunOnce:
		if len(fire) == 0 && len(missed) > 0 {
			fireLate = missed[len(missed)-1:]
			missed = missed[:len(missed)-1]
		}
	case MissedCatchUp:
		n := min(s.CatchUp, len(missed))
		fireLate = missed[len(missed)-n:]
		missed = missed[:len(missed)-n]
	}
	f := store.Firing{Name: s.Name, Revision: s.Revision, NextAt: s.NextAt, Now: now.UnixNano(), Overlap: s.Overlap,
		MaxRuns: s.MaxRuns, RunCount: s.RunCount}
	if next.IsZero() || ended(s, next.UnixNano()) {
		f.NewNext = store.NeverAt
		if s.EndAt != 0 && !next.IsZero() && next.UnixNano() > s.EndAt {
			f.EndDetail = "end date passed: " + time.Unix(0, s.EndAt).In(t.loc).Format(time.RFC3339)
		}
	} else {
		f.NewNext = next.UnixNano()
	}
	if room >= 0 {
		// The first occurrences the run limit leaves room for.
		fireLate = fireLate[:min(room, len(fireLate))]
		fire = fire[:min(room-len(fireLate), len(fire))]
	}
	f.Skipped = dropped + int64(len(missed))
	if f.Skipped > 0 {
		first, last := d0, d1
		if dropped == 0 {
			first = missed[0]
		}
		if len(missed) > 0 {
			last = missed[len(missed)-1]
		}
		f.SkipFirst, f.SkipLast = first.UnixNano(), last.UnixNano()
		f.SkipDetail = fmt.Sprintf("missed: %d occurrences from %s to %s were more than %s late (no process ran the schedule); missed policy %s",
			f.Skipped, first.In(t.loc).Format(time.RFC3339), last.In(t.loc).Format(time.RFC3339), grace, describeMissed(MissedPolicy(s.Missed), s.CatchUp))
	}
	var uerr error
	add := func(at time.Time, isLate bool) {
		nj := store.NewJob{Queue: s.Queue, Kind: s.Kind, Priority: s.Priority,
			VisibleAt: at.UnixNano(), CreatedAt: now.UnixNano(), Payload: s.Payload, Key: occurrenceKey(s.Name, at)}
		if _, err := scheduleUnique(s, &nj); err != nil && uerr == nil {
			uerr = err
		}
		if err := occurrenceMeta(&nj, nj.VisibleAt); err != nil && uerr == nil {
			uerr = err
		}
		f.Jobs = append(f.Jobs, nj)
		f.Late = append(f.Late, isLate)
	}
	for _, at := range fireLate {
		add(at, true)
	}
	for _, at := range fire {
		add(at, false)
	}
	return f, uerr
}
