package sqlite

import (
	"context"
	"fmt"
	"os"

	"github.com/litequeue/litequeue/internal/sqlitefile"
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
	tmpName, err := sqlitefile.ReserveCopy(path)
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
		return fmt.Errorf("litequeue: backup to %s: %w", path, sqlitefile.ClassifyWriteError(err))
	}
	return sqlitefile.PublishCopy(tmpName, path)
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
