package litequeue_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// Workflows: jobs that wait for other jobs (workflow.go).

func init() {
	tests = append(tests, []struct {
		name string
		fn   func(t *testing.T, b conformanceBackend)
	}{
		{"WorkflowDependantWaitsThenRunsAfterAllItsParentsSucceeded", testWorkflowDiamond},
		{"WorkflowParentDeathCancelsNeedingDependantsTransitivelyAndRunsAfterOnes", testWorkflowDeath},
		{"WorkflowCancelOfAParentCancelsItsDependants", testWorkflowCancel},
		{"WorkflowBadInputIsRefusedWithNothingWritten", testWorkflowInvalid},
		{"WorkflowDependantReadsItsParentsOutputs", testWorkflowOutputs},
		{"WorkflowInTheCallersTransactionExistsOnlyIfItCommits", testWorkflowTx},
	}...)
}

// runLog records the order in which handlers ran, by Email.To.
type runLog struct {
	mu  sync.Mutex
	ran []string
}

func (l *runLog) add(s string) {
	l.mu.Lock()
	l.ran = append(l.ran, s)
	l.mu.Unlock()
}

func (l *runLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ran)
}

func jobState(t *testing.T, q *litequeue.Queue, id int64) litequeue.JobInfo {
	t.Helper()
	j, err := q.Job(context.Background(), id)
	require.NoError(t, err)
	return j
}

func waitingCount(t *testing.T, q *litequeue.Queue) int {
	t.Helper()
	st, err := q.Stats(context.Background())
	require.NoError(t, err)
	n := 0
	for _, s := range st {
		n += s.Waiting
	}
	return n
}

// A diamond a -> (b, c) -> d: d waits (listed and counted as waiting) until
// both b and c succeeded, and runs after both.
func testWorkflowDiamond(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	var log runLog
	gate := make(chan struct{})
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		if d.Job.To == "a" {
			<-gate
		}
		log.add(d.Job.To)
		return nil
	})
	ctx := context.Background()
	var w litequeue.Workflow
	a := w.Add(Email{To: "a"}, nil)
	bb := w.Add(Email{To: "b"}, nil)
	c := w.Add(Email{To: "c"}, nil)
	d := w.Add(Email{To: "d"}, nil)
	w.Needs(bb, a)
	w.Needs(c, a)
	w.Needs(d, bb, c)
	ids, err := h.Q.EnqueueWorkflow(ctx, &w)
	require.NoError(t, err)
	require.Len(t, ids, 4)
	require.Equal(t, litequeue.StateReady, jobState(t, h.Q, ids[a]).State)
	for _, n := range []litequeue.Node{bb, c, d} {
		require.Equal(t, litequeue.StateWaiting, jobState(t, h.Q, ids[n]).State)
	}
	require.Equal(t, 3, waitingCount(t, h.Q))
	waiting, err := h.Q.Jobs(ctx, litequeue.JobFilter{States: []litequeue.State{litequeue.StateWaiting}})
	require.NoError(t, err)
	require.Len(t, waiting, 3)

	h.start(t)
	h.Ev.Wait(t, litequeue.EventStarted, ids[a], 1)
	h.flush(t)
	require.Zero(t, h.Ev.Count(litequeue.EventStarted, ids[bb]), "b started before its parent succeeded")
	close(gate)
	h.Ev.Wait(t, litequeue.EventSucceeded, ids[d], 1)
	ran := log.get()
	require.Len(t, ran, 4)
	require.Equal(t, "a", ran[0])
	require.Equal(t, "d", ran[3])
	require.Zero(t, waitingCount(t, h.Q))
}

