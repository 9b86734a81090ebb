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
// On PostgreSQL, Backup writes the queue's tables, read as one consistent
// snapshot, to a new queue file at path with the same guarantees: jobs keep
// their ids, states, attempts, due times, leases and history; paused
// queues, schedules and the dashboard's counts come along; new ids in the
// copy continue after PostgreSQL's (for a role that may not read the id
// sequence, after the largest id a copied row names). The copy runs on one
// machine with Open, or goes back into a PostgreSQL schema with
// postgres.MoveFile (lqinspect migrate). It copies the queue, not the
// application's database: back that up with the server's tools.
//
// A store that cannot write a copy returns ErrUnsupported.
func (q *Queue) Backup(ctx context.Context, path string) error {
	q.mu.Lock()
	closed := q.closed
	q.mu.Unlock()
	if closed {
		return ErrClosed
	}
	b, ok := q.store.(store.Backuper)
	if !ok {
		return fmt.Errorf("%w: this queue's store cannot write a copy; back it up with its database's own tools", ErrUnsupported)
	}
	return b.Backup(ctx, path)
}

// ErrUnsupported: the operation needs a feature the queue's backend does not
// have. errors.Is(err, errors.ErrUnsupported)
// holds too.
var ErrUnsupported = errors.ErrUnsupported
