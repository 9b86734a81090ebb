package litequeue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Live control across real processes: a job cancelled, and a queue paused,
// by one process while another runs the queue's workers.

// CtlJob runs in helper processes of role "control". A blocking one waits
// for its context to end and records why: K for ErrJobCancelled, O for any
// other cause.
type CtlJob struct {
	Block bool `json:"block,omitempty"`
	N     int  `json:"n,omitempty"`
}

func (CtlJob) Kind() string      { return "ctl_job" }
func (CtlJob) QueueName() string { return "proc" }

// helperControl runs CtlJob handlers until stdin closes, recording S when an
// attempt starts, C when it succeeds, and K or O when a blocking one ends.
func helperControl(cfg helperConfig) error {
	fails := &helperFailures{}
	q, err := Open(cfg.Path, helperOptions(cfg, fails))
	if err != nil {
		return err
	}
	l, err := openSideLog(cfg.Log, true)
	if err != nil {
		return err
	}
	Register(q, func(ctx context.Context, d *Delivery[CtlJob]) error {
		if err := l.record("S", d.ID, d.Attempt, d.Kind, true); err != nil {
			fails.add(err)
		}
		if !d.Job.Block {
			return l.record("C", d.ID, d.Attempt, d.Kind, true)
		}
		<-ctx.Done()
		op := "O"
		if errors.Is(context.Cause(ctx), ErrJobCancelled) {
			op = "K"
		}
		if err := l.record(op, d.ID, d.Attempt, d.Kind, true); err != nil {
			fails.add(err)
		}
		return ctx.Err()
	})
	if err := q.Start(context.Background()); err != nil {
		return err
	}
	fmt.Println("ready")
	_, err = io.Copy(io.Discard, os.Stdin)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return errors.Join(err, q.Stop(ctx), q.Close(), fails.err())
}

// waitRecord waits (in real time, bounded by procWait) until the side log
// at path holds a record op of job id.
func waitRecord(t *testing.T, path, op string, id int64) record {
	t.Helper()
	var found record
	err := poll(*procWait, 5*time.Millisecond, func() (bool, error) {
		for _, r := range readSideLog(t, path) {
			if r.op == op && r.id == id {
				found = r
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s record of job %d: %v: %v", op, id, err, readSideLog(t, path))
	}
	return found
}

func controlConfig(t *testing.T) helperConfig {
	dir := t.TempDir()
	return helperConfig{Path: filepath.Join(dir, "q.db"), Log: filepath.Join(dir, "side.log"),
		Concurrency: 2, Visibility: time.Minute, ClaimBatch: 10, Attempts: 3}
}

// A job running in another process is cancelled from this one: the
// worker's handler sees ErrJobCancelled within its poll interval (its
// lease extension, 20s away, plays no part), and the job ends cancelled,
// not retried.
func TestCancelARunningJobInAnotherProcess(t *testing.T) {
	cfg := controlConfig(t)
	q, err := Open(cfg.Path, &Options{PollInterval: -1})
	require.NoError(t, err)
	defer q.Close()
	ctx := context.Background()
	id, err := q.Enqueue(ctx, CtlJob{Block: true}, nil)
	require.NoError(t, err)

	worker := startProc(t, "control", cfg)
	worker.waitReady()
	waitRecord(t, cfg.Log, "S", id)
	n, err := q.Cancel(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	r := waitRecord(t, cfg.Log, "K", id)
	require.Equal(t, worker.pid(), r.pid)
	worker.stop()

	j, err := q.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, StateCancelled, j.State)
	require.Equal(t, 1, j.Attempt)
	require.Empty(t, j.Attempts, "no failed attempt was recorded")
	for _, r := range readSideLog(t, cfg.Log) {
		require.NotEqual(t, "O", r.op, "the handler saw another cause: %v", r)
		require.Equal(t, 1, r.attempt, "not retried: %v", r)
	}
}

// A queue paused by this process holds the jobs of a worker in another
// process, also across that worker's restart, until Resume.
func TestPauseIsSeenByAnotherProcess(t *testing.T) {
	cfg := controlConfig(t)
	q, err := Open(cfg.Path, &Options{PollInterval: -1})
	require.NoError(t, err)
	defer q.Close()
	ctx := context.Background()
	worker := startProc(t, "control", cfg)
	worker.waitReady()
	warm, err := q.Enqueue(ctx, CtlJob{}, nil)
	require.NoError(t, err)
	waitRecord(t, cfg.Log, "C", warm) // the worker is up and claiming

	require.NoError(t, q.Pause(ctx, "proc"))
	var ids []int64
	for i := range 3 {
		id, err := q.Enqueue(ctx, CtlJob{N: i}, nil)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	// A bounded real-time wait of many poll intervals (5ms each): nothing
	// may start meanwhile. (It cannot fail spuriously: only a bug starts a
	// job of a paused queue.)
	held := func() {
		t.Helper()
		time.Sleep(200 * time.Millisecond)
		for _, r := range readSideLog(t, cfg.Log) {
			require.False(t, slices.Contains(ids, r.id), "job %d of the paused queue started: %v", r.id, r)
		}
		st, err := q.Stats(ctx)
		require.NoError(t, err)
		require.Len(t, st, 1)
		require.True(t, st[0].Paused)
		require.Equal(t, 3, st[0].Ready)
	}
	held()
	worker.stop()
	worker = startProc(t, "control", cfg) // a restart: still paused
	worker.waitReady()
	held()

	require.NoError(t, q.Resume(ctx, "proc"))
	for _, id := range ids {
		waitRecord(t, cfg.Log, "C", id)
	}
	worker.stop()
}
