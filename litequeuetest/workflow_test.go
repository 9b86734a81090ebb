package litequeuetest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/litequeuetest"
	"github.com/stretchr/testify/require"
)

// Step is a workflow node of the kit's tests.
type Step struct {
	Name string `json:"name"`
}

func (Step) Kind() string { return "step" }

// stepLog records the handler calls of Step jobs with the kit's time.
type stepLog struct {
	mu    sync.Mutex
	calls []string
	at    map[string]time.Time
}

func newStepKit(t *testing.T, fail func(name string, attempt int) error) (*litequeuetest.Kit, *stepLog) {
	k := litequeuetest.New(t, &litequeue.Options{Queues: []litequeue.QueueConfig{{Name: litequeue.DefaultQueue,
		Retry: litequeue.FixedRetry(5, time.Hour), VisibilityTimeout: 10 * time.Minute}}})
	l := &stepLog{at: map[string]time.Time{}}
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[Step]) error {
		l.mu.Lock()
		l.calls = append(l.calls, d.Job.Name)
		l.at[d.Job.Name] = k.Clock.Now()
		l.mu.Unlock()
		if err := fail(d.Job.Name, d.Attempt); err != nil {
			return err
		}
		return d.SetOutput(d.Job.Name + " done")
	})
	return k, l
}

// A workflow runs in virtual time: the parent's hour of backoff passes on
// the kit's clock in one Drain, and the child starts only after it.
func TestWorkflowDrainsInVirtualTime(t *testing.T) {
	k, l := newStepKit(t, func(name string, attempt int) error {
		if name == "fetch" && attempt == 1 {
			return errors.New("upstream down")
		}
		return nil
	})
	ctx := context.Background()
	var w litequeue.Workflow
	fetch := w.Add(Step{Name: "fetch"}, nil)
	w.Needs(w.Add(Step{Name: "report"}, nil), fetch)
	began := k.Clock.Now()
	ids, err := k.Queue.EnqueueWorkflow(ctx, &w)
	require.NoError(t, err)
	res, err := k.Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"fetch", "fetch", "report"}, l.calls)
	require.Equal(t, time.Hour, l.at["report"].Sub(began), "the child ran at the parent's retry, an hour of virtual time later")
	require.Equal(t, time.Hour, res.Elapsed)
	_, err = k.Queue.Job(ctx, ids[1])
	require.ErrorIs(t, err, litequeue.ErrNotFound, "the child succeeded and its row was deleted")
}

// A crash between a parent's success and its child's start: the parent's
// success is lost with its process (LoseOutcome), so the child does not
// start; the parent comes back when its lease ends, succeeds, and the child
// runs once, after it.
func TestWorkflowCrashAfterTheParentsSuccessLosesNothingAndRunsNothingTwice(t *testing.T) {
	k, l := newStepKit(t, func(string, int) error { return nil })
	ctx := context.Background()
	var w litequeue.Workflow
	parent := w.Add(Step{Name: "parent"}, nil)
	w.Needs(w.Add(Step{Name: "child"}, nil), parent)
	began := k.Clock.Now()
	ids, err := k.Queue.EnqueueWorkflow(ctx, &w)
	require.NoError(t, err)
	k.LoseOutcome(ids[parent])
	res, err := k.Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"parent", "parent", "child"}, l.calls)
	require.Equal(t, 1, res.Lost)
	require.Equal(t, 10*time.Minute, l.at["child"].Sub(began), "the child waited for the parent's second, recorded success")
}
