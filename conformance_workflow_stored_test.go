package litequeue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// Workflows whose nodes depend on jobs already stored (Workflow.NeedsJob,
// Workflow.AfterJob).

func init() {
	tests = append(tests, []struct {
		name string
		fn   func(t *testing.T, b conformanceBackend)
	}{
		{"WorkflowNeedsJobRefusesAFinishedOrMissingParentWithNothingWritten", testWorkflowStoredRefused},
		{"WorkflowNeedsJobAndAfterJobWaitForAStoredJobsOutcome", testWorkflowStoredOutcomes},
		{"WorkflowNeedsJobOnAParentCompletingConcurrentlyNeverWaitsForever", testWorkflowStoredRace},
		{"WorkflowDeletingJobsLeavesNoOrphanEdgeAndNoDependantWaitingForADeletedParent", testWorkflowDeleted},
		{"WorkflowRequeueCancelledDependantWaitsAgainOrIsRefusedWhenAParentFailed", testWorkflowRequeueCancelled},
	}...)
}

// A stored parent that does not exist or has finished (succeeded and
// deleted, dead, cancelled) is refused, for NeedsJob and AfterJob alike,
// with ErrParentNotLive (also ErrInvalidWorkflow) naming the node and the
// job; nothing is written.
func testWorkflowStoredRefused(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.NoRetry())))
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		if d.Job.To == "dies" {
			return litequeue.Permanent(errors.New("dies"))
		}
		return nil
	})
	ctx := context.Background()
	done, err := h.Q.Enqueue(ctx, Email{To: "done"}, nil)
	require.NoError(t, err)
	dead, err := h.Q.Enqueue(ctx, Email{To: "dies"}, nil)
	require.NoError(t, err)
	cancelled, err := h.Q.Enqueue(ctx, Email{To: "cancelled"}, &litequeue.EnqueueOptions{Delay: 3600e9})
	require.NoError(t, err)
	_, err = h.Q.Cancel(ctx, cancelled)
	require.NoError(t, err)
	live, err := h.Q.Enqueue(ctx, Email{To: "live"}, &litequeue.EnqueueOptions{Delay: 3600e9})
	require.NoError(t, err)
	h.start(t)
	h.Ev.Wait(t, litequeue.EventSucceeded, done, 1)
	h.Ev.Wait(t, litequeue.EventDead, dead, 1)
	h.flush(t)
	before, err := h.Q.Jobs(ctx, litequeue.JobFilter{})
	require.NoError(t, err)

	for _, parent := range []int64{done, dead, cancelled, 1 << 40} {
		for _, after := range []bool{false, true} {
			var w litequeue.Workflow
			root := w.Add(Email{To: "root"}, nil)
			child := w.Add(Email{To: "child"}, nil)
			w.Needs(child, root)
			if after {
				w.AfterJob(child, live, parent)
			} else {
				w.NeedsJob(child, live, parent)
			}
			_, err := h.Q.EnqueueWorkflow(ctx, &w)
			require.ErrorIs(t, err, litequeue.ErrParentNotLive, "parent %d", parent)
			require.ErrorIs(t, err, litequeue.ErrInvalidWorkflow)
			require.Contains(t, err.Error(), "node 1")
			require.Contains(t, err.Error(), fmt.Sprint(parent))
		}
	}
	// Bad ids are refused before the store sees them.
	var w litequeue.Workflow
	a := w.Add(Email{To: "a"}, nil)
	w.NeedsJob(a, live, live)
	_, err = h.Q.EnqueueWorkflow(ctx, &w)
	require.ErrorIs(t, err, litequeue.ErrInvalidWorkflow)
	require.True(t, strings.Contains(err.Error(), "twice"), err.Error())

	after, err := h.Q.Jobs(ctx, litequeue.JobFilter{})
	require.NoError(t, err)
	require.Equal(t, len(before), len(after), "a refused workflow wrote jobs")
	require.Equal(t, litequeue.StateScheduled, jobState(t, h.Q, live).State)
	nodes, err := h.Q.Workflow(ctx, live)
	require.NoError(t, err)
	require.Len(t, nodes, 1, "a refused workflow left an edge to the live parent")
}

