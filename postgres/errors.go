package postgres

import (
	"errors"
	"fmt"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
)

// The errors of connecting to PostgreSQL, and the explanations that wrap
// the driver's connection failures in them.

// Errors of connecting. Each is wrapped together with the driver's own error,
// so errors.As(err, **pgconn.PgError) also works.
var (
	// ErrUnreachable: no PostgreSQL server answered at the URL's host and
	// port (refused, timed out, unknown host).
	ErrUnreachable = errors.New("litequeue: PostgreSQL server unreachable")
	// ErrAuth: the server refused the URL's user or password.
	ErrAuth = errors.New("litequeue: PostgreSQL refused the credentials")
	// ErrNoDatabase: the URL names a database the server does not have.
	ErrNoDatabase = errors.New("litequeue: PostgreSQL database does not exist")
	// ErrNoSchema: the connection's search_path names no existing schema,
	// so there is nowhere to put the queue's tables.
	ErrNoSchema = errors.New("litequeue: no schema to put the queue's tables in")
	// ErrNotPgx: New was given a *sql.DB whose driver is not pgx's stdlib.
	ErrNotPgx = errors.New("litequeue: the *sql.DB is not opened with github.com/jackc/pgx/v5/stdlib")
	// ErrPoolTooSmall: New was given a *sql.DB limited to one open
	// connection, which the queue's LISTEN would hold for good, leaving
	// none for its writes.
	ErrPoolTooSmall = errors.New("litequeue: the *sql.DB allows too few open connections for the queue")
	// ErrListenElsewhere: Options.ListenURL reaches another database than
	// the queue's, where the queue's notifications never arrive.
	ErrListenElsewhere = errors.New("litequeue: Options.ListenURL reaches another database than the queue's")
)

// explainConnect turns the driver's connection failures into errors that say
// what was wrong and what to do.
func explainConnect(err error) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "28P01" || pe.Code == "28000":
			return fmt.Errorf("%w (%s); check the user and password in the URL (or PGUSER/PGPASSWORD, ~/.pgpass): %w", ErrAuth, pe.Message, err)
		case pe.Code == "3D000":
			return fmt.Errorf("%w (%s); create it (CREATE DATABASE) or fix the URL's database name: %w", ErrNoDatabase, pe.Message, err)
		}
		return err
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	var oe *net.OpError
	var de *net.DNSError
	if errors.As(err, &ce) || errors.As(err, &oe) || errors.As(err, &de) || errors.As(err, &ne) {
		return fmt.Errorf("%w; check that the server runs and that the URL's host and port are right: %w", ErrUnreachable, err)
	}
	return err
}

// errNoSchema is ErrNoSchema with what to do.
func errNoSchema() error {
	return fmt.Errorf("%w: the connection's search_path names no existing schema; create it (CREATE SCHEMA name) or set the URL parameter search_path to an existing one", ErrNoSchema)
}
