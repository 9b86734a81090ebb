package litequeuetest_test

import (
	"context"
	"database/sql"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/litequeuetest"
)

// shop is a kit whose ChargeCard handler records the charge in the
// application's table and completes the job in the same transaction
// (CompleteTx), on a second handle to the kit's file; mails counts the
// receipts it mails, outside the transaction.
type shop struct {
	*litequeuetest.Kit
	db    *sql.DB
	mails atomic.Int32
	crash atomic.Value // the error a CompleteTx returned, if one did
}

// newShop makes the shop; mailFirst says whether the handler mails before
// its commit (not idempotent under a crash before the commit) or after it.
func newShop(t *testing.T, mailFirst bool) *shop {
	s := &shop{Kit: litequeuetest.New(t, &litequeue.Options{Queues: []litequeue.QueueConfig{paymentsQueue(3)}})}
	db, err := sql.Open("sqlite", "file:"+s.Path+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	s.db = db
	_, err = db.Exec(`CREATE TABLE charges (job_id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL)`)
	require.NoError(t, err)
	litequeue.Register(s.Queue, func(ctx context.Context, d *litequeue.Delivery[ChargeCard]) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `INSERT INTO charges (job_id, order_id) VALUES (?, ?)`, d.ID, d.Job.Order); err != nil {
			return err
		}
		if mailFirst {
			s.mails.Add(1)
		}
		if err := d.CompleteTx(ctx, tx); err != nil {
			s.crash.Store(err)
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		if !mailFirst {
			s.mails.Add(1)
		}
		return nil
	})
	return s
}

func (s *shop) charges(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, s.db.QueryRow(`SELECT count(*) FROM charges`).Scan(&n))
	return n
}

// A CompleteTx handler's job cannot come back after its transaction
// committed: the commit completed it. DeliverTwice gives it the duplicate
// it can get — its process dies before the commit: the transaction rolls
// back (no charge row), the job comes back at its lease's end and runs
// again, and what the handler did outside the transaction before the
// crash (the mail) happens twice.
func TestDeliverTwiceOfACompleteTxHandlerCrashesBeforeItsCommit(t *testing.T) {
	s := newShop(t, true)
	ctx := context.Background()
	id, err := s.Queue.Enqueue(ctx, ChargeCard{Order: 1}, nil)
	require.NoError(t, err)
	s.DeliverTwice(id)
	res, err := s.Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, res.Ran, "the job ran again")
	require.Equal(t, 1, res.Succeeded)
	require.Equal(t, []int64{id}, res.LostIDs())
	require.Equal(t, lease, res.Elapsed, "the second run came at the lease's end")
	require.Equal(t, 1, s.charges(t), "the first run's transaction was rolled back")
	require.Equal(t, int32(2), s.mails.Load(), "mailed before the commit: twice")
	require.ErrorIs(t, s.crash.Load().(error), litequeuetest.ErrSimulatedCrash)
	require.Equal(t, []string{"enqueued 0", "started 1", "started 2", "succeeded 2"}, types(s.History(id)))
}

// The same crash passes a handler whose outside effect waits for its
// commit.
func TestDeliverEachTwicePassesACompleteTxHandlerThatActsAfterItsCommit(t *testing.T) {
	s := newShop(t, false)
	s.DeliverEachTwice(ChargeCard{}.Kind())
	ctx := context.Background()
	for o := range 2 {
		_, err := s.Queue.Enqueue(ctx, ChargeCard{Order: o}, nil)
		require.NoError(t, err)
	}
	res, err := s.Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, res.Ran)
	require.Equal(t, 2, res.Lost)
	require.Equal(t, 2, res.Succeeded)
	require.Equal(t, 2, s.charges(t))
	require.Equal(t, int32(2), s.mails.Load(), "one mail per order")
}
