package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/litequeue/litequeue"
	"github.com/stretchr/testify/require"
)

// deadJobFile is a queue file (its queue stopped) with one dead letter of
// kind import, id 1, whose handler failed permanently with errText.
func deadJobFile(t *testing.T, errText string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "queue.db")
	mock := clock.NewMock()
	mock.Set(t0)
	dead := make(chan struct{}, 1)
	q, err := litequeue.Open(path, &litequeue.Options{Clock: mock, PollInterval: -1, OnEvent: func(e litequeue.Event) {
		if e.Type == litequeue.EventDead {
			dead <- struct{}{}
		}
	}})
	require.NoError(t, err)
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[Import]) error {
		return litequeue.Permanent(errors.New(errText))
	})
	ctx := context.Background()
	_, err = q.Enqueue(ctx, Import{File: "big.csv"}, nil)
	require.NoError(t, err)
	require.NoError(t, q.Start(ctx))
	select {
	case <-dead:
	case <-time.After(waitLimit):
		t.Fatal("the job did not die")
	}
	stopCtx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	require.NoError(t, q.Stop(stopCtx))
	require.NoError(t, q.Close())
	return path
}

// Tests of the operator items of issue 37, each through run(args…).

func TestStatsQueueShowsOneQueue(t *testing.T) {
	fx := newFixture(t)
	for _, args := range [][]string{
		{"stats", "--queue", "imports", fx.path},
		{"stats", fx.path, "--queue", "imports"},
		{"--queue", "imports", "stats", fx.path},
		{"stats", "--queue=imports", fx.path},
	} {
		r := lq(t, "", args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		require.Empty(t, r.stderr)
		require.Contains(t, r.stdout, "imports ")
		require.NotContains(t, r.stdout, "default")
		require.NotContains(t, r.stdout, "media")
	}

	// A queue no job names is an error with the queue it may have meant.
	r := lq(t, "", "stats", fx.path, "--queue", "imprts")
	require.Equal(t, exitError, r.code)
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, `no queue "imprts"`)
	require.Contains(t, r.stderr, `did you mean "imports"?`)

	// A flag of other commands is not answered with a command it resembles.
	r = lq(t, "", "plan", "--queue", "x")
	require.Equal(t, exitUsage, r.code)
	require.NotContains(t, r.stderr, "did you mean the command")
	require.Contains(t, r.stderr, "--queue is a flag of other commands, not of plan")
}

func TestShowNotFoundSaysWhatIsTrue(t *testing.T) {
	fx := newFixture(t)
	// A cancelled job is kept, and show shows it.
	r := lq(t, "", "cancel", fx.path, "7")
	require.Equal(t, 0, r.code, r.stderr)
	r = lq(t, "", "show", fx.path, "7")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `state:\s+cancelled`, r.stdout)

	r = lq(t, "", "show", fx.path, "99")
	require.Equal(t, exitError, r.code)
	require.NotContains(t, r.stderr, "been cancelled")
	require.Contains(t, r.stderr, "no job with id 99")
	require.Contains(t, r.stderr, "deleted")
	require.Contains(t, r.stderr, "cancelled jobs")
}

func TestShowLongErrorWholeWhileListsCutIt(t *testing.T) {
	long := "upstream said: " + strings.Repeat("0123456789", 60) + " END\nsecond line of the body END2"
	path := deadJobFile(t, long)

	r := lq(t, "", "show", path, "1")
	require.Equal(t, 0, r.code, r.stderr)
	attempts := r.stdout[strings.Index(r.stdout, "failed attempts:"):]
	require.Contains(t, attempts, "upstream said: "+strings.Repeat("0123456789", 60)+" END")
	require.Contains(t, attempts, "second line of the body END2")
	require.NotContains(t, r.stdout, "…")

	// Lists keep cutting the error to one short line.
	r = lq(t, "", "dead", path)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "…")
	require.NotContains(t, r.stdout, "END")
}
