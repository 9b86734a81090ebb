package main

import (
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/litequeue/litequeue"
	"github.com/stretchr/testify/require"
)

// libraryView opens path read-only, as the library sees it at fixtureNow.
func libraryView(t *testing.T, path string) *litequeue.Queue {
	t.Helper()
	mock := clock.NewMock()
	mock.Set(fixtureNow)
	q, err := litequeue.Open(path, &litequeue.Options{ReadOnly: true, Clock: mock})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, q.Close()) })
	return q
}

// requireStates checks each job's state through the library; the state ""
// means the job no longer exists.
func requireStates(t *testing.T, path string, want map[int64]litequeue.State) {
	t.Helper()
	q := libraryView(t, path)
	got := map[int64]litequeue.State{}
	for id := range want {
		j, err := q.Job(context.Background(), id)
		if err != nil {
			require.ErrorIs(t, err, litequeue.ErrNotFound)
		}
		got[id] = j.State
	}
	require.Equal(t, want, got)
}

func TestRequeueMovesDeadLettersBackToReadyWithAttemptsReset(t *testing.T) {
	fx := newFixture(t)
	r := lq(t, "", "requeue", fx.path, "3", "4")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "requeued 2 dead letters\n", r.stdout)
	q := libraryView(t, fx.path)
	for _, id := range []int64{3, 4} {
		j, err := q.Job(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, litequeue.StateReady, j.State)
		require.Zero(t, j.Attempt)
		require.Equal(t, fixtureNow, j.VisibleAt.UTC())
		require.Len(t, j.Attempts, 1, "the history is kept")
	}
	requireStates(t, fx.path, map[int64]litequeue.State{5: litequeue.StateDead})
}

func TestRequeueIsAllOrNothing(t *testing.T) {
	fx := newFixture(t)
	r := lq(t, "", "requeue", fx.path, "5", "1")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "requeue job 1: it is ready, not dead")
	requireStates(t, fx.path, map[int64]litequeue.State{5: litequeue.StateDead, 1: litequeue.StateReady})
}

func TestRequeueAllByQueueAndKind(t *testing.T) {
	fx := newFixture(t)
	r := lq(t, "", "requeue", fx.path, "--all", "--queue", "imports", "--kind", "sync")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "requeued 0 dead letters\n", r.stdout)

	r = lq(t, "", "requeue", fx.path, "--all", "--queue", "imports", "--kind", "import", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var got map[string]int
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	require.Equal(t, map[string]int{"requeued": 3}, got)
	requireStates(t, fx.path, map[int64]litequeue.State{3: litequeue.StateReady, 4: litequeue.StateReady, 5: litequeue.StateReady})
}

func TestCancelRemovesPendingJobs(t *testing.T) {
	fx := newFixture(t)
	r := lq(t, "", "cancel", fx.path, "1", "7")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "cancelled 2 jobs\n", r.stdout)
	requireStates(t, fx.path, map[int64]litequeue.State{1: "", 7: "", 2: litequeue.StateReady})
}

func TestCancelRefusesRunningJobsAndChangesNothing(t *testing.T) {
	fx := newFixture(t)
	r := lq(t, "", "cancel", fx.path, "2", "9")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "lqinspect cancel: cancel job 9: job is running; wait for it to finish, or stop its worker first; nothing was cancelled")
	r = lq(t, "", "cancel", fx.path, "3")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "cancel job 3: it is dead")
	requireStates(t, fx.path, map[int64]litequeue.State{2: litequeue.StateReady, 9: litequeue.StateRunning, 3: litequeue.StateDead})
}

func TestPurgeDeadLetters(t *testing.T) {
	fx := newFixture(t)
	r := lq(t, "", "purge", fx.path, "--dead", "--yes", "3")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "purged 1 dead letter\n", r.stdout)
	requireStates(t, fx.path, map[int64]litequeue.State{3: "", 4: litequeue.StateDead, 5: litequeue.StateDead})

	// They died 10s before fixtureNow.
	r = lq(t, "", "purge", fx.path, "--dead", "--yes", "--queue", "imports", "--older-than", "1m")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "purged 0 dead letters\n", r.stdout)
	r = lq(t, "", "purge", fx.path, "--dead", "--yes", "--queue", "imports", "--older-than", "5s")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "purged 2 dead letters\n", r.stdout)
	requireStates(t, fx.path, map[int64]litequeue.State{4: "", 5: "", 6: litequeue.StateScheduled, 10: litequeue.StateCompleted})
}

func TestPurgeByIDRefusesJobsThatAreNotDead(t *testing.T) {
	fx := newFixture(t)
	r := lq(t, "", "purge", fx.path, "--dead", "--yes", "3", "1")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "job 1 is ready, not a dead letter")
	requireStates(t, fx.path, map[int64]litequeue.State{3: litequeue.StateDead, 1: litequeue.StateReady})
}

func TestPurgeCompleted(t *testing.T) {
	fx := newFixture(t)
	r := lq(t, "", "purge", fx.path, "--completed", "--yes", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"purged": 1}`, r.stdout)
	requireStates(t, fx.path, map[int64]litequeue.State{10: "", 3: litequeue.StateDead})
}

func TestPurgeAsksOnATerminal(t *testing.T) {
	fx := newFixture(t)
	terminal := func(a *app) { a.isTerminal = func(io.Reader) bool { return true } }

	r := lqApp(t, terminal, "n\n", "purge", fx.path, "--dead", "--kind", "import")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, `Delete dead letters of kind "import" (all of them) from `+fx.path+"? [y/N]")
	require.Contains(t, r.stderr, "not confirmed; nothing was deleted")
	requireStates(t, fx.path, map[int64]litequeue.State{3: litequeue.StateDead})

	r = lqApp(t, terminal, "", "purge", fx.path, "--dead")
	require.Equal(t, 1, r.code, "end of input is no")

	r = lqApp(t, terminal, "yes\n", "purge", fx.path, "--dead", "--older-than", "5s", "3", "4")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stderr, "Delete dead letters [3 4] older than 5s from")
	require.Equal(t, "purged 2 dead letters\n", r.stdout)
	requireStates(t, fx.path, map[int64]litequeue.State{3: "", 4: "", 5: litequeue.StateDead})
}

func TestMutatingCommandsWorkWhileTheApplicationRuns(t *testing.T) {
	fx := newFixture(t) // its queue is started, with job 9 running
	r := lq(t, "", "cancel", fx.path, "8")
	require.Equal(t, 0, r.code, r.stderr)
	// The application's own queue sees the change.
	_, err := fx.q.Job(context.Background(), 8)
	require.ErrorIs(t, err, litequeue.ErrNotFound)
	_, err = fx.q.Enqueue(context.Background(), SendEmail{To: "after"}, &litequeue.EnqueueOptions{Delay: time.Hour})
	require.NoError(t, err)
}
