package litequeue

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// EventType names a state change of a job.
type EventType string

// The events a Queue reports through Options.OnEvent and its Logger.
const (
	EventEnqueued  EventType = "enqueued"  // a job was stored (EnqueueTx: its transaction was seen committed)
	EventDuplicate EventType = "duplicate" // an enqueue found its key held by a live job
	EventStarted   EventType = "started"   // a handler began an attempt
	EventSucceeded EventType = "succeeded" // the success was committed
	EventRetrying  EventType = "retrying"  // an attempt failed; the job runs again after Delay
	EventDead      EventType = "dead"      // the job gave up and became a dead letter
	EventReleased  EventType = "released"  // shutdown (or a pause) returned a claimed job, its attempt given back
	EventStale     EventType = "stale"     // a result was dropped: the lease had been lost before it
	EventRequeued  EventType = "requeued"  // a dead letter was put back to ready

	// EventConfigWarning reports, at Start, a queue whose configuration
	// does not match the handlers (Queue names it, Err says how); see
	// Options.StrictQueues.
	EventConfigWarning EventType = "config_warning"
)

// Decision is what the queue decided after a failed attempt, in
// Event.Decision and in attempt history records.
type Decision string

// The decisions after a failed attempt.
const (
	DecisionRetry     Decision = "retry"     // the policy (or RetryAfter / Strategy) retries
	DecisionGiveUp    Decision = "give_up"   // attempts used up, or a Strategy refused
	DecisionPermanent Decision = "permanent" // the handler returned a Permanent error
)

// Event is one state change of a job, as passed to Options.OnEvent.
type Event struct {
	Type     EventType
	Time     time.Time // from the queue's Clock
	JobID    int64
	Queue    string
	Kind     string
	Attempt  int           // the attempt concerned; 0 for enqueue events
	Delay    time.Duration // retrying: the chosen wait; enqueued: the initial delay
	Decision Decision      // retrying and dead: one of the Decision* values
	Err      error         // the failure, for retrying, dead and stale
	Duration time.Duration // succeeded, retrying, dead: how long the attempt ran
}

// Log attribute keys, constant so that log queries can rely on them.
const (
	LogJobID    = "job_id"
	LogQueue    = "queue"
	LogKind     = "kind"
	LogAttempt  = "attempt"
	LogDelay    = "delay"
	LogDecision = "decision"
	LogOutcome  = "outcome"
	LogError    = "error"
	LogDuration = "duration"
)

// emit reports e: it logs it, tells the queue's listeners (its history) in
// the emitting goroutine, and hands it to Options.OnEvent.
func (q *Queue) emit(e Event) {
	if e.Time.IsZero() {
		e.Time = q.clock.Now()
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
	if q.log.Enabled(context.Background(), level) {
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
		q.log.LogAttrs(context.Background(), level, "litequeue: job "+string(e.Type), attrs...)
	}
	for _, l := range q.listeners {
		l(e)
	}
	q.deliver(e)
}

// DefaultEventBuffer is the default of Options.EventBuffer.
const DefaultEventBuffer = 4096

// eventPump calls Options.OnEvent on a goroutine of its own, in the order
// the queue emitted the events, so that a slow hook never stalls the
// queue's writer or its workers.
type eventPump struct {
	fn      func(Event)
	ch      chan pumped
	dropped atomic.Uint64
	once    sync.Once
	done    chan struct{}
	log     *slog.Logger

	mu     sync.RWMutex // held for writing only to close ch
	closed bool
}

// pumped is an event to deliver, or (ack set) a flush marker.
type pumped struct {
	e   Event
	ack chan struct{}
}

func newEventPump(fn func(Event), size int, log *slog.Logger) *eventPump {
	return &eventPump{fn: fn, ch: make(chan pumped, size), done: make(chan struct{}), log: log}
}

func (p *eventPump) run() {
	defer close(p.done)
	var reported uint64
	for it := range p.ch {
		if it.ack != nil {
			close(it.ack)
			continue
		}
		if d := p.dropped.Load(); d != reported {
			p.log.Warn("litequeue: events dropped: Options.OnEvent is slower than the queue; raise Options.EventBuffer or make the hook faster",
				"dropped", d-reported)
			reported = d
		}
		p.fn(it.e)
	}
}

// deliver hands e to OnEvent's goroutine; when EventBuffer events already
// wait, e is dropped and counted (DroppedEvents) rather than blocking.
func (q *Queue) deliver(e Event) {
	p := q.events
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
