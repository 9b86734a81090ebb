package litequeue

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWriteGivesUpWhenItsContextEndsWhileAnotherConnectionHoldsTheLock(t *testing.T) {
	h := setup(t, func(o *Options) { o.BusyTimeout = 50 * time.Millisecond })
	db, err := sql.Open("sqlite", "file:"+h.path)
	require.NoError(t, err)
	defer db.Close()
	conn, err := db.Conn(context.Background())
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(context.Background(), "BEGIN IMMEDIATE")
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = h.q.Enqueue(ctx, SendEmail{To: "x"}, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	_, err = conn.ExecContext(context.Background(), "ROLLBACK")
	require.NoError(t, err)
	// The writer still works, and the enqueue that gave up was not written.
	_, err = h.q.Enqueue(context.Background(), SendEmail{To: "y"}, nil)
	require.NoError(t, err)
	jobs, err := h.q.Jobs(context.Background(), JobFilter{})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Contains(t, string(jobs[0].Payload), `"y"`)
}
