package litequeue

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// Workflows: jobs that wait for other jobs. A Workflow is a set of jobs
// (nodes) and dependencies between them (a DAG); EnqueueWorkflow validates
// it and stores it in one transaction. A node with parents is stored
// waiting (StateWaiting): it is never claimed until its parents finished as
// it needs, and it becomes ready in the very transaction that records its
// last parent's success. See docs/workflows.md.

// Limits of one workflow, checked by EnqueueWorkflow (ErrInvalidWorkflow,
// nothing written).
const (
	// MaxWorkflowNodes is the most jobs of one workflow.
	MaxWorkflowNodes = 100_000
	// MaxWorkflowFanIn is the most parents of one node.
	MaxWorkflowFanIn = 10_000
	// MaxWorkflowFanOut is the most children of one node.
	MaxWorkflowFanOut = 10_000
	// MaxWorkflowDepth is the most nodes on one path from a root to a leaf.
	MaxWorkflowDepth = 1_000
)

// ErrInvalidWorkflow: EnqueueWorkflow refused a workflow (empty, a cycle,
// an unknown node, a repeated dependency, a limit broken, or a node with an
// idempotency key or uniqueness, which workflows do not support). Nothing
// was written. The error says which node and what to change.
var ErrInvalidWorkflow = errors.New("litequeue: invalid workflow")

// ErrParentNotLive: EnqueueWorkflow refused a dependency on a stored job
// (Workflow.NeedsJob, Workflow.AfterJob) that does not exist in the queue's
// file or database, or has already finished (succeeded, dead or
// cancelled). It also matches ErrInvalidWorkflow. Nothing was written. The
// error names the node and the job.
var ErrParentNotLive = fmt.Errorf("%w: a stored parent job is not live", ErrInvalidWorkflow)

// ErrParentFailed: RequeueCancelled refused a cancelled workflow's
// dependant that needs the success of a parent that died or was cancelled:
// it would wait for ever. Nothing was changed. Requeue that parent first
// (which brings its dependants back to waiting), or enqueue the job anew.
var ErrParentFailed = errors.New("litequeue: a parent job this job needs failed")

// StateWaiting's jobs are counted by QueueStats.Waiting and listed by Jobs
// with that state; Cancel cancels them (and, through them, their own
// dependants that need their success).

// Node names a job of a Workflow: what Add returned for it.
type Node int

// Workflow is a set of jobs and the dependencies between them, built with
// Add, Needs and After and stored by Queue.EnqueueWorkflow. The zero value
// is an empty workflow. A Workflow is not safe for concurrent use.
type Workflow struct {
	nodes   []workflowNode
	edges   []store.Edge
	err     error // the first error of building it (an empty batch)
	batches int
}

type workflowNode struct {
	job  Job
	opts *EnqueueOptions
}

// Add adds job, with its options (nil for none), as a node of w and returns
// its Node. The options' Key and Unique are not supported in a workflow
// (EnqueueWorkflow refuses them).
func (w *Workflow) Add(job Job, opts *EnqueueOptions) Node {
	w.nodes = append(w.nodes, workflowNode{job: job, opts: opts})
	return Node(len(w.nodes) - 1)
}

// Needs makes child wait for the success of each of parents: child runs
// once every parent succeeded. A parent that dies or is cancelled cancels
// child (and, the same way, child's own dependants), with a reason naming
// the parent.
func (w *Workflow) Needs(child Node, parents ...Node) {
	for _, p := range parents {
		w.edges = append(w.edges, store.Edge{Child: int(child), Parent: int(p), Mode: store.NeedsSuccess})
	}
}

// After makes child wait until each of parents finished, whatever the
// outcome: succeeded, dead or cancelled.
func (w *Workflow) After(child Node, parents ...Node) {
	for _, p := range parents {
		w.edges = append(w.edges, store.Edge{Child: int(child), Parent: int(p), Mode: store.AfterFinished})
	}
}

