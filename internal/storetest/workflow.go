package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue/internal/store"
)

// Workflows (store/workflow.go): InsertFlow, and the resolution of a parent's
// children by Complete, CompleteTx, Bury and Cancel.

func init() {
	tests = append(tests,
		test{"Flows/SuccessOfTheLastParentMakesTheChildPendingWithOutputs", testFlowSuccess},
		test{"Flows/DeathCancelsNeedingChildrenTransitively", testFlowDeath},
		test{"Flows/CancelResolvesAndCancelsWaitingJobs", testFlowCancel},
		test{"Flows/CompleteTxResolvesInTheApplicationsTransaction", testFlowCompleteTx},
		test{"Flows/GraphWalksBothDirections", testFlowGraph},
		test{"Flows/RequeueOfADeadParentBringsBackTheDependantsItsDeathCancelled", testFlowRequeue},
	)
}

// completeOne writes one success and returns its outcome.
func completeOne(t *testing.T, e *env, c store.Completion) error {
	t.Helper()
	done := make(chan error, 1)
	c.Notify = func(err error) { done <- err }
	e.s.Complete(c)
	require.NoError(t, e.s.Flush(e.ctx))
	return <-done
}

func waitingStats(t *testing.T, e *env, now int64) int {
	t.Helper()
	st, err := e.s.Stats(e.ctx, now)
	require.NoError(t, err)
	n := 0
	for _, s := range st {
		n += s.Waiting
	}
	return n
}

// a and b are parents of c: c waits until both succeeded, then is pending
// due at the later of its own due time and the success, and reads both
// outputs; its edges go when it succeeds.
func testFlowSuccess(t *testing.T, e *env) {
	c := job("q", "k", 0, 10)
	c.Waits = 2
	ids, err := e.s.InsertFlow(e.ctx, store.Tx{}, []store.NewJob{job("q", "k", 0, 10), job("q", "k", 0, 10), c},
		[]store.Edge{{Child: 2, Parent: 0}, {Child: 2, Parent: 1}})
	require.NoError(t, err)
	j, _ := get(t, e, ids[2])
	require.Equal(t, store.Waiting, j.State)
	require.Equal(t, 1, waitingStats(t, e, 100))
	got := claim(t, e, e.s, claimQuery("q", "k", 10, 100, 1000, 7))
	require.ElementsMatch(t, []int64{ids[0], ids[1]}, claimedIDs(got), "a waiting job is never claimed")

	require.NoError(t, e.s.Report(e.ctx, store.Report{Lease: store.Lease{ID: ids[0], Lease: 7}, Output: []byte(`{"n":1}`)}))
	require.NoError(t, completeOne(t, e, store.Completion{Lease: store.Lease{ID: ids[0], Lease: 7}, At: 200, Flow: store.FlowParent}))
	j, _ = get(t, e, ids[2])
	require.Equal(t, store.Waiting, j.State, "one parent of two succeeded")
	// A lost lease changes nothing.
	require.ErrorIs(t, completeOne(t, e, store.Completion{Lease: store.Lease{ID: ids[1], Lease: 99}, At: 250, Flow: store.FlowParent}), store.ErrLeaseLost)
	j, _ = get(t, e, ids[2])
	require.Equal(t, store.Waiting, j.State)

	require.NoError(t, completeOne(t, e, store.Completion{Lease: store.Lease{ID: ids[1], Lease: 7}, At: 300, Keep: true, Flow: store.FlowParent}))
	j, _ = get(t, e, ids[2])
	require.Equal(t, store.Pending, j.State)
	require.Equal(t, int64(300), j.VisibleAt, "due at the last parent's success")
	require.Zero(t, waitingStats(t, e, 300))
	ps, err := e.s.ParentResults(e.ctx, ids[2])
	require.NoError(t, err)
	require.Len(t, ps, 2)
	require.Equal(t, ids[0], ps[0].Parent)
	require.Equal(t, int8(1), ps[0].Done)
	require.JSONEq(t, `{"n":1}`, string(ps[0].Output))
	require.Nil(t, ps[1].Output)

	got = claim(t, e, e.s, claimQuery("q", "k", 10, 400, 1000, 8))
	require.Equal(t, []int64{ids[2]}, claimedIDs(got))
	require.NoError(t, completeOne(t, e, store.Completion{Lease: store.Lease{ID: ids[2], Lease: 8}, At: 500, Flow: store.FlowChild}))
	ps, err = e.s.ParentResults(e.ctx, ids[2])
	require.NoError(t, err)
	require.Empty(t, ps, "a child's edges go with its success")
}

