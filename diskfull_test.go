package litequeue

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDiskFullFailsEnqueuesClearlyAndRecovers(t *testing.T) {
	// 8 MiB, all but 1.5 MiB taken by a ballast file: the WAL grows to 4
	// MiB before SQLite checkpoints it, so the queue needs that much room
	// to run once space is freed.
	dir := mountTmpfs(t, "size=8m")
	ballast := filepath.Join(dir, "ballast")
	require.NoError(t, os.WriteFile(ballast, make([]byte, 6<<20+512<<10), 0o644))
	tc := newTestClock()
	h := &harness{clock: tc, tc: tc, ev: newEvents(), path: filepath.Join(dir, "q.db")}
	h.opts = Options{Clock: h.clock, OnEvent: h.ev.add, PollInterval: -1}
	q, err := Open(h.path, &h.opts)
	require.NoError(t, err)
	h.q = q
	t.Cleanup(func() {
		require.NoError(t, h.q.Close())
		checkInvariants(t, h.path)
	})
	ctx := context.Background()
	pad := strings.Repeat("x", 2000)
	var ids []int64
	var full error
	for i := 0; i < 10_000 && full == nil; i++ {
		var id int64
		if i%2 == 0 {
			id, full = h.q.Enqueue(ctx, SendEmail{To: pad}, nil)
			if full == nil {
				ids = append(ids, id)
			}
		} else {
			var got []int64
			got, full = h.q.EnqueueBatch(ctx, []BatchItem{{Job: SendEmail{To: pad}}, {Job: SendEmail{To: pad}}})
			ids = append(ids, got...)
		}
	}
	require.Error(t, full, "2 MiB never filled up")
	// A batch of two that did not fit may leave room for one more job (where
	// the boundary falls depends on the schema's pages): fill it, so that
	// the one-job enqueue below meets a full disk.
	for range 10 {
		id, err := h.q.Enqueue(ctx, SendEmail{To: pad}, nil)
		if err != nil {
			break
		}
		ids = append(ids, id)
	}
	require.ErrorIs(t, full, ErrStorageFull)
	require.ErrorContains(t, full, "full")
	t.Logf("full after %d jobs: %v", len(ids), full)
	// Still full: a second try as large as a batch fails the same way, and
	// reads work.
	_, err = h.q.EnqueueBatch(ctx, []BatchItem{{Job: SendEmail{To: pad}}, {Job: SendEmail{To: pad}}})
	require.ErrorIs(t, err, ErrStorageFull)
	requireJobs(t, h.q, ids)

	// Free space: the queue takes jobs again and runs all of them.
	require.NoError(t, os.Remove(ballast))
	more, err := h.q.Enqueue(ctx, SendEmail{To: pad}, nil)
	require.NoError(t, err)
	ids = append(ids, more)
	requireJobs(t, h.q, ids)
	Register(h.q, func(ctx context.Context, d *Delivery[SendEmail]) error { return nil })
	h.start(t)
	h.ev.wait(t, EventSucceeded, 0, len(ids))
}

// requireJobs requires that exactly ids are stored, ready.
func requireJobs(t *testing.T, q *Queue, ids []int64) {
	t.Helper()
	jobs, err := q.Jobs(context.Background(), JobFilter{Limit: -1, States: []State{StateReady}})
	require.NoError(t, err)
	got := map[int64]bool{}
	for _, j := range jobs {
		got[j.ID] = true
	}
	require.Len(t, got, len(ids))
	for _, id := range ids {
		require.True(t, got[id], "accepted job %d is lost", id)
	}
}