// NeedsJob makes node wait for the success of each of ids, jobs already
// stored in the queue (by EnqueueWorkflow's queue file or database), as
// Needs does for nodes: "email after the existing import job". Each must be
// live when the workflow is stored (pending, scheduled, retrying, running
// or waiting); EnqueueWorkflow refuses, with ErrParentNotLive and nothing
// written, one that does not exist there or has already finished, since
// its outcome was not recorded for the new dependant. A parent that
// finishes while the workflow is being stored is either seen finished (a
// refusal) or resolves the node as any parent would, never leaving it
// waiting.
func (w *Workflow) NeedsJob(node Node, ids ...int64) {
	for _, id := range ids {
		w.edges = append(w.edges, store.Edge{Child: int(node), Stored: id, Mode: store.NeedsSuccess})
	}
}

// AfterJob is NeedsJob for a dependency on a stored job's end whatever its
// outcome, as After is for nodes. The job must be live when the workflow is
// stored, as for NeedsJob (ErrParentNotLive).
func (w *Workflow) AfterJob(node Node, ids ...int64) {
	for _, id := range ids {
		w.edges = append(w.edges, store.Edge{Child: int(node), Stored: id, Mode: store.AfterFinished})
	}
}

// Len returns the number of nodes of w.
func (w *Workflow) Len() int { return len(w.nodes) }

// EnqueueWorkflow validates w and stores all its jobs and dependencies in
// one transaction, and returns the ids of its nodes: ids[n] is the id of
// Node n. Nodes without parents are enqueued as EnqueueBatch would (ready
// or scheduled); nodes with parents wait (StateWaiting) until their parents
// finished as they need, and then become due at their own due time (their
// options' Delay or RunAt) or at once if that passed. A bad workflow is an
// ErrInvalidWorkflow (or, for a bad job, ErrInvalidJob) naming the node,
// with nothing written.
func (q *Queue) EnqueueWorkflow(ctx context.Context, w *Workflow) ([]int64, error) {
	if err := q.writable(); err != nil {
		return nil, err
	}
	jobs, err := q.prepareWorkflow(w)
	if err != nil {
		return nil, err
	}
	for _, e := range w.edges {
		if e.Stored != 0 {
			q.storedParents.Store(true)
			break
		}
	}
	// A worker that claims a job before its EventEnqueued waits for it
	// (enqueue_order.go).
	q.gate.enter(jobs...)
	defer q.gate.leave(jobs...)
	ids, err := q.store.InsertFlow(ctx, store.Tx{}, jobs, w.edges)
	if err != nil {
		return nil, workflowInsertError(err)
	}
	q.supersedeTx(ids)
	queues := map[string]bool{}
	for i, nj := range jobs {
		switch {
		case nj.Waits > 0:
		case nj.VisibleAt > nj.CreatedAt:
			q.dueAt(nj.Queue, nj.Kind, nj.VisibleAt)
		default:
			queues[nj.Queue] = true
		}
		q.emit(Event{Type: EventEnqueued, JobID: ids[i], Queue: nj.Queue, Kind: nj.Kind, Delay: time.Duration(nj.VisibleAt - nj.CreatedAt)})
	}
	for name := range queues {
		q.wake(name)
	}
	return ids, nil
}

// EnqueueWorkflowTx is EnqueueWorkflow inside the application's transaction
// tx (see EnqueueTx): the workflow exists if and only if tx commits.
func (q *Queue) EnqueueWorkflowTx(ctx context.Context, tx *sql.Tx, w *Workflow) ([]int64, error) {
	if tx == nil {
		return nil, ErrNoTx
	}
	if err := q.writable(); err != nil {
		return nil, err
	}
	jobs, err := q.prepareWorkflow(w)
	if err != nil {
		return nil, err
	}
	for _, e := range w.edges {
		if e.Stored != 0 {
			q.storedParents.Store(true)
			break
		}
	}
	ids, err := q.store.InsertFlow(ctx, store.SQLTx(tx), jobs, w.edges)
	if err != nil {
		return nil, workflowInsertError(err)
	}
	q.enqueuedTx(ctx, tx, jobs, ids, nil)
	queues := map[string]bool{}
	for _, nj := range jobs {
		if nj.Waits == 0 && !queues[nj.Queue] {
			queues[nj.Queue] = true
			q.wake(nj.Queue)
		}
	}
	return ids, nil
}

