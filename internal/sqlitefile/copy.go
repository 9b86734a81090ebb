package sqlitefile

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
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
// The jobs' counts by queue and state are taken after fill, in its
// transaction.
// The AUTOINCREMENT counter of lq_jobs follows the largest id inserted; fill
// may raise it further (sqlite_sequence) so that the copy never reuses an id.
func WriteCopy(ctx context.Context, path string, fill func(ctx context.Context, tx *sql.Tx) error) error {
	tmpName, err := ReserveCopy(path)
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
	return PublishCopy(tmpName, path)
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
	if err := Prepare(ctx, conn, true); err != nil {
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
	// The counts of the rows fill wrote, as migration 0010 takes them.
	if _, err := tx.ExecContext(ctx, `INSERT INTO lq_counts (queue, state, due, n)
		SELECT queue, state, CASE WHEN state = 0 THEN visible_at >> 38 ELSE 0 END, count(*) FROM lq_jobs GROUP BY 1, 2, 3`); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return ClassifyWriteError(err)
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

// ReserveCopy checks that a copy may be written to path — it does not
// exist, its directory does — and creates an empty temporary file beside it,
// whose name it returns; the caller removes it.
func ReserveCopy(path string) (string, error) {
	if path == "" {
		return "", errors.New("litequeue: backup: empty destination path")
	}
	if _, err := os.Lstat(path); err == nil {
		return "", fmt.Errorf("litequeue: backup to %s: the file exists; Backup never overwrites, so remove it or pick a new name: %w", path, fs.ErrExist)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("litequeue: backup to %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".backup-*")
	if err != nil {
		return "", fmt.Errorf("litequeue: backup to %s: %w", path, err)
	}
	name := tmp.Name()
	return name, tmp.Close()
}

// PublishCopy syncs the complete copy tmpName and links it into place at
// path, never replacing a file that appeared there meanwhile.
func PublishCopy(tmpName, path string) error {
	if err := SyncFile(tmpName); err != nil {
		return fmt.Errorf("litequeue: backup to %s: %w", path, err)
	}
	// A hard link fails if path appeared meanwhile, where a rename would
	// replace it. On a file system without hard links, check and rename.
	if err := os.Link(tmpName, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("litequeue: backup to %s: the file appeared during the backup; Backup never overwrites: %w", path, fs.ErrExist)
		}
		if _, serr := os.Lstat(path); !errors.Is(serr, fs.ErrNotExist) {
			return fmt.Errorf("litequeue: backup to %s: the file appeared during the backup; Backup never overwrites: %w", path, fs.ErrExist)
		}
		if rerr := os.Rename(tmpName, path); rerr != nil {
			return fmt.Errorf("litequeue: backup to %s: %w", path, rerr)
		}
	}
	return SyncDir(filepath.Dir(path))
}

func SyncFile(name string) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// SyncDir makes a new name in dir durable. Some systems cannot sync a
// directory (Windows); that is not an error.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer d.Close()
	_ = d.Sync()
	return nil
}
