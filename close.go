package litequeue

import (
	"context"
	"errors"
)

// Closing a queue: stop it, flush what it keeps in memory, close its store.

// Close stops the workers (as Stop with a context that never ends, so running
// handlers are waited for), writes the pending completions and the
// per-minute history's counts, and closes the database handles the queue
// opened. Close on a closed queue returns nil.
//
// A queue made by Open (not read-only) checkpoints the WAL into the file and
// truncates it before closing, so the .db file alone holds every job: it can
// be copied once Close returns. If another connection (another process)
// is reading the file at that moment the checkpoint does what it can
// without waiting, and the rest stays in the -wal until the next checkpoint.
func (q *Queue) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	running := q.run != nil
	q.mu.Unlock()
	var errs []error
	if running {
		errs = append(errs, q.Stop(context.Background()))
	}
	// Counts of events since the last flush (enqueues of a queue that never
	// started, or after Stop) go into the history before the store closes.
	_ = q.FlushHistory(context.Background())
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cleanup.stop()
	q.closeWatchers()
	q.closeTx(q.opts.BusyTimeout)
	errs = append(errs, q.store.Close())
	q.closeEvents()
	return errors.Join(errs...)
}
