package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/store"
)

// SchemaVersion is the version of the PostgreSQL schema this build writes.
// Open migrates older schemas up to it and refuses newer ones with
// litequeue.ErrSchemaTooNew.
const SchemaVersion = 4

// formatName is stored in lq_meta to tell litequeue's tables from another
// application's tables of the same names.
const formatName = "litequeue"

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

// Open connects to the PostgreSQL database at url (a postgres:// URL or a
// key=value DSN, as pgx parses them), creates or migrates the queue's lq_*
// tables in the schema the connection's search_path names first (default
// public; choose another with the URL parameter search_path=myschema, which
// must exist), and returns a Queue on them. The queue owns the connection
// pool: Close closes it. A nil opts means defaults. Options.Durability
// DurabilityProcess makes each of the queue's write transactions set
// synchronous_commit=off for itself (a commit survives a crash of the
// application's process; a crash of the server may lose the last few
// hundred milliseconds of commits, never consistency), unless the URL sets
// synchronous_commit itself; a setting per transaction, not per
// connection, so that it works through a pooler in transaction mode and
// never reaches another client's transactions. DurabilityFull follows the
// server's setting (on by default). BusyTimeout and Pragmas are SQLite
// settings and are ignored. Options.ReadOnly refuses every write with
// ErrReadOnly and creates nothing; it also opens the connections with
// default_transaction_read_only, unless a pooler refuses that startup
// parameter. Open is OpenWith without the settings only PostgreSQL reads
// (Options.ListenURL).
//
// Errors: ErrUnreachable, ErrAuth, ErrNoDatabase (of url or of
// Options.ListenURL), ErrNoSchema, ErrListenElsewhere;
// litequeue.ErrNotLitequeue when the schema has a table named lq_jobs (or
// lq_meta, lq_attempts) that litequeue did not create;
// litequeue.ErrSchemaTooNew when a newer build migrated it. Nothing is
// written on any of them.
func Open(ctx context.Context, url string, opts *litequeue.Options) (*litequeue.Queue, error) {
	return OpenWith(ctx, url, pgOptions(opts))
}

// OpenWith is Open with the settings only PostgreSQL reads: when
// opts.ListenURL is set, the queue's listening connection connects there
// instead of taking one of the pool's (for a url that goes through a pooler
// in transaction mode, which passes no notifications on); OpenWith connects
// to it once and refuses one that reaches another database than url's with
// ErrListenElsewhere. A nil opts means defaults.
func OpenWith(ctx context.Context, url string, opts *Options) (*litequeue.Queue, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	s, err := openStoreListen(ctx, url, o.ReadOnly, o.Durability == litequeue.DurabilityProcess, o.listenURL())
	if err != nil {
		return nil, err
	}
	return newQueue(s, o.Options)
}

// New returns a Queue on db, an application's own database opened with
// pgx's database/sql driver (stdlib.OpenDB or sql.Open("pgx", url)), so that
// Queue.EnqueueTx and Delivery.CompleteTx work on the application's *sql.Tx.
// The tables live in the schema db's connections have first in their
// search_path, as for Open. Close leaves db open. While it runs the queue
// keeps one of db's connections for LISTEN, and its three writers (claims,
// enqueues, outcomes) each use one while they write: give db a
// SetMaxOpenConns of at least 5 plus what the application itself needs. A db
// limited to one connection is refused with ErrPoolTooSmall, writing
// nothing: the LISTEN connection would leave the writers none.
// Options.Durability DurabilityProcess makes each of the queue's own write
// transactions set synchronous_commit=off for itself, as for Open (db's
// DSN cannot be read to let a synchronous_commit there win); an EnqueueTx
// or CompleteTx commits as the application's transaction does. When db
// goes through a pooler in transaction mode, use NewWith and give
// Options.ListenURL a direct URL of its database, as for OpenWith; the
// listening connection then is not one of db's.
func New(db *sql.DB, opts *litequeue.Options) (*litequeue.Queue, error) {
	return NewWith(db, pgOptions(opts))
}

// NewWith is New with the settings only PostgreSQL reads (see OpenWith). A
// nil opts means defaults.
func NewWith(db *sql.DB, opts *Options) (*litequeue.Queue, error) {
	if db == nil {
		return nil, errors.New("litequeue: postgres.New: db is nil")
	}
	if m := db.Stats().MaxOpenConnections; m == 1 {
		return nil, fmt.Errorf("%w: SetMaxOpenConns(%d); the queue keeps one connection for LISTEN and writes on others — allow at least 5 plus what the application needs, or 0 (no limit)", ErrPoolTooSmall, m)
	}
	ctx := context.Background()
	var o Options
	if opts != nil {
		o = *opts
	}
	s, err := newStore(ctx, db, false, o.ReadOnly, o.Durability == litequeue.DurabilityProcess, o.listenURL())
	if err != nil {
		return nil, err
	}
	return newQueue(s, o.Options)
}