// a dies: b (needs a) and c (needs b) are cancelled with reasons naming
// their parent; d (after a) runs; e (needs d) runs.
func testWorkflowDeath(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.NoRetry())))
	var log runLog
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		log.add(d.Job.To)
		if d.Job.To == "a" {
			return litequeue.Permanent(errors.New("a fails"))
		}
		return nil
	})
	ctx := context.Background()
	var w litequeue.Workflow
	a := w.Add(Email{To: "a"}, nil)
	bb := w.Add(Email{To: "b"}, nil)
	c := w.Add(Email{To: "c"}, nil)
	d := w.Add(Email{To: "d"}, nil)
	e := w.Add(Email{To: "e"}, nil)
	w.Needs(bb, a)
	w.Needs(c, bb)
	w.After(d, a)
	w.Needs(e, d)
	ids, err := h.Q.EnqueueWorkflow(ctx, &w)
	require.NoError(t, err)
	h.start(t)
	h.Ev.Wait(t, litequeue.EventSucceeded, ids[e], 1)
	require.Equal(t, litequeue.StateDead, jobState(t, h.Q, ids[a]).State)
	jb := jobState(t, h.Q, ids[bb])
	require.Equal(t, litequeue.StateCancelled, jb.State)
	require.Contains(t, jb.DeadReason, "parent job")
	require.Contains(t, jb.DeadReason, "died")
	jc := jobState(t, h.Q, ids[c])
	require.Equal(t, litequeue.StateCancelled, jc.State)
	require.Contains(t, jc.DeadReason, "was cancelled")
	ran := log.get()
	require.NotContains(t, ran, "b")
	require.NotContains(t, ran, "c")
	require.Equal(t, []string{"a", "d", "e"}, ran)
	require.Zero(t, waitingCount(t, h.Q))
}

// Cancelling a scheduled parent cancels its dependant at once; cancelling a
// waiting node works and resolves its own dependants.
func testWorkflowCancel(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	ctx := context.Background()
	var w litequeue.Workflow
	a := w.Add(Email{To: "a"}, &litequeue.EnqueueOptions{Delay: 3600e9})
	bb := w.Add(Email{To: "b"}, nil)
	c := w.Add(Email{To: "c"}, nil)
	x := w.Add(Email{To: "x"}, &litequeue.EnqueueOptions{Delay: 3600e9})
	y := w.Add(Email{To: "y"}, nil)
	z := w.Add(Email{To: "z"}, nil)
	w.Needs(bb, a)
	w.Needs(c, bb)
	w.Needs(y, x)
	w.After(z, y)
	ids, err := h.Q.EnqueueWorkflow(ctx, &w)
	require.NoError(t, err)
	n, err := h.Q.Cancel(ctx, ids[a])
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, litequeue.StateCancelled, jobState(t, h.Q, ids[bb]).State)
	require.Equal(t, litequeue.StateCancelled, jobState(t, h.Q, ids[c]).State)
	// y waits; cancelling it makes z (after y) ready.
	_, err = h.Q.Cancel(ctx, ids[y])
	require.NoError(t, err)
	require.Equal(t, litequeue.StateReady, jobState(t, h.Q, ids[z]).State)
	require.Equal(t, litequeue.StateScheduled, jobState(t, h.Q, ids[x]).State)
	require.Zero(t, waitingCount(t, h.Q))
}

func testWorkflowInvalid(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	ctx := context.Background()
	cases := map[string]func(w *litequeue.Workflow){
		"empty": func(w *litequeue.Workflow) {},
		"cycle": func(w *litequeue.Workflow) {
			a, b, c := w.Add(Email{To: "a"}, nil), w.Add(Email{To: "b"}, nil), w.Add(Email{To: "c"}, nil)
			w.Needs(b, a)
			w.Needs(c, b)
			w.Needs(a, c)
		},
		"self": func(w *litequeue.Workflow) {
			a := w.Add(Email{To: "a"}, nil)
			w.Needs(a, a)
		},
		"unknown node": func(w *litequeue.Workflow) {
			a := w.Add(Email{To: "a"}, nil)
			w.Needs(a, litequeue.Node(7))
		},
		"twice": func(w *litequeue.Workflow) {
			a, b := w.Add(Email{To: "a"}, nil), w.Add(Email{To: "b"}, nil)
			w.Needs(b, a)
			w.After(b, a)
		},
		"key": func(w *litequeue.Workflow) {
			a, b := w.Add(Email{To: "a"}, nil), w.Add(Email{To: "b"}, &litequeue.EnqueueOptions{Key: "k"})
			w.Needs(b, a)
		},
	}
	for name, build := range cases {
		var w litequeue.Workflow
		build(&w)
		_, err := h.Q.EnqueueWorkflow(ctx, &w)
		require.ErrorIs(t, err, litequeue.ErrInvalidWorkflow, name)
	}
	// A bad job is the job's error, naming the node.
	var w litequeue.Workflow
	w.Add(Email{To: "a"}, nil)
	w.Add(Email{To: "b"}, &litequeue.EnqueueOptions{Delay: -1})
	_, err := h.Q.EnqueueWorkflow(ctx, &w)
	require.ErrorIs(t, err, litequeue.ErrInvalidJob)
	require.True(t, strings.Contains(err.Error(), "node 1"), err.Error())
	js, err := h.Q.Jobs(ctx, litequeue.JobFilter{})
	require.NoError(t, err)
	require.Empty(t, js, "a refused workflow wrote jobs")
}

