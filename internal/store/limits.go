package store

import (
	"context"
	"math"
	"slices"
)

// Flow control: limits stored with a queue (docs/flow-control.md) and
// honoured by every claim of every process, inside the claim's
// transaction.

// Limits are one queue's stored limits; zero fields mean no limit.
type Limits struct {
	Concurrency    int   // jobs of the queue running at once
	KeyConcurrency int   // jobs of one group running at once
	Ordered        bool  // a group's jobs run one at a time, in id order
	RateN          int   // starts of the queue's jobs ...
	RatePer        int64 // ... in any window of this many nanoseconds
	KeyRateN       int   // starts of one group's jobs ...
	KeyRatePer     int64 // ... in any window of this many nanoseconds
}

// Any reports whether l limits anything.
func (l Limits) Any() bool { return l != Limits{} }

// Limiter is what a backend implements for flow control.
//
// Rules every store keeps for a queue whose stored Limits are not zero, on
// the claims whose ClaimQuery.Limited is set (a claim without it takes the
// claim path of queues without limits):
//   - the claim reads the stored limits inside its transaction (on
//     PostgreSQL after locking the queue's settings row, so that the claims
//     of one limited queue are serialised) and counts the rows of the queue
//     that run under a lease that has not lapsed and were started by a
//     limited claim; it takes at most Concurrency minus that count (and per
//     group, KeyConcurrency minus the group's count) — jobs held back stay
//     pending, untouched;
//   - it marks the rows it starts, so that later claims count them.
type Limiter interface {
	// SetLimits stores queue's limits and returns those stored before
	// (zero when none were). Rows of queue running when limits are first
	// set are marked so that claims count them.
	SetLimits(ctx context.Context, queue string, l Limits) (Limits, error)
	// Limits returns the stored limits of every queue that has any.
	Limits(ctx context.Context) (map[string]Limits, error)
	// LimitsNextFree returns the earliest time after now when a limited
	// claim of queue may take more: the earliest lease end among its
	// counted running rows (a slot frees by itself if their worker is
	// gone) or VisibleAt of its live rows of kinds (a retry or a scheduled
	// job comes due); ok false if there is none. It reads one range per
	// priority and kind, as NextDue does.
	LimitsNextFree(ctx context.Context, queue string, kinds []string, now int64) (at int64, ok bool, err error)
}

// Room is what a limited claim may still start per group, from the
// group's running rows (counted, lease not lapsed) and its starts in the
// current window of KeyRatePer.
type Room struct {
	l               Limits
	running, starts map[string]int
}

// NewRoom is the Room of limits l given what runs and what started.
func NewRoom(l Limits, running, starts map[string]int) Room {
	return Room{l: l, running: running, starts: starts}
}

// Grouped reports whether l limits groups at all.
func (l Limits) Grouped() bool { return l.KeyConcurrency > 0 || l.Ordered || l.KeyRateN > 0 }

// Of is how many more rows of group g the claim may start.
func (r Room) Of(g string) int {
	room := math.MaxInt
	if r.l.KeyConcurrency > 0 {
		room = min(room, r.l.KeyConcurrency-r.running[g])
	}
	if r.l.Ordered {
		room = min(room, 1-r.running[g])
	}
	if r.l.KeyRateN > 0 {
		room = min(room, r.l.KeyRateN-r.starts[g])
	}
	return room
}

// Take reports whether group g has room for one more job beside taken
// (what the claim holds already) and mine (what it chose so far), and
// counts that job in mine when it has.
func (r Room) Take(g string, taken, mine map[string]int) bool {
	if r.Of(g)-taken[g]-mine[g] <= 0 {
		return false
	}
	mine[g]++
	return true
}

// Saturated lists the groups with no room left, sorted.
func (r Room) Saturated() []string {
	out := []string{}
	seen := map[string]bool{}
	for _, m := range []map[string]int{r.running, r.starts} {
		for g := range m {
			if !seen[g] && r.Of(g) <= 0 {
				seen[g] = true
				out = append(out, g)
			}
		}
	}
	slices.Sort(out)
	return out
}
