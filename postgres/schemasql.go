package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/litequeue/litequeue/internal/store"
)

// ErrNoCreatePrivilege: the queue's tables are missing or older than this
// build, and the connection's role may not create or change tables in the
// schema, so Open (or New) cannot migrate them. Have a role that may
// (the schema's owner) apply MigrationSQL, or `lqinspect schema`, first.
var ErrNoCreatePrivilege = errors.New("litequeue: the PostgreSQL role may not create the queue's tables")

// recordVersionSQL marks a schema as litequeue's, at the version the
// migrations before it made.
func recordVersionSQL() string {
	return fmt.Sprintf(`INSERT INTO lq_meta (key, value) VALUES ('format', '%s'), ('schema_version', '%d')
    ON CONFLICT (key) DO UPDATE SET value = excluded.value`, formatName, SchemaVersion)
}

// migrateLockSQL is the lock under which a schema is migrated: Open takes it
// too, so a MigrationSQL run in a transaction and a queue opening at the
// same moment migrate the schema once.
const migrateLockSQL = `SELECT pg_advisory_xact_lock(hashtextextended('litequeue migrate ' || $1::text, 0))`

// MigrationSQL returns the SQL that takes the queue's tables from litequeue
// schema version from (0: no tables yet) to SchemaVersion, for an
// application that applies schema changes with its own migration tool or
// as a database owner, and opens the queue as a role that may only read and
// write rows. Open and New never need to create anything once the schema
// is at SchemaVersion.
//
// The SQL takes the migration lock Open takes, runs every embedded
// migration after from in order, and records the version in lq_meta. It
// names the tables unqualified: run it with the queue's schema first in the
// search_path, in one transaction (psql -1, or the migration tool's own),
// so that a failure leaves nothing behind. The role the queue runs as then
// needs USAGE on the schema and SELECT, INSERT, UPDATE and DELETE on its
// lq_* tables.
//
// from == SchemaVersion returns "" (nothing to do). A negative from, or
// one above SchemaVersion, is an error.
func MigrationSQL(from int) (string, error) {
	if from < 0 || from > SchemaVersion {
		return "", fmt.Errorf("litequeue: no migration from PostgreSQL schema version %d: versions run from 0 (no tables) to %d, this build's", from, SchemaVersion)
	}
	if from == SchemaVersion {
		return "", nil
	}
	ms, err := migrations()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "-- litequeue PostgreSQL schema: version %d to %d.\n", from, SchemaVersion)
	b.WriteString("-- Run it in one transaction with the queue's schema first in search_path.\n\n")
	b.WriteString(strings.Replace(migrateLockSQL, "$1::text", "current_schema()", 1) + ";\n")
	for _, m := range ms {
		if m.Version <= from {
			continue
		}
		fmt.Fprintf(&b, "\n-- migration %d\n\n%s", m.Version, strings.TrimRight(m.SQL, "\n")+"\n")
	}
	b.WriteString("\n" + recordVersionSQL() + ";\n")
	return b.String(), nil
}

// InstalledVersion returns the litequeue schema version of the queue's
// tables at url, in the schema its search_path names first, and that
// schema's name: version 0 when there are no tables yet, a version above
// SchemaVersion when a newer build migrated them. It writes nothing, so a
// role that may only read can ask. Errors: those of Open's connection
// (ErrUnreachable, ErrAuth, ErrNoDatabase), ErrNoSchema, and
// litequeue.ErrNotLitequeue when the schema holds another application's
// lq_jobs.
func InstalledVersion(ctx context.Context, url string) (version int, schema string, err error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return 0, "", fmt.Errorf("litequeue: PostgreSQL URL: %w", err)
	}
	// A read-only transaction rather than the startup parameter
	// default_transaction_read_only, which a pooler (PgBouncer) refuses.
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	var cur sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT current_schema()").Scan(&cur); err != nil {
		return 0, "", explainConnect(err)
	}
	if !cur.Valid {
		return 0, "", errNoSchema()
	}
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return 0, "", explainConnect(err)
	}
	defer tx.Rollback()
	v, err := identify(ctx, tx, cur.String)
	return v, cur.String, err
}

// explainMigrate adds to a failed migration what to do when the role lacks
// the privilege to create tables.
func explainMigrate(err error, schema string, from int) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42501" { // insufficient_privilege
		return err
	}
	return fmt.Errorf("%w in schema %q (the schema is at version %d, this build needs %d): have the schema's owner apply the tables first (`lqinspect schema -from %d | psql -1 ...`, or postgres.MigrationSQL(%d) in your migration tool), or grant this role CREATE on the schema: %w",
		ErrNoCreatePrivilege, schema, from, SchemaVersion, from, from, err)
}

// SchemaVersion is the version of the PostgreSQL schema this build writes.
// Open migrates older schemas up to it and refuses newer ones with
// litequeue.ErrSchemaTooNew.
const SchemaVersion = 7

// formatName is stored in lq_meta to tell litequeue's tables from another
// application's tables of the same names.
const formatName = "litequeue"

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrations returns the embedded migrations in version order.
func migrations() ([]store.Migration, error) { return store.ReadMigrations(migrationFS) }

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
