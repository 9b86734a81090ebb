package litequeue

import "context"

// Pragmas reads back the SQLite settings in effect on the queue's writer
// connection (on the read pool for a read-only queue): journal_mode,
// synchronous (0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA), busy_timeout in ms,
// foreign_keys, trusted_schema (0: the file's views and triggers may call
// only SQLite's innocuous functions), fullfsync and checkpoint_fullfsync (1
// on macOS, see Durability), page_size in bytes and wal_autocheckpoint in
// pages, after Durability, BusyTimeout and Options.Pragmas were applied. For
// benchmarks and diagnostics. On a queue that is not on SQLite
// it returns ErrUnsupported.
func (q *Queue) Pragmas(ctx context.Context) (map[string]string, error) {
	if q.lite == nil {
		return nil, ErrUnsupported
	}
	return q.lite.Pragmas(ctx)
}
