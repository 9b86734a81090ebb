package litequeue

import (
	"context"
	"log/slog"
	"time"
)

// EventType names a state change of a job.
type EventType string

// The events a Queue reports through Options.OnEvent and its Logger.
const (
	EventEnqueued  EventType = "enqueued"  // a job was stored
	EventDuplicate EventType = "duplicate" // an enqueue found its key held by a live job
	EventStarted   EventType = "started"   // a handler began an attempt
	EventSucceeded EventType = "succeeded" // the success was committed
	EventRetrying  EventType = "retrying"  // an attempt failed; the job runs again after Delay
	EventDead      EventType = "dead"      // the job gave up and became a dead letter
	EventReleased  EventType = "released"  // shutdown returned a claimed job unrun-counted
	EventStale     EventType = "stale"     // a result was dropped: the lease had been lost
	EventRequeued  EventType = "requeued"  // a dead letter was put back to ready

	// EventConfigWarning reports, at Start, a queue whose configuration
	// does not match the handlers (Queue names it, Err says how); see
	// Options.StrictQueues.
	EventConfigWarning EventType = "config_warning"
)

// Decision values of Event.Decision and of attempt history records.
const (
	DecisionRetry     = "retry"     // the policy (or RetryAfter / Strategy) retries
	DecisionGiveUp    = "give_up"   // attempts used up, or a Strategy refused
	DecisionPermanent = "permanent" // the handler returned a Permanent error
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
	Decision string        // retrying and dead: one of the Decision* values
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
			attrs = append(attrs, slog.String(LogDecision, e.Decision))
		}
		if e.Duration != 0 {
			attrs = append(attrs, slog.Duration(LogDuration, e.Duration))
		}
		if e.Err != nil {
			attrs = append(attrs, slog.String(LogError, e.Err.Error()))
		}
		q.log.LogAttrs(context.Background(), level, "litequeue: job "+string(e.Type), attrs...)
	}
	q.recordHistory(e)
	if q.opts.OnEvent != nil {
		q.opts.OnEvent(e)
	}
}