// A node that needs a stored job waits for it, runs after its success and
// reads its output; a node that needs a stored job that dies is cancelled
// naming it, and one after it runs.
func testWorkflowStoredOutcomes(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.NoRetry())))
	var log runLog
	var mu sync.Mutex
	var childSaw []litequeue.ParentResult
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		log.add(d.Job.To)
		switch d.Job.To {
		case "dies":
			return litequeue.Permanent(errors.New("dies"))
		case "import":
			return d.SetOutput("imported")
		case "email":
			ps, err := d.ParentResults(ctx)
			mu.Lock()
			childSaw = ps
			mu.Unlock()
			return err
		}
		return nil
	})
	ctx := context.Background()
	imp, err := h.Q.Enqueue(ctx, Email{To: "import"}, nil)
	require.NoError(t, err)
	dies, err := h.Q.Enqueue(ctx, Email{To: "dies"}, nil)
	require.NoError(t, err)
	var w litequeue.Workflow
	email := w.Add(Email{To: "email"}, nil)
	needsDead := w.Add(Email{To: "needs-dead"}, nil)
	afterDead := w.Add(Email{To: "after-dead"}, nil)
	w.NeedsJob(email, imp)
	w.NeedsJob(needsDead, dies)
	w.AfterJob(afterDead, dies)
	ids, err := h.Q.EnqueueWorkflow(ctx, &w)
	require.NoError(t, err)
	for _, n := range []litequeue.Node{email, needsDead, afterDead} {
		require.Equal(t, litequeue.StateWaiting, jobState(t, h.Q, ids[n]).State)
	}
	h.start(t)
	h.Ev.Wait(t, litequeue.EventSucceeded, ids[email], 1)
	h.Ev.Wait(t, litequeue.EventSucceeded, ids[afterDead], 1)
	h.flush(t)
	ran := log.get()
	require.Less(t, slicesIndex(ran, "import"), slicesIndex(ran, "email"))
	require.NotContains(t, ran, "needs-dead")
	jn := jobState(t, h.Q, ids[needsDead])
	require.Equal(t, litequeue.StateCancelled, jn.State)
	require.Contains(t, jn.DeadReason, fmt.Sprintf("parent job %d died", dies))
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, childSaw, 1)
	require.Equal(t, imp, childSaw[0].ID)
	require.True(t, childSaw[0].Succeeded)
	require.Equal(t, `"imported"`, string(childSaw[0].Output))
	require.Zero(t, waitingCount(t, h.Q))
}