// newQueue makes the queue on s with the queue's own options o.
func newQueue(s *pgStore, o litequeue.Options) (*litequeue.Queue, error) {
	if o.Logger != nil {
		s.log = o.Logger
	}
	// The store enforces ReadOnly itself (it refuses every write with
	// ErrReadOnly); the queue's own constructor takes it for Open only.
	// The listening connection's URL is the store's.
	o.ReadOnly = false
	//lint:ignore SA1019 the store has the deprecated field's URL already.
	o.ListenURL = ""
	q, err := litequeue.NewWithBackend(s, &o)
	if err != nil {
		s.Close()
		return nil, err
	}
	return q, nil
}

// openStore is Open without the Queue: the store alone. asyncCommit
// (DurabilityProcess) makes every write transaction of the store commit
// without waiting for the WAL flush, unless the URL sets
// synchronous_commit itself.
func openStore(ctx context.Context, url string, readOnly bool, asyncCommit ...bool) (*pgStore, error) {
	return openStoreListen(ctx, url, readOnly, len(asyncCommit) > 0 && asyncCommit[0], "")
}

// openStoreListen is openStore with the listening connection at listenURL
// (Options.ListenURL; empty for one of the pool's).
func openStoreListen(ctx context.Context, url string, readOnly, asyncCommit bool, listenURL string) (*pgStore, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("litequeue: PostgreSQL URL: %w", err)
	}
	_, urlSets := cfg.RuntimeParams["synchronous_commit"]
	async := asyncCommit && !urlSets
	s, err := openStoreWith(ctx, cfg, readOnly, async, readOnly, listenURL)
	if err != nil && readOnly && refusedStartupParameter(err) {
		// A pooler (PgBouncer) refuses startup parameters it does not
		// pass on: without default_transaction_read_only the store's own
		// refusal of every write (ErrReadOnly) stands alone.
		s, err = openStoreWith(ctx, cfg, readOnly, async, false, listenURL)
	}
	return s, err
}

