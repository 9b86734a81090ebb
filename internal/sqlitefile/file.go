// Package sqlitefile is the SQLite queue file format: its schema and
// migrations, the checks that tell a queue file from other files, the
// marker of a file moved to PostgreSQL, and writing a new queue file. The
// SQLite store (internal/sqlite) opens and runs queue files with it; the
// PostgreSQL store (postgres) writes its backups as queue files and moves
// queue files' jobs with it.
package sqlitefile

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/litequeue/litequeue/internal/store"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// SchemaVersion is the version of the queue file format this build writes.
// Open migrates older files up to it and refuses newer ones with
// store.ErrSchemaTooNew.
const SchemaVersion = 14

// formatName is stored in lq_meta to tell a litequeue file from another
// application's SQLite file.
const formatName = "litequeue"

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrations returns the embedded migrations in version order.
func migrations() ([]store.Migration, error) { return store.ReadMigrations(migrationFS) }

// Execer is what the store's statements run on: the writer's connection
// inside its transaction, a read transaction, or the application's *sql.Tx.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// OpenHook, when set (only by tests), is called at each step of preparing a
// queue file, so a test can kill the process at that step. It is nil in
// production and costs one comparison per step of Open.
var OpenHook func(step string)

// OpenStep calls OpenHook at a named step of Open.
func OpenStep(step string) {
	if OpenHook != nil {
		OpenHook(step)
	}
}

// Identify tells whether db holds a litequeue schema, and its version.
// version is 0 for a database with no litequeue tables; foreign reports
// whether the database holds other tables.
func Identify(ctx context.Context, db Execer) (version int, foreign bool, err error) {
	rows, err := db.QueryContext(ctx, `SELECT type, name FROM sqlite_schema WHERE type IN ('table', 'view')`)
	if err != nil {
		return 0, false, ClassifyOpenError(err)
	}
	hasMeta := false
	for rows.Next() {
		var typ, name string
		if err := rows.Scan(&typ, &name); err != nil {
			rows.Close()
			return 0, false, err
		}
		if typ == "view" {
			if strings.HasPrefix(strings.ToLower(name), "lq_") {
				rows.Close()
				return 0, false, fmt.Errorf("%w: %s is a view, not a table: the file's queue tables were altered; litequeue reads only tables its own migrations made (nothing was read)", store.ErrNotLitequeue, name)
			}
			continue
		}
		switch {
		case name == "lq_meta":
			hasMeta = true
		case strings.HasPrefix(name, "lq_"), strings.HasPrefix(name, "sqlite_"):
		default:
			foreign = true
		}
	}
	if err := rows.Close(); err != nil {
		return 0, false, ClassifyOpenError(err)
	}
	if !hasMeta {
		return 0, foreign, nil
	}
	// lq_meta must be the plain table migration 1 made before a value is
	// read from it (a generated column could compute anything).
	if err := checkMetaShape(ctx, db); err != nil {
		return 0, foreign, err
	}
	var format, ver string
	err = db.QueryRowContext(ctx, `SELECT
		(SELECT value FROM lq_meta WHERE key = 'format'),
		(SELECT value FROM lq_meta WHERE key = 'schema_version')`).Scan(&format, &ver)
	// A moved file (moved.go) is a queue file this build reads, and opens
	// for writing no more.
	if err != nil || (format != formatName && format != movedFormat) {
		return 0, foreign, fmt.Errorf("%w: its lq_meta table does not name the litequeue format", store.ErrNotLitequeue)
	}
	version, err = strconv.Atoi(ver)
	if err != nil || version < 1 {
		return 0, foreign, fmt.Errorf("%w: unreadable schema version %q", store.ErrNotLitequeue, ver)
	}
	return version, foreign, nil
}

// ClassifyOpenError turns the driver's "not a database" into store.ErrNotSQLite
// and "malformed" into store.ErrCorrupt.
func ClassifyOpenError(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_NOTADB:
			return fmt.Errorf("%w (%v)", store.ErrNotSQLite, err)
		case sqlite3.SQLITE_CORRUPT:
			return fmt.Errorf("%w (%v)", store.ErrCorrupt, err)
		}
	}
	return err
}

