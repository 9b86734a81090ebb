package litequeue

import "context"

// CancelWorkflow cancels every live job (ready, scheduled, running or
// waiting) of the workflow that holds job id, as Cancel cancels each: a
// running handler is stopped, and the dependants of a cancelled job
// resolve as after any cancel. It returns how many jobs it cancelled: 0
// when none was live. A job of no workflow is a workflow of one node, so
// only that job is cancelled (if live). ErrNotFound if no job has that id.
// The workflow is read first and its live jobs cancelled in one call
// after: a job that finishes in between is not cancelled, and a dependant
// added in between (Workflow.NeedsJob) is cancelled only through its
// parent's cancel when it needs that parent's success.
func (q *Queue) CancelWorkflow(ctx context.Context, id int64) (int, error) {
	nodes, err := q.Workflow(ctx, id)
	if err != nil {
		return 0, err
	}
	var live []int64
	for _, n := range nodes {
		switch n.State {
		case StateReady, StateScheduled, StateRunning, StateWaiting:
			live = append(live, n.ID)
		}
	}
	if len(live) == 0 {
		return 0, nil
	}
	return q.Cancel(ctx, live...)
}
