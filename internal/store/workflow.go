package store

import (
	"context"
	"fmt"
)

// Workflows: jobs that wait for other jobs. A job with parents is stored
// Waiting, outside the claim index, with a count of its unmet parents; the
// transaction that records a parent's final outcome resolves that parent's
// children only (an index of edges by parent): on success each child's count
// falls by one and a child at 0 becomes pending in the same transaction; on
// death or cancellation a child that needs the parent's success is
// cancelled, transitively, and one that runs after any outcome counts the
// parent as met.
//
// A job that has children or parents carries FlowParent / FlowChild in its
// meta (MetaDoc.Flow), set when the workflow is inserted; the runtime copies
// the flag to the Completion and the Burial of its delivery, so only such
// jobs take the extra statements and every other success is written as
// before.

// Waiting is the stored state of a job waiting for its parents.
const Waiting State = 5

// ListWaiting filters listings by the waiting state.
const ListWaiting = ListCancelled + 1

// The bits of MetaDoc.Flow.
const (
	FlowParent = 1 // the job has children waiting for it
	FlowChild  = 2 // the job has parents (its edges hold their outputs)
)

// Dependency modes of an Edge.
const (
	NeedsSuccess  int8 = 0 // the child needs the parent's success; it is cancelled if the parent dies or is cancelled
	AfterFinished int8 = 1 // the child runs after the parent finished, whatever the outcome
)

// Edge is one dependency of a workflow being inserted: jobs[Child] waits for
// jobs[Parent] (indexes into the jobs of InsertFlow), or, when Stored is not
// 0, for the job already stored with that id (Parent is then unused).
type Edge struct {
	Child, Parent int
	Mode          int8
	Stored        int64
}

// ParentNotLiveError is InsertFlow's refusal of an edge to a stored job
// that does not exist or has finished: State is its state, or -1 when no
// row has that id. Nothing was written.
type ParentNotLiveError struct {
	Child int   // the index of the child in InsertFlow's jobs
	ID    int64 // the stored parent
	State State
}

func (e *ParentNotLiveError) Error() string {
	return fmt.Sprintf("workflow node %d: stored parent job %d is not live (state %d)", e.Child, e.ID, e.State)
}

// ParentFailedError refuses the requeue of cancelled job ID, a workflow's
// dependant that needs the success of Parent, which died or was cancelled.
// Nothing was changed.
type ParentFailedError struct {
	ID, Parent int64
}

func (e *ParentFailedError) Error() string {
	return fmt.Sprintf("job %d needs the success of job %d, which died or was cancelled", e.ID, e.Parent)
}

// LiveParent tells whether a stored job in state st may get a child: it
// has not finished (pending, scheduled, retrying, running or waiting).
func LiveParent(st State) bool {
	return st == Pending || st == Running || st == Waiting
}

// ParentResult is what a child reads of one of its parents.
type ParentResult struct {
	Parent int64
	Mode   int8
	// Done is 0 while the parent has not finished, 1 once it succeeded, 2
	// once it died or was cancelled.
	Done   int8
	Output []byte // the parent's output at its success; nil if none
}

// FlowNode is one node of a stored workflow graph, as operators read it.
type FlowNode struct {
	ID          int64
	Queue, Kind string
	State       State  // -1: the row is gone (a succeeded job not retained)
	VisibleAt   int64  // tells a ready pending row from a scheduled one
	Waits       int    // unmet parents of a waiting job
	Reason      string // why a cancelled or dead node ended
	Parents     []ParentResult
}

// Flows is what workflows need from a backend.
type Flows interface {
	// InsertFlow stores jobs and their edges in one transaction (on tx, the
	// application's, when it is not the zero Tx). jobs[i].Waits must be its
	// number of parents among edges; jobs with none are pending. ids[i] is
	// the id of jobs[i]. Keys and uniqueness are not honoured (the caller
	// refuses them). Any error stores nothing.
	InsertFlow(ctx context.Context, tx Tx, jobs []NewJob, edges []Edge) (ids []int64, err error)
	// ParentResults returns the edges of child, by parent id
	// (none for a job without parents, or once it succeeded).
	ParentResults(ctx context.Context, child int64) ([]ParentResult, error)
	// FlowGraph returns the workflow that holds job id: every job reachable
	// from it by edges in either direction, at most limit of them, by id.
	// ErrNotFound if id is unknown.
	FlowGraph(ctx context.Context, id int64, limit int) ([]FlowNode, error)
}
