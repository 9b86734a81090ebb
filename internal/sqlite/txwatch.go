package sqlite

import (
	"context"
	"database/sql"

	"github.com/litequeue/litequeue/internal/sqlitefile"
	"github.com/litequeue/litequeue/internal/store"
)

var _ store.TxWatcher = (*Store)(nil)

// TxMark implements store.TxWatcher: on a queue file the job itself tells
// whether the transaction committed.
func (s *Store) TxMark(_ context.Context, _ store.Tx, id, createdAt int64) (store.TxMark, error) {
	return store.TxMark{ID: id, CreatedAt: createdAt}, nil
}

// txJobSQL reads what tells whether a job an application's transaction
// inserted was committed: its row's enqueue time (NULL when no row has its
// id) and the highest id lq_jobs ever committed (AUTOINCREMENT).
const txJobSQL = `SELECT (SELECT created_at FROM lq_jobs WHERE id = ?1),
	coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'lq_jobs'), 0)`

// TxEnded implements store.TxWatcher. It reads in a transaction of the
// writer, which begins only once the application's transactions have
// ended: each holds the write lock from its insert until it commits or
// rolls back. Then the job's row with its enqueue time means committed; a
// row of another job with its id means rolled back (a rolled-back
// transaction gives its ids back to the next insert), and so does no row
// with no id as high committed since. No row though the ids went past it
// means committed, and the job claimed, run and deleted already by another
// process — or, which this cannot tell, rolled back and its id given to a
// job that was deleted as quickly.
func (s *Store) TxEnded(ctx context.Context, marks []store.TxMark) ([]store.TxState, error) {
	if s.w == nil {
		return nil, store.ErrReadOnly
	}
	states := make([]store.TxState, len(marks))
	err := s.w.do(ctx, func(ctx context.Context, tx Execer) error {
		for i, m := range marks {
			var created sql.NullInt64
			var seq int64
			if err := tx.QueryRowContext(ctx, txJobSQL, m.ID).Scan(&created, &seq); err != nil {
				return err
			}
			switch {
			case created.Valid && created.Int64 == m.CreatedAt, !created.Valid && seq >= m.ID:
				states[i] = store.TxCommitted
			default:
				states[i] = store.TxRolledBack
			}
		}
		return nil
	})
	if err != nil {
		return nil, sqlitefile.ClassifyWriteError(err)
	}
	return states, nil
}