// migrate brings the schema from version `from` up to SchemaVersion in one
// IMMEDIATE transaction on conn.
func migrate(ctx context.Context, conn *sql.Conn, from int) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	return RunTx(ctx, conn, func(tx Execer) error {
		// Re-check inside the write lock: another process may have migrated.
		cur, _, err := Identify(ctx, tx)
		if err != nil {
			return err
		}
		if cur > SchemaVersion {
			return fmt.Errorf("%w: file has version %d, this build knows up to %d", store.ErrSchemaTooNew, cur, SchemaVersion)
		}
		for _, m := range ms {
			if m.Version <= cur {
				continue
			}
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("litequeue: migration %d: %w", m.Version, err)
			}
		}
		// A migration may edit a definition in sqlite_schema (0007): a new
		// schema version makes every connection, in this process or
		// another, reload the definitions. (DDL bumps it too; once more is
		// harmless.)
		var sv int64
		if err := tx.QueryRowContext(ctx, "PRAGMA schema_version").Scan(&sv); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA schema_version = %d", sv+1)); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO lq_meta (key, value) VALUES ('format', ?), ('schema_version', ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, formatName, strconv.Itoa(SchemaVersion))
		OpenStep("schema-written")
		return err
	})
}

// RunTx runs fn inside BEGIN IMMEDIATE … COMMIT on conn, rolling back when fn
// or the commit fails. BEGIN is retried while the database stays busy beyond
// the busy timeout, until wait ends. fn's statements use the contexts fn
// chooses; the COMMIT is not cut short when wait ends after BEGIN: work that
// fn finished is committed, not abandoned half-way.
func RunTx(wait context.Context, conn Execer, fn func(tx Execer) error) error {
	if err := beginImmediate(wait, conn); err != nil {
		return err
	}
	if err := fn(conn); err != nil {
		rollback(conn)
		return err
	}
	if _, err := conn.ExecContext(context.WithoutCancel(wait), "COMMIT"); err != nil {
		rollback(conn)
		return err
	}
	return nil
}

func beginImmediate(ctx context.Context, conn Execer) error {
	for {
		_, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE")
		if err == nil {
			return nil
		}
		// Still locked after a whole busy timeout (the driver's busy handler
		// already slept), or interrupted by ctx while waiting: keep waiting
		// while the caller's context allows.
		if ctx.Err() != nil {
			return fmt.Errorf("litequeue: database stayed locked by another connection: %w (%v)", context.Cause(ctx), err)
		}
		if !IsBusy(err) {
			return err
		}
	}
}

func rollback(conn Execer) {
	// A failed COMMIT may already have rolled back; the error is expected then.
	_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
}

// ClassifyWriteError marks SQLite's "database or disk is full" as
// store.ErrStorageFull, its I/O errors as store.ErrStorageIO and "the database file has
// moved" as store.ErrFileReplaced.
func ClassifyWriteError(err error) error {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch {
	case se.Code()&0xff == sqlite3.SQLITE_FULL:
		return fmt.Errorf("%w: %w", store.ErrStorageFull, err)
	case se.Code() == sqlite3.SQLITE_READONLY_DBMOVED:
		return fmt.Errorf("%w: %w", store.ErrFileReplaced, err)
	case se.Code()&0xff == sqlite3.SQLITE_IOERR:
		return fmt.Errorf("%w: %w", store.ErrStorageIO, err)
	}
	return err
}

// IsBusy reports SQLITE_BUSY and SQLITE_LOCKED (and their extended codes).
func IsBusy(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		c := se.Code() & 0xff
		return c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED
	}
	return false
}

func CheckVersion(version int, foreign bool) error {
	switch {
	case version > SchemaVersion:
		return fmt.Errorf("%w: file has version %d, this build knows up to %d; upgrade litequeue", store.ErrSchemaTooNew, version, SchemaVersion)
	case version == 0 && foreign:
		return fmt.Errorf("%w: it holds tables of another application and no litequeue schema", store.ErrNotLitequeue)
	case version == 0:
		return fmt.Errorf("%w: it holds no litequeue schema", store.ErrNotLitequeue)
	}
	return nil
}

// Prepare checks what conn's database holds, then switches it to WAL and
// migrates it. Nothing is written before the checks pass. own says the file
// belongs to the queue alone (Open), so other applications' tables are
// refused.
func Prepare(ctx context.Context, conn *sql.Conn, own bool) error {
	version, foreign, err := Identify(ctx, conn)
	if err != nil {
		return err
	}
	OpenStep("identified")
	if version > SchemaVersion {
		return CheckVersion(version, foreign)
	}
	if own && version == 0 && foreign {
		return CheckVersion(version, foreign)
	}
	if version > 0 {
		if err := CheckShape(ctx, conn, version, own); err != nil {
			return err
		}
		// Its jobs may have been handed over to PostgreSQL.
		if m, err := ReadMoved(ctx, conn); err != nil {
			return err
		} else if m != nil {
			return m
		}
	}
	var mode string
	if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
		return ClassifyOpenError(err)
	}
	OpenStep("wal")
	if version < SchemaVersion {
		err := migrate(ctx, conn, version)
		OpenStep("migrated")
		return err
	}
	return nil
}