// workflowInsertError is the error of InsertFlow as EnqueueWorkflow returns
// it: a stored parent that is not live is an ErrParentNotLive.
func workflowInsertError(err error) error {
	var pe *store.ParentNotLiveError
	if errors.As(err, &pe) {
		what := "does not exist in this queue (it succeeded and was deleted, or is a job of another queue file or database)"
		switch pe.State {
		case store.Completed:
			what = "has already succeeded"
		case store.Dead:
			what = "is already dead"
		case store.Cancelled:
			what = "is already cancelled"
		}
		return fmt.Errorf("%w: node %d depends on job %d, which %s; enqueue the node without that dependency, or before the job finishes",
			ErrParentNotLive, pe.Child, pe.ID, what)
	}
	return wrapf("litequeue: enqueue workflow: %w", err)
}

// invalidWorkflow is an ErrInvalidWorkflow error.
func invalidWorkflow(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidWorkflow}, args...)...)
}

// prepareWorkflow validates w (see EnqueueWorkflow) and encodes its jobs,
// each with its count of parents and its flow marks.
func (q *Queue) prepareWorkflow(w *Workflow) ([]store.NewJob, error) {
	if w == nil || len(w.nodes) == 0 {
		return nil, invalidWorkflow("the workflow has no jobs; Add at least one")
	}
	if w.err != nil {
		return nil, w.err
	}
	n := len(w.nodes)
	if n > MaxWorkflowNodes {
		return nil, invalidWorkflow("%d jobs, more than MaxWorkflowNodes (%d); split it", n, MaxWorkflowNodes)
	}
	parents := make([][]int, n)
	children := make([][]int, n)
	seen := map[[2]int]bool{}
	storedSeen := map[[2]int64]bool{}
	for _, e := range w.edges {
		if e.Stored != 0 || e.Child < 0 || e.Child >= n {
			if e.Child < 0 || e.Child >= n {
				return nil, invalidWorkflow("node %d is not a node of this workflow (it has nodes 0 to %d); use the Node that Add returned", e.Child, n-1)
			}
			if e.Stored < 0 {
				return nil, invalidWorkflow("node %d depends on job %d, which is not a job id", e.Child, e.Stored)
			}
			if storedSeen[[2]int64{int64(e.Child), e.Stored}] {
				return nil, invalidWorkflow("node %d depends on job %d twice; declare each dependency once", e.Child, e.Stored)
			}
			storedSeen[[2]int64{int64(e.Child), e.Stored}] = true
			parents[e.Child] = append(parents[e.Child], -1)
			continue
		}
		for _, x := range []int{e.Child, e.Parent} {
			if x < 0 || x >= n {
				return nil, invalidWorkflow("node %d is not a node of this workflow (it has nodes 0 to %d); use the Node that Add returned", x, n-1)
			}
		}
		if e.Child == e.Parent {
			return nil, invalidWorkflow("node %d depends on itself", e.Child)
		}
		if seen[[2]int{e.Child, e.Parent}] {
			return nil, invalidWorkflow("node %d depends on node %d twice; declare each dependency once", e.Child, e.Parent)
		}
		seen[[2]int{e.Child, e.Parent}] = true
		parents[e.Child] = append(parents[e.Child], e.Parent)
		children[e.Parent] = append(children[e.Parent], e.Child)
	}
	for i := range n {
		if len(parents[i]) > MaxWorkflowFanIn {
			return nil, invalidWorkflow("node %d has %d parents, more than MaxWorkflowFanIn (%d)", i, len(parents[i]), MaxWorkflowFanIn)
		}
		if len(children[i]) > MaxWorkflowFanOut {
			return nil, invalidWorkflow("node %d has %d children, more than MaxWorkflowFanOut (%d)", i, len(children[i]), MaxWorkflowFanOut)
		}
	}
	// Kahn's order: what remains once no node without unmet parents is
	// left lies on a cycle; depth[i] is the longest path ending at i.
	indeg := make([]int, n)
	depth := make([]int, n)
	var ready []int
	for i := range n {
		for _, p := range parents[i] {
			if p >= 0 {
				indeg[i]++
			}
		}
		depth[i] = 1
		if indeg[i] == 0 {
			ready = append(ready, i)
		}
	}
	done := 0
	for len(ready) > 0 {
		i := ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		done++
		if depth[i] > MaxWorkflowDepth {
			return nil, invalidWorkflow("node %d lies %d jobs deep, more than MaxWorkflowDepth (%d)", i, depth[i], MaxWorkflowDepth)
		}
		for _, c := range children[i] {
			depth[c] = max(depth[c], depth[i]+1)
			if indeg[c]--; indeg[c] == 0 {
				ready = append(ready, c)
			}
		}
	}
	if done < n {
		var cyc []string
		for i := range n {
			if indeg[i] > 0 && len(cyc) < 10 {
				cyc = append(cyc, fmt.Sprint(i))
			}
		}
		return nil, invalidWorkflow("the dependencies form a cycle through nodes %s; a workflow must be acyclic", strings.Join(cyc, ", "))
	}
	jobs := make([]store.NewJob, n)
	for i, nd := range w.nodes {
		if nd.opts != nil && (nd.opts.Key != "" || nd.opts.Unique != nil) {
			return nil, invalidWorkflow("node %d has an idempotency key or uniqueness, which workflows do not support; drop them", i)
		}
		if nd.job != nil && uniqueOptionsOf(nd.job, nil) != nil {
			return nil, invalidWorkflow("node %d's job type has UniqueOptions, which workflows do not support", i)
		}
		nj, err := q.prepare(nd.job, nd.opts)
		if err != nil {
			return nil, fmt.Errorf("workflow node %d: %w", i, err)
		}
		flow := 0
		if len(children[i]) > 0 {
			flow |= store.FlowParent
		}
		if len(parents[i]) > 0 {
			flow |= store.FlowChild
		}
		if flow != 0 {
			var doc store.MetaDoc
			if nj.Meta != "" {
				if err := json.Unmarshal([]byte(nj.Meta), &doc); err != nil {
					return nil, fmt.Errorf("workflow node %d: %w", i, err)
				}
			}
			doc.Flow = flow
			b, err := json.Marshal(&doc)
			if err != nil {
				return nil, fmt.Errorf("workflow node %d: %w", i, err)
			}
			nj.Meta = string(b)
		}
		nj.Waits = len(parents[i])
		jobs[i] = nj
	}
	return jobs, nil
}

