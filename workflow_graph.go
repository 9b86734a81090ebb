package litequeue

import (
	"context"
	"fmt"
	"strings"

	"github.com/litequeue/litequeue/internal/store"
)

// Reading a stored workflow: its nodes, their states and why a waiting
// node waits (Queue.Workflow; lqinspect workflow; the dashboard's job page).

// MaxWorkflowGraph bounds the nodes Queue.Workflow reads.
const MaxWorkflowGraph = 2_000

// WorkflowNode is one job of a stored workflow.
type WorkflowNode struct {
	ID          int64
	Queue, Kind string
	// State is the job's state; "" when its row is gone (a job that
	// succeeded, deleted as completed jobs are unless retained).
	State State
	// Reason is why a cancelled or dead job ended (a cancelled dependant:
	// the parent that made it so).
	Reason string
	// Parents are the job's dependencies, by parent id. A job that
	// succeeded has none left (its edges go with its success).
	Parents []WorkflowDependency
}

// WorkflowDependency is one dependency of a WorkflowNode.
type WorkflowDependency struct {
	Parent int64
	After  bool  // Workflow.After: whatever the parent's outcome
	Done   State // StateCompleted once the parent succeeded, StateDead once it died or was cancelled, "" before
}

// Waits says why a waiting node waits: the parents it waits for, with their
// states as nodes lists them; "" for a node that does not wait.
func (n WorkflowNode) Waits(nodes []WorkflowNode) string {
	if n.State != StateWaiting {
		return ""
	}
	states := map[int64]State{}
	for _, o := range nodes {
		states[o.ID] = o.State
	}
	var open []string
	for _, p := range n.Parents {
		if p.Done == "" {
			open = append(open, fmt.Sprintf("%d (%s)", p.Parent, orGone(states[p.Parent])))
		}
	}
	return fmt.Sprintf("waits for %d of %d parents: %s", len(open), len(n.Parents), strings.Join(open, ", "))
}

func orGone(s State) string {
	if s == "" {
		return "gone"
	}
	return string(s)
}

// Workflow returns the stored workflow that holds job id: every job
// reachable from it through dependencies, in both directions, by id, at
// most MaxWorkflowGraph of them. A job of no workflow is a workflow of one
// node. ErrNotFound if no job has that id. A succeeded dependant's row and
// edges are gone, so a finished part of a workflow may no longer be
// reachable from the rest.
func (q *Queue) Workflow(ctx context.Context, id int64) ([]WorkflowNode, error) {
	ns, err := q.store.FlowGraph(ctx, id, MaxWorkflowGraph)
	if err != nil {
		return nil, wrapf("litequeue: workflow of job %d: %w", id, err)
	}
	now := unixNanos(q.clock)
	out := make([]WorkflowNode, len(ns))
	for i, n := range ns {
		w := WorkflowNode{ID: n.ID, Queue: n.Queue, Kind: n.Kind, Reason: n.Reason}
		if n.State >= 0 {
			w.State = publicState(n.State, n.VisibleAt, now)
		}
		for _, p := range n.Parents {
			d := WorkflowDependency{Parent: p.Parent, After: p.Mode == store.AfterFinished}
			switch p.Done {
			case 1:
				d.Done = StateCompleted
			case 2:
				d.Done = StateDead
			}
			w.Parents = append(w.Parents, d)
		}
		out[i] = w
	}
	return out, nil
}
