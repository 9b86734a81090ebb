package litequeue

// EventTypes returns every EventType a Queue reports through
// Options.OnEvent, in a fixed order (a new slice each call), so that a
// metrics adapter can describe exactly the events it may see. A test keeps
// it equal to the package's EventType constants.
func EventTypes() []EventType {
	return []EventType{
		EventEnqueued, EventDuplicate, EventReplaced, EventStarted, EventProgress, EventSucceeded,
		EventRetrying, EventSnoozed, EventDead, EventReleased, EventStale, EventRequeued,
		EventCancelled, EventPaused, EventResumed, EventConfigWarning,
	}
}
