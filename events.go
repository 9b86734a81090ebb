package litequeue

import (
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

// EventProgress reports that a job's progress (and, at the end of an
// attempt, its output) was written to the database. Reports coalesced into
// a later write have no event of their own.
const EventProgress EventType = "progress"

// EventReplaced reports a pending job deleted by the enqueue of its unique
// twin with ConflictReplace. JobID is the deleted job; the EventEnqueued
// that follows names its successor.
const EventReplaced EventType = "replaced"
