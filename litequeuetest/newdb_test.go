package litequeuetest_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/litequeuetest"
)

// appDB opens the application's own database, with its orders table.
func appDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "app.db")+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	_, err = db.Exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT NOT NULL)`)
	require.NoError(t, err)
	return db
}

// TestNewDBSharesTheApplicationsTransactions runs the kit on the
// application's *sql.DB: an order and its job enqueued in one transaction
// (EnqueueTx) are both gone after a rollback and both there after a commit,
// and the handler's update of the order commits with the job's completion
// (CompleteTx), all on the one handle.
func TestNewDBSharesTheApplicationsTransactions(t *testing.T) {
	db := appDB(t)
	k := litequeuetest.NewDB(t, db, &litequeue.Options{Queues: []litequeue.QueueConfig{paymentsQueue(3)}})
	require.Empty(t, k.Path)
	litequeue.Register(k.Queue, func(ctx context.Context, d *litequeue.Delivery[ChargeCard]) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `UPDATE orders SET status = 'charged' WHERE id = ?`, d.Job.Order); err != nil {
			return err
		}
		if err := d.CompleteTx(ctx, tx); err != nil {
			return err
		}
		return tx.Commit()
	})
	ctx := context.Background()
	place := func(order int, commit bool) int64 {
		t.Helper()
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		defer tx.Rollback()
		_, err = tx.ExecContext(ctx, `INSERT INTO orders (id, status) VALUES (?, 'new')`, order)
		require.NoError(t, err)
		id, err := k.Queue.EnqueueTx(ctx, tx, ChargeCard{Order: order}, nil)
		require.NoError(t, err)
		if commit {
			require.NoError(t, tx.Commit())
		}
		return id
	}
	count := func(query string) int {
		t.Helper()
		var n int
		require.NoError(t, db.QueryRowContext(ctx, query).Scan(&n))
		return n
	}

	place(1, false)
	require.Zero(t, count(`SELECT count(*) FROM orders`), "the rollback took the order")
	require.Zero(t, count(`SELECT count(*) FROM lq_jobs`), "and the job, in the same database")

	id := place(2, true)
	require.Equal(t, 1, count(`SELECT count(*) FROM orders WHERE status = 'new'`))
	job, err := k.Queue.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateReady, job.State)

	res, err := k.Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.Succeeded)
	require.Equal(t, []int64{id}, res.SucceededIDs())
	require.Equal(t, 1, count(`SELECT count(*) FROM orders WHERE id = 2 AND status = 'charged'`), "the handler's write committed with the completion")
	require.Zero(t, count(`SELECT count(*) FROM lq_jobs`), "the completion deleted the job in the same transaction")
}

// TestNewDBWithoutADatabaseFails: a nil db is the test's mistake.
func TestNewDBWithoutADatabaseFails(t *testing.T) {
	f := &fakeT{TB: t}
	msg := f.fails(func() { litequeuetest.NewDB(f, nil, nil) })
	require.Contains(t, msg, "nil *sql.DB")
}
