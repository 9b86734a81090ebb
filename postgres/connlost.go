package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/litequeue/litequeue/internal/sqlkit"
)

// Reads on a lost connection. The server ends a pooled connection when an
// operator or a pooler terminates its backend (pg_terminate_backend), at a
// restart or a failover. database/sql replaces such a connection by itself
// only when the driver can tell before sending anything; a read that was
// sent, or whose connection was ended while it ran, fails instead. A read
// changes nothing, so the store runs it again on a live connection rather
// than have the queue log the failure.

// connLost reports whether err says the connection the statement ran on was
// lost: ended by the server (SQLSTATE 57P01 admin_shutdown — what
// pg_terminate_backend sends —, 57P02 crash_shutdown, 57P03
// cannot_connect_now, or class 08, connection exception) or broken under
// the driver (a closed connection, a network error, an end of stream). An
// error of the statement itself (a constraint, a syntax error, a
// cancellation by ctx) is not a lost connection.
func connLost(err error) bool {
	if err == nil {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "57P01", "57P02", "57P03":
			return true
		}
		return strings.HasPrefix(pe.Code, "08")
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	for _, target := range []error{driver.ErrBadConn, pgconn.ErrConnClosed, io.EOF, io.ErrUnexpectedEOF,
		net.ErrClosed, syscall.ECONNRESET, syscall.EPIPE, syscall.ECONNABORTED} {
		if errors.Is(err, target) {
			return true
		}
	}
	var ne *net.OpError
	return errors.As(err, &ne)
}

// read runs the read fn, and once more when it failed because its
// connection was lost (connLost) and ctx is not done: first a ping of the
// pool, which drops the idle connections it finds dead (stdlib's Ping
// reports them as driver.ErrBadConn, and database/sql then tries another,
// and at last a new one), so that fn runs again on the live connection the
// ping leaves most recently used. When the ping fails too (the server is
// down), or the second run fails, that error is returned. fn must be safe
// to run twice: it starts afresh (resets what it collects).
func (s *pgStore) read(ctx context.Context, fn func() error) error {
	err := fn()
	if !connLost(err) || ctx.Err() != nil || s.closing() {
		return err
	}
	if perr := s.db.PingContext(ctx); perr != nil {
		return err
	}
	return fn()
}

// readValue is read for a read that answers a value.
func readValue[T any](s *pgStore, ctx context.Context, fn func() (T, error)) (T, error) {
	var v T
	err := s.read(ctx, func() error {
		var err error
		v, err = fn()
		return err
	})
	return v, err
}

// readAll is sqlkit.QueryAll on the pool, as a read (see read).
func readAll[T any](s *pgStore, ctx context.Context, query string, a []any, scan func(*sql.Rows, *T) error) ([]T, error) {
	return readValue(s, ctx, func() ([]T, error) { return sqlkit.QueryAll(ctx, s.db, query, a, scan) })
}

// readTx runs fn in a read-only transaction with one snapshot, as a read
// (see read): fn may run twice.
func (s *pgStore) readTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.read(ctx, func() error {
		tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead})
		if err != nil {
			return err
		}
		defer tx.Rollback()
		return fn(tx)
	})
}
