package postgres_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/pgtest"
	"github.com/litequeue/litequeue/postgres"
)

type outboxJob struct{ Order int }

func (outboxJob) Kind() string { return "outbox_job" }

// otherDatabase creates a database of its own for the test (dropped when it
// ends) and returns u with that database in place of u's.
func otherDatabase(t *testing.T, u string, admin *sql.DB) string {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	name := "lqtest_db_" + hex.EncodeToString(b)
	_, err := admin.Exec("CREATE DATABASE " + pgx.Identifier{name}.Sanitize())
	require.NoError(t, err)
	t.Cleanup(func() { admin.Exec("DROP DATABASE " + pgx.Identifier{name}.Sanitize() + " WITH (FORCE)") })
	pu, err := url.Parse(u)
	require.NoError(t, err)
	pu.Path = "/" + name
	return pu.String()
}

// EnqueueTx (and EnqueueBatchTx) on a transaction of another database than
// the queue's — here one whose schema of the same name holds a queue of
// its own, where the insert would land unnoticed — is refused with
// ErrOtherDatabase, and nothing is written on either database.
func TestEnqueueTxRefusesATransactionOnAnotherDatabase(t *testing.T) {
	ctx := context.Background()
	u, admin := pgtest.FreshSchema(t)
	q, err := postgres.Open(ctx, u, nil)
	require.NoError(t, err)
	defer q.Close()

	ou := otherDatabase(t, u, admin)
	odb, err := sql.Open("pgx", ou)
	require.NoError(t, err)
	defer odb.Close()
	_, err = odb.Exec("CREATE SCHEMA " + pgx.Identifier{pgtest.Schema(t, u)}.Sanitize())
	require.NoError(t, err)
	other, err := postgres.Open(ctx, ou, nil)
	require.NoError(t, err)
	defer other.Close()

	tx, err := odb.BeginTx(ctx, nil)
	require.NoError(t, err)
	id, err := q.EnqueueTx(ctx, tx, outboxJob{Order: 1}, nil)
	require.ErrorIs(t, err, postgres.ErrOtherDatabase)
	require.Zero(t, id)
	require.Contains(t, err.Error(), "another database")
	_, err = q.EnqueueBatchTx(ctx, tx, []litequeue.BatchItem{{Job: outboxJob{Order: 2}}})
	require.ErrorIs(t, err, postgres.ErrOtherDatabase)
	require.NoError(t, tx.Commit())
	for _, qq := range []*litequeue.Queue{q, other} {
		jobs, err := qq.Jobs(ctx, litequeue.JobFilter{})
		require.NoError(t, err)
		require.Empty(t, jobs, "nothing written")
	}

	// A transaction on the queue's own database enqueues, more than once.
	db, err := sql.Open("pgx", u)
	require.NoError(t, err)
	defer db.Close()
	tx, err = db.BeginTx(ctx, nil)
	require.NoError(t, err)
	for o := range 2 {
		_, err = q.EnqueueTx(ctx, tx, outboxJob{Order: o}, nil)
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit())
	jobs, err := q.Jobs(ctx, litequeue.JobFilter{})
	require.NoError(t, err)
	require.Len(t, jobs, 2)
}

// CompleteTx on a transaction of another database is refused the same way
// — whether that database has a queue of the same schema (a row there may
// have the job's id and lease) or no such tables — : the attempt fails with
// ErrOtherDatabase instead of completing another queue's row or reporting
// a lost lease.
func TestCompleteTxRefusesATransactionOnAnotherDatabase(t *testing.T) {
	for _, tables := range []bool{true, false} {
		t.Run(fmt.Sprintf("tables=%v", tables), func(t *testing.T) {
			ctx := context.Background()
			u, admin := pgtest.FreshSchema(t)
			ou := otherDatabase(t, u, admin)
			odb, err := sql.Open("pgx", ou)
			require.NoError(t, err)
			defer odb.Close()
			if tables {
				_, err = odb.Exec("CREATE SCHEMA " + pgx.Identifier{pgtest.Schema(t, u)}.Sanitize())
				require.NoError(t, err)
				other, err := postgres.Open(ctx, ou, nil)
				require.NoError(t, err)
				require.NoError(t, other.Close())
			}
			q, err := postgres.Open(ctx, u, nil)
			require.NoError(t, err)
			defer q.Close()
			got := make(chan error, 1)
			litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[outboxJob]) error {
				tx, err := odb.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				err = d.CompleteTx(ctx, tx)
				got <- err
				return err
			})
			require.NoError(t, q.Start(ctx))
			defer q.Stop(ctx)
			_, err = q.Enqueue(ctx, outboxJob{Order: 1}, nil)
			require.NoError(t, err)
			select {
			case err := <-got:
				require.ErrorIs(t, err, postgres.ErrOtherDatabase)
			case <-time.After(30 * time.Second):
				t.Fatal("the job did not run")
			}
		})
	}
}

// statements counts the statements its connections send.
// statements counts the statements sent on a pool, but the queue's
// watcher's reads of transaction states (txid_status), which it sends on
// its own schedule while an application's transaction holding an
// EnqueueTx job is open: not a round trip of EnqueueTx.
type statements struct{ n atomic.Int64 }

func (c *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(d.SQL, "SELECT txid_status(") {
		return ctx
	}
	c.n.Add(1)
	return ctx
}

func (c *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

type uniqueOutboxJob struct{ Order int }

func (uniqueOutboxJob) Kind() string                            { return "unique_outbox_job" }
func (uniqueOutboxJob) UniqueOptions() *litequeue.UniqueOptions { return &litequeue.UniqueOptions{} }

// The database check of EnqueueTx rides on the statement that notifies the
// job's queue: an EnqueueTx sends the insert and one notification, as
// without the check, and a second one on the same transaction asks
// nothing. A unique job (inserted one at a time) pays one statement per
// transaction for the check.
func TestEnqueueTxChecksTheDatabaseWithoutARoundTripOfItsOwn(t *testing.T) {
	ctx := context.Background()
	u, _ := pgtest.FreshSchema(t)
	cfg, err := pgx.ParseConfig(u)
	require.NoError(t, err)
	count := &statements{}
	cfg.Tracer = count
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	q, err := postgres.New(db, nil)
	require.NoError(t, err)
	defer q.Close()

	sent := func(job litequeue.Job, tx *sql.Tx) int64 {
		t.Helper()
		before := count.n.Load()
		_, err := q.EnqueueTx(ctx, tx, job, nil)
		require.NoError(t, err)
		return count.n.Load() - before
	}
	// A failed assertion leaves a transaction open, which would hold the
	// schema's cleanup (DROP SCHEMA) until the test binary times out.
	begin := func() *sql.Tx {
		t.Helper()
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback() })
		return tx
	}
	tx := begin()
	require.Equal(t, int64(2), sent(outboxJob{Order: 1}, tx), "the notification (with the check) and the insert")
	require.Equal(t, int64(2), sent(outboxJob{Order: 2}, tx), "the insert and the notification; the transaction was checked")
	require.NoError(t, tx.Commit())
	tx = begin()
	require.Equal(t, int64(3), sent(uniqueOutboxJob{Order: 1}, tx), "the check, the insert and the notification")
	require.Equal(t, int64(2), sent(uniqueOutboxJob{Order: 2}, tx))
	require.NoError(t, tx.Commit())
}
