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
	r := lq(t, "", "requeue", fx.path, "--all", "--queue", "imports", "--kind", "sync", "--yes")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "requeued 0 dead letters\n", r.stdout)

	r = lq(t, "", "requeue", fx.path, "--all", "--queue", "imports", "--kind", "import", "--json", "--yes")
	require.Equal(t, 0, r.code, r.stderr)
	var got map[string]int
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	require.Equal(t, map[string]int{"requeued": 3}, got)
	requireStates(t, fx.path, map[int64]litequeue.State{3: litequeue.StateReady, 4: litequeue.StateReady, 5: litequeue.StateReady})
}

func TestCancelMakesPendingJobsCancelled(t *testing.T) {
	fx := newFixture(t)
	r := lq(t, "", "cancel", fx.path, "1", "7")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "cancelled 2 jobs\n", r.stdout)
	requireStates(t, fx.path, map[int64]litequeue.State{1: litequeue.StateCancelled, 7: litequeue.StateCancelled, 2: litequeue.StateReady})
}

func TestCancelRefusesFinishedJobsAndChangesNothing(t *testing.T) {
	fx := newFixture(t)
	r := lq(t, "", "cancel", fx.path, "2", "9", "3")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "lqinspect cancel: cancel job 3: it is dead already: job is not in the required state; nothing was cancelled")
	requireStates(t, fx.path, map[int64]litequeue.State{2: litequeue.StateReady, 9: litequeue.StateRunning, 3: litequeue.StateDead})
	r = lq(t, "", "cancel", fx.path, "10")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "cancel job 10: it is completed already")
}

// Cancelling the running job 9 from lqinspect (another connection) makes it
// cancelled at once; its worker, whose handler ignores its context, notices
// at its next lease extension and drops the late result.
func TestCancelARunningJobFromLqinspect(t *testing.T) {
	fx := newFixture(t)
	r := lq(t, "", "cancel", fx.path, "9")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "cancelled 1 job\n", r.stdout)
	requireStates(t, fx.path, map[int64]litequeue.State{9: litequeue.StateCancelled})
	r = lq(t, "", "purge", fx.path, "--cancelled", "--yes")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "purged 1 cancelled job\n", r.stdout)
	requireStates(t, fx.path, map[int64]litequeue.State{9: ""})
}

func TestPauseAndResumeAQueue(t *testing.T) {
	fx := newFixture(t)
	r := lq(t, "", "pause", fx.path, "media")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "paused queue \"media\"\n", r.stdout)
	var got []map[string]any
	decode(t, &got, "stats", fx.path)
	var media map[string]any
	for _, s := range got {
		if s["queue"] == "media" {
			media = s
		}
	}
	require.Equal(t, true, media["paused"], got)
	r = lq(t, "", "stats", fx.path)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `media .* paused`, r.stdout)

	r = lq(t, "", "pause", fx.path, "nightly", "--create") // no jobs yet: allowed when asked for
	require.Equal(t, 0, r.code, r.stderr)
	r = lq(t, "", "stats", fx.path)
	require.Regexp(t, `nightly .* paused`, r.stdout)

	r = lq(t, "", "resume", fx.path, "media")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "resumed queue \"media\"\n", r.stdout)
	r = lq(t, "", "stats", fx.path)
	require.NotRegexp(t, `media .* paused`, r.stdout)

	r = lq(t, "", "pause", fx.path, "")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "pause: invalid job: empty queue name")
	r = lq(t, "", "pause", fx.path)
	require.Equal(t, 2, r.code)
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
	require.Contains(t, r.stderr, "not confirmed; nothing was changed")
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
	j, err := fx.q.Job(context.Background(), 8)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateCancelled, j.State)
	_, err = fx.q.Enqueue(context.Background(), SendEmail{To: "after"}, &litequeue.EnqueueOptions{Delay: time.Hour})
	require.NoError(t, err)
}