// flowOf reads the workflow marks (store.MetaDoc.Flow) of a job's meta
// column: 0 for a job of no workflow, at the cost of one substring search
// for a job with other metadata and none for a job without.
func flowOf(meta string) int {
	if meta == "" || !strings.Contains(meta, `"flow"`) {
		return 0
	}
	var doc store.MetaDoc
	if json.Unmarshal([]byte(meta), &doc) != nil {
		return 0
	}
	return doc.Flow
}

// MaxParentOutputsBytes bounds what Delivery.ParentResults returns: the
// outputs of all the job's parents together (ErrParentOutputsTooLarge past
// it; read them one at a time with ParentOutput).
const MaxParentOutputsBytes = 16 << 20

// ErrParentOutputsTooLarge: the outputs of a job's parents together are
// larger than MaxParentOutputsBytes; read them one at a time with
// Delivery.ParentOutput.
var ErrParentOutputsTooLarge = errors.New("litequeue: the parents' outputs are too large to read together")

// ErrNoParentOutput: Delivery.ParentOutput was asked for a job that is not
// a parent of the delivery's job, or a parent that recorded no output
// (Delivery.SetOutput) or did not succeed.
var ErrNoParentOutput = errors.New("litequeue: no output of that parent")

// ParentResult is what a workflow's job reads of one of its parents.
type ParentResult struct {
	// ID is the parent's job id.
	ID int64
	// After is true for a dependency declared with Workflow.After (the job
	// runs whatever the parent's outcome), false for Workflow.Needs.
	After bool
	// Succeeded is true once the parent succeeded; Failed once it died or
	// was cancelled (only an After dependency lets the job run then).
	Succeeded, Failed bool
	// Output is the parent's output (Delivery.SetOutput) as it succeeded;
	// nil if it set none or did not succeed.
	Output json.RawMessage
}

