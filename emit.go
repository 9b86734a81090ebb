package litequeue

import (
	"context"
	"log/slog"
)

// Emitting events: each state change is logged, told to the queue's
// listeners and handed to Options.OnEvent through the event pump (events.go).

// emit reports e: it logs it, tells the queue's listeners (its history) in
// the emitting goroutine, and hands it to Options.OnEvent.
func (c *core) emit(e Event) {
	if e.Time.IsZero() {
		e.Time = c.clock.Now()
	}
	level := slog.LevelDebug
	switch e.Type {
	case EventRetrying, EventStale:
		level = slog.LevelWarn
	case EventDead:
		level = slog.LevelError
	case EventSucceeded, EventReleased, EventRequeued:
		level = slog.LevelInfo
	}
	if c.log.Enabled(context.Background(), level) {
		attrs := []slog.Attr{
			slog.Int64(LogJobID, e.JobID),
			slog.String(LogQueue, e.Queue),
			slog.String(LogKind, e.Kind),
			slog.Int(LogAttempt, e.Attempt),
			slog.String(LogOutcome, string(e.Type)),
		}
		if e.Delay != 0 {
			attrs = append(attrs, slog.Duration(LogDelay, e.Delay))
		}
		if e.Decision != "" {
			attrs = append(attrs, slog.String(LogDecision, string(e.Decision)))
		}
		if e.Duration != 0 {
			attrs = append(attrs, slog.Duration(LogDuration, e.Duration))
		}
		if e.Err != nil {
			attrs = append(attrs, slog.String(LogError, e.Err.Error()))
		}
		c.log.LogAttrs(context.Background(), level, "litequeue: job "+string(e.Type), attrs...)
	}
	for _, l := range c.listeners {
		l(e)
	}
	c.deliver(e)
}

// deliver hands e to OnEvent's goroutine; when EventBuffer events already
// wait, e is dropped and counted (DroppedEvents) rather than blocking.
func (c *core) deliver(e Event) {
	p := c.events
	if p == nil {
		return
	}
	p.once.Do(func() { go p.run() })
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return // emitted after Close (a handler that outlived it): nobody listens
	}
	select {
	case p.ch <- pumped{e: e}:
	default:
		p.dropped.Add(1)
	}
}

// FlushEvents waits until every event emitted before it was called has
// been handed to Options.OnEvent (and OnEvent returned), or ctx ends; it
// returns ctx's error then. Tests call it before asserting that an event did
// not happen. Without OnEvent, or after Close, it returns nil at once.
func (q *Queue) FlushEvents(ctx context.Context) error {
	p := q.events
	if p == nil {
		return nil
	}
	p.once.Do(func() { go p.run() })
	ack := make(chan struct{})
	p.mu.RLock()
	if p.closed {
		p.mu.RUnlock()
		return nil
	}
	select {
	case p.ch <- pumped{ack: ack}:
		p.mu.RUnlock()
	case <-ctx.Done():
		p.mu.RUnlock()
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closeEvents delivers what is left and stops OnEvent's goroutine.
func (q *Queue) closeEvents() {
	p := q.events
	if p == nil {
		return
	}
	p.once.Do(func() { go p.run() })
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.ch)
	}
	p.mu.Unlock()
	<-p.done
}

// DroppedEvents reports how many events were not handed to Options.OnEvent
// because EventBuffer events already waited for it (see
// Options.EventBuffer).
func (q *Queue) DroppedEvents() uint64 {
	if q.events == nil {
		return 0
	}
	return q.events.dropped.Load()
}
