package litequeue

import (
	"context"
	"fmt"
)

// Batches with callbacks: a group of jobs whose callback jobs run once the
// last member finished. A batch is part of a Workflow: its callbacks are
// the members' common children (OnSuccess needs every member's success,
// OnComplete runs after every member finished whatever the outcome), stored
// waiting with the members in one transaction and made due by the very
// transaction that records the last member's outcome: exactly once, with
// no batch row for every member's completion to update. A callback reads
// the batch's counts and failed ids with Delivery.BatchSummary.

// BatchCallbacks are the callback jobs of a batch (Workflow.AddBatch).
// Nil means none.
type BatchCallbacks struct {
	// OnSuccess runs once every member succeeded. A member that dies or is
	// cancelled cancels it (its reason names the member).
	OnSuccess *BatchItem
	// OnComplete runs once every member finished: succeeded, dead or
	// cancelled.
	OnComplete *BatchItem
}

// BatchNodes are the nodes Workflow.AddBatch added: the members, in the
// order of the items, and the callbacks (-1 for none).
type BatchNodes struct {
	Members               []Node
	OnSuccess, OnComplete Node
}

// AddBatch adds items as the members of a batch to w, and cb's callbacks
// as their common children. An empty batch makes EnqueueWorkflow refuse w
// (ErrInvalidWorkflow). Members may get parents of their own with Needs and
// After; callbacks may get children.
func (w *Workflow) AddBatch(items []BatchItem, cb BatchCallbacks) BatchNodes {
	out := BatchNodes{OnSuccess: -1, OnComplete: -1}
	if len(items) == 0 && w.err == nil {
		w.err = invalidWorkflow("batch %d has no jobs; an empty batch has nothing to call back for", w.batches)
	}
	w.batches++
	for _, it := range items {
		out.Members = append(out.Members, w.Add(it.Job, it.Options))
	}
	if cb.OnSuccess != nil {
		out.OnSuccess = w.Add(cb.OnSuccess.Job, cb.OnSuccess.Options)
		w.Needs(out.OnSuccess, out.Members...)
	}
	if cb.OnComplete != nil {
		out.OnComplete = w.Add(cb.OnComplete.Job, cb.OnComplete.Options)
		w.After(out.OnComplete, out.Members...)
	}
	return out
}

// EnqueueBatchWithCallbacks stores items as one batch with cb's callbacks
// in one transaction (a Workflow of one batch, see AddBatch) and returns
// the nodes' ids: ids.Members[i] is the id of items[i].
func (q *Queue) EnqueueBatchWithCallbacks(ctx context.Context, items []BatchItem, cb BatchCallbacks) (BatchIDs, error) {
	var w Workflow
	nodes := w.AddBatch(items, cb)
	ids, err := q.EnqueueWorkflow(ctx, &w)
	if err != nil {
		return BatchIDs{}, err
	}
	out := BatchIDs{}
	for _, n := range nodes.Members {
		out.Members = append(out.Members, ids[n])
	}
	if nodes.OnSuccess >= 0 {
		out.OnSuccess = ids[nodes.OnSuccess]
	}
	if nodes.OnComplete >= 0 {
		out.OnComplete = ids[nodes.OnComplete]
	}
	return out, nil
}

// BatchIDs are the job ids of a batch: its members in order and its
// callbacks (0 for none).
type BatchIDs struct {
	Members               []int64
	OnSuccess, OnComplete int64
}

// BatchSummary is what a batch callback knows of its batch: its parents
// (the members) counted by outcome.
type BatchSummary struct {
	Members   int     // the job's parents
	Succeeded int     // of them, succeeded
	Failed    int     // died or were cancelled
	FailedIDs []int64 // the ids of those, ascending
}

// BatchSummary counts the delivery's job's parents by outcome: for a batch
// callback, its batch's members. A job without parents has a zero summary.
// It reads the parents' edges, not their outputs (see ParentResults).
func (d *Delivery[J]) BatchSummary(ctx context.Context) (BatchSummary, error) {
	rs, err := d.parents(ctx)
	if err != nil {
		return BatchSummary{}, err
	}
	var s BatchSummary
	for _, r := range rs {
		s.Members++
		switch {
		case r.Succeeded:
			s.Succeeded++
		case r.Failed:
			s.Failed++
			s.FailedIDs = append(s.FailedIDs, r.ID)
		}
	}
	if s.Succeeded+s.Failed != s.Members {
		return s, fmt.Errorf("litequeue: job %d runs while %d of its parents have not finished", d.ID, s.Members-s.Succeeded-s.Failed)
	}
	return s, nil
}
