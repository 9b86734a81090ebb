package litequeue

import (
	"context"
	"errors"
	"fmt"

	"github.com/litequeue/litequeue/internal/store"
)

// Backup writes a consistent copy of the queue file to path while the queue
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
//
// Backup needs a store that can write a copy of its database (the SQLite
// store); on other backends it returns ErrUnsupported — use the database's
// own backup tools (pg_dump for PostgreSQL).
func (q *Queue) Backup(ctx context.Context, path string) error {
	q.mu.Lock()
	closed := q.closed
	q.mu.Unlock()
	if closed {
		return ErrClosed
	}
	b, ok := q.store.(store.Backuper)
	if !ok {
		return fmt.Errorf("%w: Backup copies a queue file; back a queue on another database up with that database's own tools (for PostgreSQL, pg_dump --schema of the queue's schema, or the server's base backups)", ErrUnsupported)
	}
	return b.Backup(ctx, path)
}

// ErrUnsupported: the operation needs a feature the queue's backend does not
// have (for example Backup on PostgreSQL). errors.Is(err, errors.ErrUnsupported)
// holds too.
var ErrUnsupported = errors.ErrUnsupported
