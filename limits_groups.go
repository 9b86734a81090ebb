package litequeue

import (
	"context"
	"strconv"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// The groups of a queue, for operators: what each group runs and holds,
// and for an ordered queue which job heads it (docs/flow-control.md).

// GroupPendingCap is the most pending jobs Queue.Groups counts per group;
// a group with more has GroupInfo.PendingMore set ("10,000+").
const GroupPendingCap = store.GroupCountCap

// DefaultGroupsLimit and MaxGroupsLimit bound GroupsOptions.Limit.
const (
	DefaultGroupsLimit = 100
	MaxGroupsLimit     = 1000
)

// GroupsOptions page Queue.Groups.
type GroupsOptions struct {
	// After lists only the groups whose names sort after it (bytewise);
	// "" starts at the first.
	After string
	// Limit is the most groups of the page: 0 or less means
	// DefaultGroupsLimit, more than MaxGroupsLimit means MaxGroupsLimit.
	Limit int
}

// GroupsPage is one page of a queue's groups, by name.
type GroupsPage struct {
	Groups []GroupInfo `json:"groups"`
	// Next is the After of the next page; "" when this page is the last.
	// A full page sets it, so the next page may be empty.
	Next string `json:"next,omitempty"`
}

// GroupInfo is one group of a queue with live jobs (pending or running).
type GroupInfo struct {
	Group string `json:"group"`
	// Running counts the group's jobs that the queue's limits count as
	// running (started by a limited claim, lease not lapsed).
	Running int `json:"running"`
	// Pending counts its pending jobs, at most GroupPendingCap;
	// PendingMore is set when it has more. In a queue without limits
	// (whose claims mark nothing) it counts the group's running jobs too.
	Pending     int  `json:"pending"`
	PendingMore bool `json:"pending_more,omitempty"`
	// OldestPending is when its oldest pending job was enqueued; zero if
	// none is pending.
	OldestPending time.Time `json:"oldest_pending,omitzero"`
	// Head, HeadState and HeadAttempt are, for an ordered queue
	// (QueueLimits.Ordered), the group's first live job — the one the
	// later ones wait for — its state and attempts made; zero otherwise.
	Head        int64 `json:"head,omitempty"`
	HeadState   State `json:"head_state,omitempty"`
	HeadAttempt int   `json:"head_attempt,omitempty"`
}

// PendingText is Pending in words: "10000+" when capped.
func (g GroupInfo) PendingText() string {
	if g.PendingMore {
		return strconv.Itoa(GroupPendingCap) + "+"
	}
	return strconv.Itoa(g.Pending)
}

// Groups lists the groups of queue that have live jobs, by name, one page
// of opts at a time. Each page reads a few seeks of an index per group,
// whatever the number of jobs. An unknown queue, or one without groups,
// gives an empty page; it works on a read-only queue.
func (q *Queue) Groups(ctx context.Context, queue string, opts GroupsOptions) (GroupsPage, error) {
	limit := opts.Limit
	if limit <= 0 {
		limit = DefaultGroupsLimit
	}
	limit = min(limit, MaxGroupsLimit)
	page := GroupsPage{Groups: []GroupInfo{}}
	if !storableText(queue) || !storableText(opts.After) {
		return page, nil
	}
	now := unixNanos(q.clock)
	rows, err := q.store.Groups(ctx, queue, opts.After, limit, now)
	if err != nil {
		return page, wrapf("litequeue: groups of queue %q: %w", queue, err)
	}
	ls, err := q.store.Limits(ctx)
	if err != nil {
		return page, wrapf("litequeue: groups of queue %q: %w", queue, err)
	}
	ordered := ls[queue].Ordered
	for _, r := range rows {
		g := GroupInfo{Group: r.Group, Running: r.Running, Pending: min(r.Pending, GroupPendingCap),
			PendingMore: r.Pending > GroupPendingCap}
		if r.OldestPending != 0 {
			g.OldestPending = time.Unix(0, r.OldestPending)
		}
		if ordered && r.Head.ID != 0 {
			g.Head, g.HeadState, g.HeadAttempt = r.Head.ID, publicState(r.Head.State, r.Head.VisibleAt, now), r.Head.Attempt
		}
		page.Groups = append(page.Groups, g)
	}
	if len(rows) == limit {
		page.Next = rows[len(rows)-1].Group
	}
	return page, nil
}

// LimitsUsage is what a queue's limits count now, across every process.
type LimitsUsage struct {
	// Running counts the queue's jobs that a limited claim started and
	// whose lease has not lapsed (what QueueLimits.Concurrency bounds).
	Running int `json:"running"`
	// Starts counts the starts in the current window of QueueLimits.Rate
	// (0 without a Rate); RateFreesAt is when that window lets one more
	// start, zero when none started in it.
	Starts      int       `json:"starts"`
	RateFreesAt time.Time `json:"rate_frees_at,omitzero"`
}

// LimitsUsage reads what queue's limits count at the Clock's now: three
// small reads, whatever the number of jobs. A queue without limits counts
// nothing (its claims mark no job).
func (q *Queue) LimitsUsage(ctx context.Context, queue string) (LimitsUsage, error) {
	if !storableText(queue) {
		return LimitsUsage{}, nil
	}
	f, err := q.store.WaitFacts(ctx, queue, 0, unixNanos(q.clock))
	if err != nil {
		return LimitsUsage{}, wrapf("litequeue: usage of the limits of queue %q: %w", queue, err)
	}
	u := LimitsUsage{Running: f.Running, Starts: f.Starts}
	if f.FirstStart != 0 {
		u.RateFreesAt = time.Unix(0, f.FirstStart+f.Limits.RatePer)
	}
	return u, nil
}

// Holds says which queue-wide limit of l holds every ready job of the
// queue at this usage: WaitConcurrency when Concurrency jobs run,
// WaitRate when the Rate's window is used up, "" when neither (a group's
// limits may still hold some).
func (u LimitsUsage) Holds(l QueueLimits) WaitKind {
	switch {
	case l.Concurrency > 0 && u.Running >= l.Concurrency:
		return WaitConcurrency
	case l.Rate.N > 0 && u.Starts >= l.Rate.N:
		return WaitRate
	}
	return ""
}