func slicesIndex(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// The race: a parent, already running (its delivery claimed before any
// edge to it existed), succeeds — or, in the second round, dies — while
// several goroutines keep adding workflows that need it. Every add is
// either refused (ErrParentNotLive) or resolved by the parent's outcome:
// no child is left waiting.
func testWorkflowStoredRace(t *testing.T, b conformanceBackend) {
	for _, dies := range []bool{false, true} {
		t.Run(fmt.Sprintf("dies=%v", dies), func(t *testing.T) {
			h := setup(t, b, queues(queue(litequeue.NoRetry())))
			release := make(chan struct{})
			litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
				if d.Job.To == "parent" {
					<-release
					if dies {
						return litequeue.Permanent(errors.New("dies"))
					}
				}
				return nil
			})
			ctx := context.Background()
			parent, err := h.Q.Enqueue(ctx, Email{To: "parent"}, nil)
			require.NoError(t, err)
			h.start(t)
			h.Ev.Wait(t, litequeue.EventStarted, parent, 1)

			const adders, perAdder = 4, 40
			var mu sync.Mutex
			var added []int64
			refused := 0
			var wg sync.WaitGroup
			errs := make(chan error, adders)
			for g := range adders {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range perAdder {
						if g == 0 && i == perAdder/4 {
							close(release)
						}
						var w litequeue.Workflow
						c := w.Add(Email{To: "child"}, nil)
						w.NeedsJob(c, parent)
						ids, err := h.Q.EnqueueWorkflow(ctx, &w)
						mu.Lock()
						switch {
						case err == nil:
							added = append(added, ids[c])
						case errors.Is(err, litequeue.ErrParentNotLive):
							refused++
						default:
							mu.Unlock()
							errs <- err
							return
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			if dies {
				h.Ev.Wait(t, litequeue.EventDead, parent, 1)
			} else {
				h.Ev.Wait(t, litequeue.EventSucceeded, parent, 1)
			}
			t.Logf("%d children added, %d refused", len(added), refused)
			require.NotEmpty(t, added, "no child was added while the parent ran")
			require.NotZero(t, refused, "no child was refused after the parent finished")
			for _, id := range added {
				if dies {
					waitState(t, h.Q, id, litequeue.StateCancelled)
				} else {
					h.Ev.Wait(t, litequeue.EventSucceeded, id, 1)
				}
			}
			h.flush(t)
			require.Zero(t, waitingCount(t, h.Q), "a child of a finished parent still waits")
		})
	}
}

// waitState waits (bounded, in real time) until job id is in state st.
func waitState(t *testing.T, q *litequeue.Queue, id int64, st litequeue.State) {
	t.Helper()
	require.Eventually(t, func() bool {
		j, err := q.Job(context.Background(), id)
		return err == nil && j.State == st
	}, 10e9, 5e6, "job %d never became %s", id, st)
}

// Deleting jobs deletes their edges as children, and a live parent deleted
// (a unique job replaced) cancels its dependants as a cancel would, naming
// it: DeleteJobs (PurgeDead), PurgeCancelled leave no edge row behind and
// no job waits for a deleted parent.
func testWorkflowDeleted(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.NoRetry())))
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		if d.Job.To == "a" {
			return litequeue.Permanent(errors.New("a fails"))
		}
		return nil
	})
	ctx := context.Background()
	// The edge rows, counted where the backend gives a DB (-1 elsewhere).
	edges := func() int {
		if b.DB == nil {
			return -1
		}
		var n int
		require.NoError(t, b.DB(t, h.Addr).QueryRowContext(ctx, `SELECT count(*) FROM lq_deps`).Scan(&n))
		return n
	}
	// a dies: b (needs a) is cancelled, c (after a) runs.
	var w litequeue.Workflow
	a := w.Add(Email{To: "a"}, nil)
	bb := w.Add(Email{To: "b"}, nil)
	c := w.Add(Email{To: "c"}, nil)
	w.Needs(bb, a)
	w.After(c, a)
	ids, err := h.Q.EnqueueWorkflow(ctx, &w)
	require.NoError(t, err)

	// A scheduled unique job, parent of a stored workflow's node, replaced
	// by its twin: the node is cancelled, naming it.
	uniq := &litequeue.EnqueueOptions{Delay: 3600e9, Unique: &litequeue.UniqueOptions{OnConflict: litequeue.ConflictReplace}}
	p, err := h.Q.Enqueue(ctx, Email{To: "unique"}, uniq)
	require.NoError(t, err)
	var w2 litequeue.Workflow
	child := w2.Add(Email{To: "child"}, nil)
	w2.NeedsJob(child, p)
	ids2, err := h.Q.EnqueueWorkflow(ctx, &w2)
	require.NoError(t, err)
	p2, err := h.Q.Enqueue(ctx, Email{To: "unique"}, uniq)
	require.NoError(t, err)
	require.NotEqual(t, p, p2)
	_, err = h.Q.Job(ctx, p)
	require.ErrorIs(t, err, litequeue.ErrNotFound)
	jc := jobState(t, h.Q, ids2[child])
	require.Equal(t, litequeue.StateCancelled, jc.State)
	require.Contains(t, jc.DeadReason, fmt.Sprintf("workflow: parent job %d was deleted", p))

	h.start(t)
	h.Ev.Wait(t, litequeue.EventSucceeded, ids[c], 1)
	h.flush(t)
	require.Equal(t, litequeue.StateCancelled, jobState(t, h.Q, ids[bb]).State)
	if n := edges(); n >= 0 {
		require.Equal(t, 2, n, "edges before the deletes: b<-a and child<-p (c's went with its success)")
	}

	n, err := h.Q.DeleteJobs(ctx, litequeue.JobQuery{States: []litequeue.State{litequeue.StateDead}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	h.Clock.Add(time.Minute)
	n, err = h.Q.PurgeCancelled(ctx, time.Second)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	if n := edges(); n >= 0 {
		require.Zero(t, n, "edge rows of deleted jobs remain")
	}
	require.Zero(t, waitingCount(t, h.Q))
}

// RequeueCancelled of a workflow's cancelled dependant: refused with
// ErrParentFailed (nothing changed) when a parent it needs died; back to
// waiting for its live parents when the others succeeded; and requeueing a
// cancelled parent brings back the dependants its cancel cancelled.
func testWorkflowRequeueCancelled(t *testing.T, b conformanceBackend) {
	h := setup(t, b, queues(queue(litequeue.NoRetry())))
	litequeue.Register(h.Q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		if d.Job.To == "dies" {
			return litequeue.Permanent(errors.New("dies"))
		}
		return nil
	})
	ctx := context.Background()
	var w litequeue.Workflow
	dies := w.Add(Email{To: "dies"}, nil)
	blocked := w.Add(Email{To: "blocked"}, nil)
	w.Needs(blocked, dies)
	p1 := w.Add(Email{To: "p1"}, nil)
	p2 := w.Add(Email{To: "p2"}, &litequeue.EnqueueOptions{Delay: 3600e9})
	c := w.Add(Email{To: "c"}, nil)
	w.Needs(c, p1, p2)
	x := w.Add(Email{To: "x"}, &litequeue.EnqueueOptions{Delay: 3600e9})
	y := w.Add(Email{To: "y"}, nil)
	z := w.Add(Email{To: "z"}, nil)
	w.Needs(y, x)
	w.Needs(z, y)
	ids, err := h.Q.EnqueueWorkflow(ctx, &w)
	require.NoError(t, err)
	_, err = h.Q.Cancel(ctx, ids[c], ids[x])
	require.NoError(t, err)
	require.Equal(t, litequeue.StateCancelled, jobState(t, h.Q, ids[y]).State)
	require.Equal(t, litequeue.StateCancelled, jobState(t, h.Q, ids[z]).State)
	h.start(t)
	h.Ev.Wait(t, litequeue.EventDead, ids[dies], 1)
	h.Ev.Wait(t, litequeue.EventSucceeded, ids[p1], 1)
	h.flush(t)
	require.Equal(t, litequeue.StateCancelled, jobState(t, h.Q, ids[blocked]).State)

	// blocked needs dies, which died: refused, nothing changed (c too).
	n, err := h.Q.RequeueCancelled(ctx, ids[c], ids[blocked])
	require.ErrorIs(t, err, litequeue.ErrParentFailed)
	require.Contains(t, err.Error(), fmt.Sprint(ids[dies]))
	require.Zero(t, n)
	require.Equal(t, litequeue.StateCancelled, jobState(t, h.Q, ids[blocked]).State)
	require.Equal(t, litequeue.StateCancelled, jobState(t, h.Q, ids[c]).State)

	// c: p1 succeeded, p2 is live: c waits for p2 only, then runs.
	n, err = h.Q.RequeueCancelled(ctx, ids[c])
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, litequeue.StateWaiting, jobState(t, h.Q, ids[c]).State)
	nodes, err := h.Q.Workflow(ctx, ids[c])
	require.NoError(t, err)
	for _, nd := range nodes {
		if nd.ID == ids[c] {
			require.Contains(t, nd.Waits(nodes), "waits for 1 of 2 parents")
		}
	}
	require.NoError(t, h.Q.RunNow(ctx, ids[p2]))
	h.Ev.Wait(t, litequeue.EventSucceeded, ids[c], 1)

	// x's cancel cancelled y and z; requeueing x brings them back.
	n, err = h.Q.RequeueCancelled(ctx, ids[x])
	require.NoError(t, err)
	require.Equal(t, 1, n)
	h.Ev.Wait(t, litequeue.EventSucceeded, ids[z], 1)
	h.flush(t)
	require.Zero(t, waitingCount(t, h.Q))
}
