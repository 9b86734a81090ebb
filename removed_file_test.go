package litequeue

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRemovedFileStopsEnqueuesAndComesBack moves the queue file away under
// a running queue: enqueues fail with ErrFileReplaced instead of going into
// a file no one can open again, and work again once the file is back.
func TestRemovedFileStopsEnqueuesAndComesBack(t *testing.T) {
	h := setup(t, nil)
	ctx := context.Background()
	var acked []int64
	for range 20 {
		id, err := h.q.Enqueue(ctx, SendEmail{To: "a"}, nil)
		require.NoError(t, err)
		acked = append(acked, id)
	}
	away := filepath.Join(filepath.Dir(h.path), "moved.db")
	require.NoError(t, os.Rename(h.path, away))
	_, err := h.q.Enqueue(ctx, SendEmail{To: "lost?"}, nil)
	require.ErrorIs(t, err, ErrFileReplaced)
	require.ErrorContains(t, err, "removed")
	_, err = h.q.EnqueueBatch(ctx, []BatchItem{{Job: SendEmail{To: "b"}}})
	require.ErrorIs(t, err, ErrFileReplaced)

	require.NoError(t, os.Rename(away, h.path))
	id, err := h.q.Enqueue(ctx, SendEmail{To: "back"}, nil)
	require.NoError(t, err, "the file is back; enqueues must work again")
	acked = append(acked, id)
	require.NoError(t, h.q.Close())
	ids := jobIDs(t, h.path)
	require.Len(t, ids, len(acked), "a failed enqueue left a job")
	for _, id := range acked {
		require.True(t, ids[id], "acknowledged job %d lost", id)
	}
	h.reopen(t)
}

// TestReplacedFileStopsEnqueues puts another queue file in place of the
// open one: the queue refuses to write into the file it can no longer be
// found by, and a reopen finds the new file's jobs and the old file intact.
func TestReplacedFileStopsEnqueues(t *testing.T) {
	h := setup(t, nil)
	ctx := context.Background()
	id, err := h.q.Enqueue(ctx, SendEmail{To: "a"}, nil)
	require.NoError(t, err)

	other := filepath.Join(t.TempDir(), "other.db")
	q2, err := Open(other, nil)
	require.NoError(t, err)
	id2, err := q2.Enqueue(ctx, SendEmail{To: "other"}, nil)
	require.NoError(t, err)
	require.NoError(t, q2.Close())
	old := filepath.Join(filepath.Dir(h.path), "old.db")
	require.NoError(t, os.Link(h.path, old))
	require.NoError(t, os.Rename(other, h.path))

	_, err = h.q.Enqueue(ctx, SendEmail{To: "where?"}, nil)
	require.ErrorIs(t, err, ErrFileReplaced)
	require.ErrorContains(t, err, "replaced")
	require.NoError(t, h.q.Close())
	require.True(t, jobIDs(t, h.path)[id2], "the file put in place lost its job")
	require.True(t, jobIDs(t, old)[id], "the replaced file lost an acknowledged job")
	h.reopen(t)
}
