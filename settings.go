package litequeue

import (
	"context"
	"fmt"
)

// effectivePragmas are the settings Pragmas reads back: the ones that decide
// durability and write speed.
var effectivePragmas = []string{"journal_mode", "synchronous", "busy_timeout", "foreign_keys"}

// Pragmas reads back the SQLite settings in effect on the queue's writer
// connection (on the read pool for a read-only queue): journal_mode,
// synchronous (0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA), busy_timeout in ms and
// foreign_keys, after Durability, BusyTimeout and Options.Pragmas were
// applied. For benchmarks and diagnostics.
func (q *Queue) Pragmas(ctx context.Context) (map[string]string, error) {
	out := make(map[string]string, len(effectivePragmas))
	read := func(ctx context.Context, db execer) error {
		for _, p := range effectivePragmas {
			var v string
			if err := db.QueryRowContext(ctx, "PRAGMA "+p).Scan(&v); err != nil {
				return fmt.Errorf("litequeue: PRAGMA %s: %w", p, err)
			}
			out[p] = v
		}
		return nil
	}
	if q.w == nil {
		return out, read(ctx, q.db)
	}
	return out, q.w.read(ctx, read)
}