// ParentResults returns the delivery's job's parents in a workflow, by id,
// with their outputs: none for a job without parents. Their outputs
// together are at most MaxParentOutputsBytes (ErrParentOutputsTooLarge).
func (d *Delivery[J]) ParentResults(ctx context.Context) ([]ParentResult, error) {
	rs, err := d.parents(ctx)
	if err != nil {
		return nil, err
	}
	total := 0
	for _, r := range rs {
		total += len(r.Output)
	}
	if total > MaxParentOutputsBytes {
		return nil, fmt.Errorf("%w: %d parents' outputs are %d bytes, over MaxParentOutputsBytes (%d); read them one at a time with ParentOutput",
			ErrParentOutputsTooLarge, len(rs), total, MaxParentOutputsBytes)
	}
	return rs, nil
}

// ParentOutput decodes into v the output of parent, a parent of the
// delivery's job that succeeded. ErrNoParentOutput when parent is not one
// of the job's parents, did not succeed or set no output.
func (d *Delivery[J]) ParentOutput(ctx context.Context, parent int64, v any) error {
	rs, err := d.parents(ctx)
	if err != nil {
		return err
	}
	for _, r := range rs {
		if r.ID != parent {
			continue
		}
		if r.Output == nil {
			return fmt.Errorf("%w: job %d is a parent of job %d but has no output (succeeded: %v)", ErrNoParentOutput, parent, d.ID, r.Succeeded)
		}
		if err := json.Unmarshal(r.Output, v); err != nil {
			return fmt.Errorf("litequeue: decoding the output of job %d into %T: %w", parent, v, err)
		}
		return nil
	}
	return fmt.Errorf("%w: job %d is not a parent of job %d", ErrNoParentOutput, parent, d.ID)
}

func (d *Delivery[J]) parents(ctx context.Context) ([]ParentResult, error) {
	if d.d == nil || d.d.q == nil || d.d.q.store == nil {
		return nil, nil
	}
	if flowOf(d.d.meta)&store.FlowChild == 0 {
		return nil, nil
	}
	ps, err := d.d.q.store.ParentResults(ctx, d.ID)
	if err != nil {
		return nil, wrapf("litequeue: reading the parents of job %d: %w", d.ID, err)
	}
	out := make([]ParentResult, len(ps))
	for i, p := range ps {
		out[i] = ParentResult{ID: p.Parent, After: p.Mode == store.AfterFinished, Succeeded: p.Done == 1, Failed: p.Done == 2}
		if len(p.Output) > 0 {
			out[i].Output = json.RawMessage(p.Output)
		}
	}
	return out, nil
}

// flowResolved wakes this process's pools after the final outcome of d, a
// workflow's parent, was written: its dependants may be due now, in any
// queue. A job claimed before a workflow of this process was given a
// dependency on it (Workflow.NeedsJob) is not marked, so once this process
// stored such a workflow every outcome wakes them. Other processes notice
// the write as any other (their watch).
func (p *pool) flowResolved(d *delivery) {
	if p.r != nil && (flowOf(d.meta)&store.FlowParent != 0 || p.q.storedParents.Load()) {
		p.r.wakeAll()
	}
}
