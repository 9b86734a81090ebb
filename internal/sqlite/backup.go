package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Backup implements store.Backuper: it writes a consistent copy of the queue file to path while the queue
// keeps running: every job committed before Backup began is in the copy,
// and nothing committed later is half in it. Workers and enqueues go on
// during the copy (it is a read, SQLite's VACUUM INTO, which also compacts
// the copy). The copy is written to a temporary file beside path, synced,
// then linked into place, so path never holds a partial copy.
//
// Backup refuses a path that already exists (fs.ErrExist), or whose
// directory does not (fs.ErrNotExist); it never overwrites. To restore,
// stop the processes using the queue, replace the queue file with the copy
// and remove the old file's -wal and -shm beside it, then Open. The copy is
// a queue file of its own: Open (or Options.ReadOnly) it directly. A closed
// queue returns ErrClosed; ctx cancels the copy and removes what was
// written.
func (s *Store) Backup(ctx context.Context, path string) error {
	tmpName, err := reserveCopy(path)
	if err != nil {
		return err
	}
	// VACUUM INTO wants a file that does not exist or is empty; the empty
	// temporary file reserves a unique name.
	defer os.Remove(tmpName)
	if _, err := s.db.ExecContext(ctx, "VACUUM INTO ?", tmpName); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("litequeue: backup to %s: %w", path, context.Cause(ctx))
		}
		return fmt.Errorf("litequeue: backup to %s: %w", path, classifyWriteError(err))
	}
	return publishCopy(tmpName, path)
}

// reserveCopy checks that a copy may be written to path — it does not
// exist, its directory does — and creates an empty temporary file beside it,
// whose name it returns; the caller removes it.
func reserveCopy(path string) (string, error) {
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

// publishCopy syncs the complete copy tmpName and links it into place at
// path, never replacing a file that appeared there meanwhile.
func publishCopy(tmpName, path string) error {
	if err := syncFile(tmpName); err != nil {
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
	return syncDir(filepath.Dir(path))
}

func syncFile(name string) error {
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

// syncDir makes a new name in dir durable. Some systems cannot sync a
// directory (Windows); that is not an error.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer d.Close()
	_ = d.Sync()
	return nil
}

// effectivePragmas are the settings Pragmas reads back: the ones that decide
// durability and write speed, and whether the file's schema is trusted.
var effectivePragmas = []string{"journal_mode", "synchronous", "busy_timeout", "foreign_keys", "trusted_schema",
	"fullfsync", "checkpoint_fullfsync", "page_size", "wal_autocheckpoint"}

// Pragmas reads back the SQLite settings in effect on the writer's
// connection (on the read pool for a read-only store).
func (s *Store) Pragmas(ctx context.Context) (map[string]string, error) {
	out := make(map[string]string, len(effectivePragmas))
	err := s.Read(ctx, func(ctx context.Context, db Execer) error {
		for _, p := range effectivePragmas {
			var v string
			if err := db.QueryRowContext(ctx, "PRAGMA "+p).Scan(&v); err != nil {
				return fmt.Errorf("litequeue: PRAGMA %s: %w", p, err)
			}
			out[p] = v
		}
		return nil
	})
	return out, err
}
