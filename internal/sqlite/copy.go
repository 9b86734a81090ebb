package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
)

// WriteCopy writes a new queue file at path, of the current schema, holding
// the rows fill inserts in one transaction: the Backup of a queue kept
// elsewhere (PostgreSQL) as a queue file. It has Backup's guarantees: it
// refuses a path that exists (fs.ErrExist) or whose directory does not
// (fs.ErrNotExist); the file is written beside path, checkpointed into one
// self-contained file, synced and linked into place, so path never holds a
// partial copy; an error from fill or the end of ctx removes what was
// written.
//
// fill's transaction has foreign keys on: insert jobs before their attempts.
// The AUTOINCREMENT counter of lq_jobs follows the largest id inserted; fill
// may raise it further (sqlite_sequence) so that the copy never reuses an id.
func WriteCopy(ctx context.Context, path string, fill func(ctx context.Context, tx *sql.Tx) error) error {
	tmpName, err := reserveCopy(path)
	if err != nil {
		return err
	}
	defer func() {
		for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
			os.Remove(tmpName + suffix)
		}
	}()
	if err := writeCopy(ctx, tmpName, fill); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("litequeue: backup to %s: %w", path, context.Cause(ctx))
		}
		return fmt.Errorf("litequeue: backup to %s: %w", path, err)
	}
	return publishCopy(tmpName, path)
}

func writeCopy(ctx context.Context, name string, fill func(ctx context.Context, tx *sql.Tx) error) error {
	v := url.Values{}
	v.Add("_pragma", "foreign_keys(1)")
	v.Add("_pragma", "synchronous(FULL)")
	v.Add("_pragma", "trusted_schema(0)")
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: name}).EscapedPath()+"?"+v.Encode())
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := prepareFile(ctx, conn, true); err != nil {
		return err
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fill(ctx, tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return classifyWriteError(err)
	}
	// The copy is one file: everything moves out of the WAL into it.
	var busy, frames, done int
	if err := conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &done); err != nil {
		return err
	}
	if busy != 0 {
		return fmt.Errorf("checkpoint of the new file %s did not complete", name)
	}
	if err := conn.Close(); err != nil {
		return err
	}
	return db.Close()
}
