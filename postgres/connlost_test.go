package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/pgtest"
	"github.com/litequeue/litequeue/internal/store"
)

func TestConnLostTellsALostConnectionFromAFailedStatement(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("litequeue: read: %w", err) }
	for _, err := range []error{
		&pgconn.PgError{Severity: "FATAL", Code: "57P01", Message: "terminating connection due to administrator command"},
		&pgconn.PgError{Severity: "FATAL", Code: "57P02"},
		&pgconn.PgError{Severity: "FATAL", Code: "57P03"},
		&pgconn.PgError{Code: "08006"},
		driver.ErrBadConn, pgconn.ErrConnClosed, io.EOF, io.ErrUnexpectedEOF, net.ErrClosed, syscall.ECONNRESET, syscall.EPIPE,
		&net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")},
	} {
		require.True(t, connLost(err), "%v", err)
		require.True(t, connLost(wrap(err)), "wrapped %v", err)
	}
	for _, err := range []error{
		nil, sql.ErrNoRows, store.ErrNotFound, context.Canceled, context.DeadlineExceeded,
		&pgconn.PgError{Code: "23505"}, &pgconn.PgError{Code: "57014"}, // unique_violation, query_canceled
		&pgconn.PgError{Code: "40001"}, errors.New("litequeue: something else"),
	} {
		require.False(t, connLost(err), "%v", err)
		require.False(t, connLost(wrap(err)), "wrapped %v", err)
	}
}

// terminateWhileWaiting runs read while an admin transaction holds table
// in schema locked, ends the backends that wait for the lock running a
// statement that contains like (the read's) with pg_terminate_backend, then
// lets the lock go, and returns what read returned.
func terminateWhileWaiting(t *testing.T, admin *sql.DB, schema, table, like string, read func() error) error {
	t.Helper()
	tx, err := admin.Begin()
	require.NoError(t, err)
	defer tx.Rollback()
	_, err = tx.Exec("LOCK TABLE " + quoteIdent(schema) + "." + table + " IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- read() }()
	// The read's backend waits for the lock: a state of the server that
	// no event reports, polled (bounded) every millisecond.
	var pids []int
	deadline := time.Now().Add(10 * time.Second)
	for len(pids) == 0 {
		require.True(t, time.Now().Before(deadline), "no backend waits for the lock on %s", table)
		rows, err := admin.Query(`SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE NOT l.granted AND l.relation = $1::regclass AND strpos(a.query, $2) > 0`, quoteIdent(schema)+"."+table, like)
		require.NoError(t, err)
		for rows.Next() {
			var pid int
			require.NoError(t, rows.Scan(&pid))
			pids = append(pids, pid)
		}
		require.NoError(t, rows.Err())
		if len(pids) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	for _, pid := range pids {
		var ok bool
		require.NoError(t, admin.QueryRow(`SELECT pg_terminate_backend($1, 10000)`, pid).Scan(&ok))
		require.True(t, ok)
	}
	require.NoError(t, tx.Rollback())
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("the read did not return")
		return nil
	}
}

// A read whose connection the server ends while it runs (an operator's or
// a pooler's pg_terminate_backend) is run again on a live connection: the
// caller gets its answer, not the connection's end.
func TestAReadWhoseConnectionTheServerEndsRunsAgain(t *testing.T) {
	ctx := context.Background()
	s, u, admin := newTestStore(t)
	schema := schemaOf(t, u)
	_, err := s.Pause(ctx, "mail", 1)
	require.NoError(t, err)
	ids, _, err := s.Insert(ctx, store.Tx{}, []store.NewJob{{Queue: "mail", Kind: "k", VisibleAt: 1, CreatedAt: 1, Payload: []byte("{}")}})
	require.NoError(t, err)
	for _, c := range []struct {
		name, table string
		read        func() error
	}{
		{"Paused", "lq_queues", func() error {
			p, err := s.Paused(ctx)
			if err == nil && p["mail"] != 1 {
				err = fmt.Errorf("paused %v", p)
			}
			return err
		}},
		{"Stats", "lq_jobs", func() error {
			st, err := s.Stats(ctx, 2)
			if err == nil && (len(st) != 1 || st[0].Ready != 1) {
				err = fmt.Errorf("stats %+v", st)
			}
			return err
		}},
		{"Job, in a read-only transaction", "lq_jobs", func() error {
			_, _, err := s.Job(ctx, ids[0])
			return err
		}},
		{"Schedules", "lq_schedules", func() error {
			_, err := s.Schedules(ctx, "")
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, terminateWhileWaiting(t, admin, schema, c.table, "", c.read))
		})
	}
}

type pausedReadJob struct{ N int }

func (pausedReadJob) Kind() string { return "paused_read_job" }

// A worker re-reads its queue's pause and next due time when another
// process writes; when the server ends the connections of those reads
// (pg_terminate_backend, as a pooler or an operator does), the worker logs
// no error ("reading paused queues", "next due time"): the reads run again,
// and the other process's job runs.
func TestWorkerLogsNoErrorWhenTheServerEndsItsReads(t *testing.T) {
	ctx := context.Background()
	u, admin := freshSchema(t)
	errs := make(chan string, 10)
	worker, err := Open(ctx, u, &litequeue.Options{Logger: pgtest.Messages{Ch: errs, Level: slog.LevelError}.Logger()})
	require.NoError(t, err)
	defer worker.Close()
	ran := make(chan int, 1)
	litequeue.Register(worker, func(ctx context.Context, d *litequeue.Delivery[pausedReadJob]) error {
		ran <- d.Job.N
		return nil
	})
	require.NoError(t, worker.Start(ctx))
	defer worker.Stop(ctx)
	producer, err := Open(ctx, u, nil)
	require.NoError(t, err)
	defer producer.Close()

	err = terminateWhileWaiting(t, admin, schemaOf(t, u), "lq_queues", "paused_at IS NOT NULL", func() error {
		// The producer's notification wakes the worker, which re-reads
		// the pause (and waits for the lock: the pause is in lq_queues,
		// and so is a part of the next due time's read) before it claims.
		_, err := producer.Enqueue(ctx, pausedReadJob{N: 1}, nil)
		return err
	})
	require.NoError(t, err)
	select {
	case n := <-ran:
		require.Equal(t, 1, n)
	case <-time.After(30 * time.Second):
		t.Fatal("the job did not run")
	}
	// The read, and its error log if any, came before the claim.
	select {
	case msg := <-errs:
		t.Fatalf("logged at level Error: %s", msg)
	default:
	}
}
