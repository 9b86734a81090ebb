package litequeue

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// Watching a job's progress (WatchProgress) and reading it (progressOf).

// progressOf fills info's Progress and Output from the store.
func (q *Queue) progressOf(ctx context.Context, info *JobInfo) error {
	jp, err := q.store.Progress(ctx, info.ID)
	if err != nil {
		return err
	}
	if jp.HasProgress {
		info.Progress = &Progress{Fraction: jp.Fraction, Message: jp.Message, UpdatedAt: time.Unix(0, jp.At)}
	}
	if jp.Output != nil {
		info.Output = json.RawMessage(jp.Output)
	}
	return nil
}

// WatchProgress returns a channel of job id's progress, to drive a progress
// bar. Reports made in this process arrive at once; reports of other
// processes are read from the job's row every Options.PollInterval of real
// time (DefaultPollInterval when polling is disabled). The channel holds the
// latest value only: a slow reader skips values, never the last. Values never
// go back: the row, which gets this process's reports coalesced and later,
// does not replace a newer report made here, and a watch opened while the
// job runs here starts from its latest report. Each value carries the job's
// State. The channel is closed when the job is finished
// (the last value then has State completed, dead or cancelled, when known), when it is
// gone (deleted on success, cancelled, purged), when ctx ends or when the
// queue is closed. It returns
// an error wrapping ErrNotFound, and no channel, if there is no job id.
func (q *Queue) WatchProgress(ctx context.Context, id int64) (<-chan Progress, error) {
	jp, err := q.store.Progress(ctx, id)
	if err != nil {
		return nil, wrapf("litequeue: watch progress: %w", err)
	}
	w := &watcher{ch: make(chan Progress, 1)}
	hub := q.progressHub()
	hub.add(id, w)
	// The row lags behind a report of this process not written yet: the
	// first value has the latest.
	w.offer(progressFromStore(jp, unixNanos(q.clock)))
	if w.isClosed() {
		hub.remove(id, w)
		return w.ch, nil
	}
	interval := q.opts.PollInterval
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	go func() {
		defer hub.remove(id, w)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				w.send(Progress{}, true)
				return
			case <-w.stop:
				return
			case <-t.C:
			}
			if q.isClosed() {
				w.send(Progress{}, true)
				return
			}
			jp, err := q.store.Progress(ctx, id)
			switch {
			case errors.Is(err, ErrNotFound):
				w.send(Progress{}, true)
				return
			case err != nil:
				continue
			}
			if p := w.offer(progressFromStore(jp, unixNanos(q.clock))); finished(p.State) {
				return
			}
		}
	}()
	return w.ch, nil
}

// closeWatchers closes every WatchProgress channel (the queue closes).
func (q *Queue) closeWatchers() {
	h := q.progressHub()
	h.mu.Lock()
	var ws []*watcher
	for _, list := range h.watchers {
		ws = append(ws, list...)
	}
	h.mu.Unlock()
	for _, w := range ws {
		w.send(Progress{}, true)
	}
}

func (q *Queue) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}

func progressFromStore(jp store.JobProgress, now int64) Progress {
	p := Progress{State: StateReady}
	switch jp.State {
	case store.Pending:
		if jp.VisibleAt > now {
			p.State = StateScheduled
		}
	case store.Running:
		p.State = StateRunning
	case store.Completed:
		p.State = StateCompleted
	case store.Dead:
		p.State = StateDead
	case store.Cancelled:
		p.State = StateCancelled
	case store.Waiting:
		p.State = StateWaiting
	}
	if jp.HasProgress {
		p.Fraction, p.Message, p.UpdatedAt = jp.Fraction, jp.Message, time.Unix(0, jp.At)
	}
	return p
}

func (c *core) progressHub() *hub {
	c.hubOnce.Do(func() { c.hub = &hub{watchers: map[int64][]*watcher{}, current: map[int64]Progress{}} })
	return c.hub
}
