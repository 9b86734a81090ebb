package litequeuetest_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/litequeuetest"
)

// The kit's queue watches EnqueueTx's transaction like a queue without the
// kit (the fault store forwards the store's transaction watcher): a job of
// a transaction rolled back is never reported enqueued, one of a committed
// transaction is, once it committed.
func TestKitReportsEnqueueTxOnlyOnCommit(t *testing.T) {
	k := litequeuetest.New(t, nil)
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+k.Path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	require.NoError(t, err)
	defer db.Close()

	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = k.Queue.EnqueueTx(ctx, tx, Receipt{Order: 1}, nil)
	require.NoError(t, err)
	require.NoError(t, tx.Rollback())

	tx, err = db.BeginTx(ctx, nil)
	require.NoError(t, err)
	kept, err := k.Queue.EnqueueTx(ctx, tx, Receipt{Order: 2}, nil)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	k.WaitFor(litequeue.EventEnqueued, kept)
	require.NoError(t, k.Queue.FlushEvents(ctx))
	var enqueued []litequeue.Event
	for _, e := range k.Events() {
		if e.Type == litequeue.EventEnqueued {
			enqueued = append(enqueued, e)
		}
	}
	// The rolled-back job's id is used again by the committed one.
	require.Len(t, enqueued, 1, "the job of the rolled-back transaction was reported too: %v", enqueued)
}