// a dies: b (needs a) and c (needs b) are cancelled, d (after a) is pending.
func testFlowDeath(t *testing.T, e *env) {
	w := func() store.NewJob { j := job("q", "k", 0, 10); j.Waits = 1; return j }
	ids, err := e.s.InsertFlow(e.ctx, store.Tx{}, []store.NewJob{job("q", "k", 0, 10), w(), w(), w()},
		[]store.Edge{{Child: 1, Parent: 0}, {Child: 2, Parent: 1}, {Child: 3, Parent: 0, Mode: store.AfterFinished}})
	require.NoError(t, err)
	got := claim(t, e, e.s, claimQuery("q", "k", 10, 100, 1000, 7))
	require.Equal(t, []int64{ids[0]}, claimedIDs(got))
	msg := "boom"
	require.NoError(t, e.s.Bury(e.ctx, store.Burial{Lease: store.Lease{ID: ids[0], Lease: 7}, At: 200, Reason: "failed",
		LastError: &msg, Record: store.Attempt{Attempt: 1, StartedAt: 100, FinishedAt: 200, Error: msg, Decision: "dead"},
		Flow: store.FlowParent}))
	b, _ := get(t, e, ids[1])
	require.Equal(t, store.Cancelled, b.State)
	require.Contains(t, b.DeadReason, "died")
	c, _ := get(t, e, ids[2])
	require.Equal(t, store.Cancelled, c.State)
	require.Contains(t, c.DeadReason, "was cancelled")
	d, _ := get(t, e, ids[3])
	require.Equal(t, store.Pending, d.State)
	require.Zero(t, waitingStats(t, e, 300))
}

// Cancel of a pending parent cancels its needing child; Cancel of a waiting
// job cancels it and lets its after-any-outcome child run.
func testFlowCancel(t *testing.T, e *env) {
	w := func() store.NewJob { j := job("q", "k", 0, 10); j.Waits = 1; return j }
	ids, err := e.s.InsertFlow(e.ctx, store.Tx{}, []store.NewJob{job("q", "k", 0, 10), w(), w(), w()},
		[]store.Edge{{Child: 1, Parent: 0}, {Child: 2, Parent: 0}, {Child: 3, Parent: 2, Mode: store.AfterFinished}})
	require.NoError(t, err)
	_, err = e.s.Cancel(e.ctx, []int64{ids[2]}, 50, nil)
	require.NoError(t, err)
	j, _ := get(t, e, ids[3])
	require.Equal(t, store.Pending, j.State, "after a cancelled parent")
	_, err = e.s.Cancel(e.ctx, []int64{ids[0]}, 60, nil)
	require.NoError(t, err)
	j, _ = get(t, e, ids[1])
	require.Equal(t, store.Cancelled, j.State)
	require.Contains(t, j.DeadReason, "was cancelled")
	require.Zero(t, waitingStats(t, e, 100))
}

func testFlowCompleteTx(t *testing.T, e *env) {
	if e.b.DB == nil {
		t.Skip("the backend gives the suite no database/sql handle (Backend.DB)")
	}
	c := job("q", "k", 0, 10)
	c.Waits = 1
	ids, err := e.s.InsertFlow(e.ctx, store.Tx{}, []store.NewJob{job("q", "k", 0, 10), c}, []store.Edge{{Child: 1, Parent: 0}})
	require.NoError(t, err)
	claim(t, e, e.s, claimQuery("q", "k", 10, 100, 1000, 7))
	db := e.b.DB(t, e.where)
	tx, err := db.BeginTx(e.ctx, nil)
	require.NoError(t, err)
	require.NoError(t, e.s.CompleteTx(e.ctx, store.SQLTx(tx), store.Lease{ID: ids[0], Lease: 7}, 0))
	require.NoError(t, tx.Rollback())
	j, _ := get(t, e, ids[1])
	require.Equal(t, store.Waiting, j.State, "rolled back with the application's transaction")
	tx, err = db.BeginTx(e.ctx, nil)
	require.NoError(t, err)
	require.NoError(t, e.s.CompleteTx(e.ctx, store.SQLTx(tx), store.Lease{ID: ids[0], Lease: 7}, 0))
	require.NoError(t, tx.Commit())
	j, _ = get(t, e, ids[1])
	require.Equal(t, store.Pending, j.State)
}

