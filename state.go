package litequeue

import (
	"fmt"
	"strings"
)

// State is where a job is in its life, as reported by Jobs, Job and Stats.
type State string

// The states of a job.
const (
	StateReady     State = "ready"     // pending and due: a worker may claim it now
	StateScheduled State = "scheduled" // pending, due later (a delay, a run-at time or a retry's backoff)
	StateRunning   State = "running"   // claimed under a lease
	StateCompleted State = "completed" // succeeded, kept for Options.CompletedRetention
	StateDead      State = "dead"      // gave up: a dead letter
	StateCancelled State = "cancelled" // cancelled by Cancel: kept (listed by Jobs, counted by Stats) until PurgeCancelled deletes it, never run again
	StateWaiting   State = "waiting"   // a workflow's job waiting for its parents (workflow.go): never claimed until they finished as it needs
)

// States returns every State, in a new slice each call: ready to cancelled
// in life order, then StateWaiting (which a workflow's job holds before it
// is ready).
func States() []State {
	return []State{StateReady, StateScheduled, StateRunning, StateCompleted, StateDead, StateCancelled, StateWaiting}
}

// ParseState returns the State named s, or an error listing the valid names.
func ParseState(s string) (State, error) {
	for _, st := range States() {
		if string(st) == s {
			return st, nil
		}
	}
	all := States()
	names := make([]string, len(all))
	for i, st := range all {
		names[i] = string(st)
	}
	return "", fmt.Errorf("litequeue: unknown state %q; use one of %s", s, strings.Join(names, ", "))
}

func finished(s State) bool { return s == StateCompleted || s == StateDead || s == StateCancelled }