// openStoreWith opens the store on a pool of cfg's connections, opened with
// default_transaction_read_only when readOnlyParam.
func openStoreWith(ctx context.Context, cfg *pgx.ConnConfig, readOnly, asyncAll, readOnlyParam bool, listenURL string) (*pgStore, error) {
	cfg = cfg.Copy()
	if readOnlyParam {
		cfg.RuntimeParams["default_transaction_read_only"] = "on"
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxIdleConns(8)
	s, err := newStore(ctx, db, true, readOnly, asyncAll, listenURL)
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// refusedStartupParameter reports the refusal of a connection's startup
// parameter by a connection pooler: PgBouncer passes on only the few it
// knows (and those in its ignore_startup_parameters) and refuses the
// connection for any other.
func refusedStartupParameter(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "08P01" && strings.Contains(pe.Message, "unsupported startup parameter")
}

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrations returns the embedded migrations in version order.
func migrations() ([]store.Migration, error) { return store.ReadMigrations(migrationFS) }

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

// quoteIdent quotes an SQL identifier.
func quoteIdent(s string) string { return pgx.Identifier{s}.Sanitize() }

// channelName is the LISTEN/NOTIFY channel of the queue in schema: channels
// are per database, so the schema is part of the name.
func channelName(schema string) string {
	c := "litequeue." + schema
	if len(c) > 63 {
		h := fnv.New64a()
		h.Write([]byte(schema))
		c = "litequeue." + strconv.FormatUint(h.Sum64(), 16)
	}
	return c
}

// identify tells whether schema holds litequeue's tables and their version:
// 0 when none of them exist. A table named like ours without our lq_meta
// marks is ErrNotLitequeue.
func identify(ctx context.Context, tx *sql.Tx, schema string) (int, error) {
	var jobs, meta, attempts bool
	err := tx.QueryRowContext(ctx, `SELECT
		to_regclass(format('%I.lq_jobs', $1::text)) IS NOT NULL,
		to_regclass(format('%I.lq_meta', $1::text)) IS NOT NULL,
		to_regclass(format('%I.lq_attempts', $1::text)) IS NOT NULL`, schema).Scan(&jobs, &meta, &attempts)
	if err != nil {
		return 0, err
	}
	if !meta {
		if jobs || attempts {
			return 0, fmt.Errorf("%w: schema %q has a table lq_jobs or lq_attempts that litequeue did not create (no lq_meta); use another schema for the queue (URL parameter search_path=…)", store.ErrNotLitequeue, schema)
		}
		return 0, nil
	}
	var format, ver sql.NullString
	err = tx.QueryRowContext(ctx, `SELECT
		(SELECT value FROM `+quoteIdent(schema)+`.lq_meta WHERE key = 'format'),
		(SELECT value FROM `+quoteIdent(schema)+`.lq_meta WHERE key = 'schema_version')`).Scan(&format, &ver)
	if err != nil || format.String != formatName {
		return 0, fmt.Errorf("%w: schema %q has a table lq_meta that does not name the litequeue format (%v); use another schema for the queue (URL parameter search_path=…)", store.ErrNotLitequeue, schema, err)
	}
	v, err := strconv.Atoi(ver.String)
	if err != nil || v < 1 {
		return 0, fmt.Errorf("%w: schema %q: unreadable schema version %q", store.ErrNotLitequeue, schema, ver.String)
	}
	if !jobs {
		return 0, fmt.Errorf("%w: schema %q has litequeue's lq_meta but no lq_jobs table: it was damaged", store.ErrNotLitequeue, schema)
	}
	return v, nil
}

// migrate checks, and unless readOnly creates or migrates, the queue's
// tables in schema, in one transaction under an advisory lock so that
// processes opening the same database at once migrate it once. On any refusal
// the transaction rolls back: nothing is written.
func migrate(ctx context.Context, db *sql.DB, schema string, readOnly bool) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return explainConnect(err)
	}
	defer tx.Rollback()
	if !readOnly {
		if _, err := tx.ExecContext(ctx, migrateLockSQL, schema); err != nil {
			return err
		}
	}
	cur, err := identify(ctx, tx, schema)
	if err != nil {
		return err
	}
	switch {
	case cur > SchemaVersion:
		return fmt.Errorf("%w: schema %q has litequeue schema version %d, this build knows up to %d; update litequeue", store.ErrSchemaTooNew, schema, cur, SchemaVersion)
	case cur == SchemaVersion:
		return tx.Commit()
	case readOnly && cur == 0:
		return fmt.Errorf("litequeue: schema %q has no litequeue tables, and a read-only queue creates none; open it writable once, or apply `lqinspect schema` as the schema's owner", schema)
	case readOnly:
		return fmt.Errorf("litequeue: schema %q has litequeue schema version %d, older than %d; open it writable once to migrate it", schema, cur, SchemaVersion)
	}
	if _, err := tx.ExecContext(ctx, "SET LOCAL search_path TO "+quoteIdent(schema)); err != nil {
		return err
	}
	for _, m := range ms {
		if m.Version <= cur {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return explainMigrate(fmt.Errorf("litequeue: PostgreSQL migration %d: %w", m.Version, err), schema, cur)
		}
	}
	if _, err := tx.ExecContext(ctx, recordVersionSQL()); err != nil {
		return err
	}
	return tx.Commit()
}

// newStore checks db (reachable, pgx, a schema to use) and listenURL (when
// not empty: it reaches db's database), migrates, and starts the store's
// writer.
func newStore(ctx context.Context, db *sql.DB, owned, readOnly, asyncAll bool, listenURL string) (*pgStore, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, explainConnect(err)
	}
	var schema sql.NullString
	var database string
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("%w (its driver connection is %T); open it with stdlib.OpenDB or sql.Open(\"pgx\", url)", ErrNotPgx, dc)
		}
		return c.Conn().QueryRow(ctx, "SELECT current_schema(), current_database()").Scan(&schema, &database)
	})
	conn.Close()
	if err != nil {
		return nil, explainConnect(err)
	}
	if !schema.Valid {
		return nil, errNoSchema()
	}
	var listen *pgx.ConnConfig
	if listenURL != "" {
		if listen, err = checkListenURL(ctx, listenURL, database); err != nil {
			return nil, err
		}
	}
	if err := migrate(ctx, db, schema.String, readOnly); err != nil {
		return nil, err
	}
	s := startStore(db, owned, readOnly, asyncAll, schema.String)
	s.database = database
	s.listenCfg = listen
	return s, nil
}