func testFlowGraph(t *testing.T, e *env) {
	c := job("q", "k", 0, 10)
	c.Waits = 2
	ids, err := e.s.InsertFlow(e.ctx, store.Tx{}, []store.NewJob{job("q", "k", 0, 10), job("q", "x", 0, 10), c},
		[]store.Edge{{Child: 2, Parent: 0}, {Child: 2, Parent: 1, Mode: store.AfterFinished}})
	require.NoError(t, err)
	g, err := e.s.FlowGraph(e.ctx, ids[0], 100)
	require.NoError(t, err)
	require.Len(t, g, 3)
	require.Equal(t, ids[2], g[2].ID)
	require.Equal(t, store.Waiting, g[2].State)
	require.Equal(t, 2, g[2].Waits)
	require.Len(t, g[2].Parents, 2)
	_, err = e.s.FlowGraph(e.ctx, ids[2]+100, 100)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// bury makes the running job l dead, as a workflow's parent.
func buryFlow(t *testing.T, e *env, l store.Lease, at int64) {
	t.Helper()
	msg := "boom"
	require.NoError(t, e.s.Bury(e.ctx, store.Burial{Lease: l, At: at, Reason: "failed", LastError: &msg,
		Record: store.Attempt{Attempt: 1, StartedAt: at, FinishedAt: at, Error: msg, Decision: "dead"}, Flow: store.FlowParent}))
}

// a and x are parents of b, b of c; y and v of z. a dies (b and c are
// cancelled), x succeeds; y and v die. Requeueing a brings b and c back to
// waiting, b waiting for a only; a's success then makes b pending.
// Requeueing y leaves z cancelled: v still failed it.
func testFlowRequeue(t *testing.T, e *env) {
	w := func(n int) store.NewJob { j := job("q", "k", 0, 10); j.Waits = n; return j }
	ids, err := e.s.InsertFlow(e.ctx, store.Tx{}, []store.NewJob{job("q", "k", 0, 10), job("q", "k", 0, 10), w(2), w(1),
		job("q", "k", 0, 10), job("q", "k", 0, 10), w(2)},
		[]store.Edge{{Child: 2, Parent: 0}, {Child: 2, Parent: 1}, {Child: 3, Parent: 2}, {Child: 6, Parent: 4}, {Child: 6, Parent: 5}})
	require.NoError(t, err)
	a, x, b, c, y, v, z := ids[0], ids[1], ids[2], ids[3], ids[4], ids[5], ids[6]
	got := claim(t, e, e.s, claimQuery("q", "k", 10, 100, 1000, 7))
	require.Len(t, got, 4)
	buryFlow(t, e, store.Lease{ID: a, Lease: 7}, 200)
	require.NoError(t, completeOne(t, e, store.Completion{Lease: store.Lease{ID: x, Lease: 7}, At: 210, Flow: store.FlowParent}))
	buryFlow(t, e, store.Lease{ID: y, Lease: 7}, 220)
	buryFlow(t, e, store.Lease{ID: v, Lease: 7}, 230)
	for _, id := range []int64{b, c, z} {
		j, _ := get(t, e, id)
		require.Equal(t, store.Cancelled, j.State)
	}

	_, err = e.s.Requeue(e.ctx, []int64{a, y}, 300)
	require.NoError(t, err)
	for _, id := range []int64{b, c} {
		j, _ := get(t, e, id)
		require.Equal(t, store.Waiting, j.State, "job %d", id)
		require.Empty(t, j.DeadReason)
	}
	j, _ := get(t, e, z)
	require.Equal(t, store.Cancelled, j.State, "v's death still cancels z")
	require.Equal(t, 2, waitingStats(t, e, 300))

	got = claim(t, e, e.s, claimQuery("q", "k", 10, 400, 1000, 8))
	require.ElementsMatch(t, []int64{a, y}, claimedIDs(got))
	require.NoError(t, completeOne(t, e, store.Completion{Lease: store.Lease{ID: a, Lease: 8}, At: 500, Flow: store.FlowParent}))
	j, _ = get(t, e, b)
	require.Equal(t, store.Pending, j.State, "b's parents both succeeded now")
	j, _ = get(t, e, c)
	require.Equal(t, store.Waiting, j.State)
}