// Sum is a job whose handler adds its parents' outputs.
type Sum struct {
	N int `json:"n"`
}

func (Sum) Kind() string { return "conformance_sum" }

// A fan-in: the child reads each parent's output by id, and all of them.
func testWorkflowOutputs(t *testing.T, b conformanceBackend) {
	h := setup(t, b, nil)
	var mu sync.Mutex
	var got int
	var parentsSeen []litequeue.ParentResult
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Sum]) error {
		if d.Job.N > 0 {
			return d.SetOutput(map[string]int{"n": d.Job.N})
		}
		ps, err := d.ParentResults(ctx)
		if err != nil {
			return err
		}
		total := 0
		for _, p := range ps {
			var out struct{ N int }
			if err := d.ParentOutput(ctx, p.ID, &out); err != nil {
				return err
			}
			total += out.N
		}
		if err := d.ParentOutput(ctx, d.ID, new(int)); !errors.Is(err, litequeue.ErrNoParentOutput) {
			return errors.New("ParentOutput of a non-parent did not refuse")
		}
		mu.Lock()
		got, parentsSeen = total, ps
		mu.Unlock()
		return nil
	})
	ctx := context.Background()
	var w litequeue.Workflow
	sum := w.Add(Sum{}, nil)
	for i := 1; i <= 5; i++ {
		w.Needs(sum, w.Add(Sum{N: i}, nil))
	}
	ids, err := h.Q.EnqueueWorkflow(ctx, &w)
	require.NoError(t, err)
	h.start(t)
	h.Ev.Wait(t, litequeue.EventSucceeded, ids[sum], 1)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 15, got)
	require.Len(t, parentsSeen, 5)
	for _, p := range parentsSeen {
		require.True(t, p.Succeeded)
		require.False(t, p.After)
	}
}

func testWorkflowTx(t *testing.T, b conformanceBackend) {
	if b.DB == nil {
		t.Skip("the backend has no DB for the caller's transactions")
	}
	h := setup(t, b, nil)
	db := b.DB(t, h.Addr)
	ctx := context.Background()
	build := func() *litequeue.Workflow {
		var w litequeue.Workflow
		a := w.Add(Email{To: "a"}, nil)
		w.Needs(w.Add(Email{To: "b"}, nil), a)
		return &w
	}
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = h.Q.EnqueueWorkflowTx(ctx, tx, build())
	require.NoError(t, err)
	require.NoError(t, tx.Rollback())
	js, err := h.Q.Jobs(ctx, litequeue.JobFilter{})
	require.NoError(t, err)
	require.Empty(t, js)

	tx, err = db.BeginTx(ctx, nil)
	require.NoError(t, err)
	ids, err := h.Q.EnqueueWorkflowTx(ctx, tx, build())
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	require.Equal(t, litequeue.StateWaiting, jobState(t, h.Q, ids[1]).State)
	var log runLog
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		log.add(d.Job.To)
		return nil
	})
	h.start(t)
	h.Ev.Wait(t, litequeue.EventSucceeded, ids[1], 1)
	require.Equal(t, []string{"a", "b"}, log.get())
}
