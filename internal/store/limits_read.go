package store

import "context"

// Reads of flow control for operators (docs/flow-control.md): why a job
// waits and what each group holds. They only read, from the stored jobs.

// GroupCountCap is the most live rows a group listing counts per group:
// past it a count says "at least" (GroupRow.Pending > GroupCountCap), so a
// group with a huge backlog costs no more to list than a small one.
const GroupCountCap = 10000

// WaitFacts are what a store reads for why a pending job waits: its group
// and what its queue's limits count at now.
type WaitFacts struct {
	Group  string // the job's group, "" for none
	Limits Limits // the queue's stored limits, zero for none
	// Running and GroupRunning count the rows of the queue, and of the
	// group, that a limited claim started and whose lease has not lapsed
	// at now (what the limits count).
	Running, GroupRunning int
	// Starts and GroupStarts count the starts of the queue in the window
	// of Limits.RatePer ending at now, and of the group in the window of
	// Limits.KeyRatePer; FirstStart and GroupFirstStart are the earliest
	// of them (0 for none): the window lets one more start Per after it.
	Starts, GroupStarts         int
	FirstStart, GroupFirstStart int64
	// Head is the group's first live row (lowest id, pending or running),
	// the one an ordered group runs next; zero ID for none (or no group).
	Head GroupHead
}

// GroupHead is the first live row of a group.
type GroupHead struct {
	ID        int64
	State     State
	VisibleAt int64
	Attempt   int
}

// GroupRow is one group of a queue, as a group listing reads it.
type GroupRow struct {
	Group string
	// Running counts the group's rows that a limited claim started and
	// whose lease has not lapsed at now. Pending counts its live rows (a range
	// of the group's index, at most GroupCountCap+1: more means at least
	// that many) less those a limited claim started: in a queue without
	// limits, whose claims mark nothing, it counts running rows too.
	Running, Pending int
	// OldestPending is the CreatedAt of its oldest pending row (lowest
	// id); 0 for none.
	OldestPending int64
	Head          GroupHead
}

// LimitsReader is what a backend implements for the reads of flow
// control. Both read ranges of lq_jobs_group_live and lq_jobs_flow (and
// lq_flow_starts), never the whole queue.
type LimitsReader interface {
	// WaitFacts reads the facts of job id, of queue, at now.
	WaitFacts(ctx context.Context, queue string, id, now int64) (WaitFacts, error)
	// Groups lists at most limit groups of queue with live rows (pending
	// or running), by name, those after after only, at now.
	Groups(ctx context.Context, queue, after string, limit int, now int64) ([]GroupRow, error)
}
