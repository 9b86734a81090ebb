package sqlitefile

import (
	"context"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// A queue file whose jobs a move (postgres.MoveFile) handed over to
// PostgreSQL says so in lq_meta, so that no queue runs them again from the
// file: its format becomes movedFormat — which every build, older ones
// too, refuses as not a litequeue file, while this build opens it
// read-only and refuses to open it for writing with a *store.MovedError —
// and moved_to, moved_schema, moved_at and moved_state record where, when
// and whether the move finished. The move marks the file before it copies
// anything and records the end after PostgreSQL committed, so a crash at
// any point leaves the file refusing writes (see MarkMoving).

// movedFormat is the format of a moved file.
const movedFormat = "litequeue (moved to PostgreSQL)"

// Move states.
const (
	moveBegun = "begun"
	moveDone  = "done"
)

// ReadMoved returns the move a file records, or nil when it was not moved.
func ReadMoved(ctx context.Context, db Execer) (*store.MovedError, error) {
	rows, err := db.QueryContext(ctx, `SELECT key, value FROM lq_meta WHERE key IN ('format', 'moved_to', 'moved_schema', 'moved_at', 'moved_state')`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	kv := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		kv[k] = v
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if kv["format"] != movedFormat {
		return nil, nil
	}
	m := &store.MovedError{To: kv["moved_to"], Schema: kv["moved_schema"], Complete: kv["moved_state"] == moveDone}
	m.At, _ = time.Parse(time.RFC3339Nano, kv["moved_at"])
	return m, nil
}

// MarkMoving marks the file moved, to the PostgreSQL queue at to (its
// password masked) in schema, at at, not yet complete: from its commit on
// no queue opens the file for writing. tx is a write transaction on the
// file (the mover's exclusive one).
func MarkMoving(ctx context.Context, tx Execer, to, schema string, at time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO lq_meta (key, value) VALUES ('format', ?), ('moved_to', ?), ('moved_schema', ?), ('moved_at', ?), ('moved_state', ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, movedFormat, to, schema, at.UTC().Format(time.RFC3339Nano), moveBegun)
	return err
}

// MarkMoved records that the move finished: PostgreSQL committed the copy.
func MarkMoved(ctx context.Context, tx Execer) error {
	_, err := tx.ExecContext(ctx, `UPDATE lq_meta SET value = ? WHERE key = 'moved_state'`, moveDone)
	return err
}

// Unmark undoes MarkMoving after a move that copied nothing (its
// PostgreSQL transaction failed).
func Unmark(ctx context.Context, tx Execer) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM lq_meta WHERE key IN ('moved_to', 'moved_schema', 'moved_at', 'moved_state')`); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `UPDATE lq_meta SET value = ? WHERE key = 'format'`, formatName)
	return err
}
