package litequeue

import (
	"context"

	"github.com/litequeue/litequeue/internal/sqlitefile"
	"github.com/litequeue/litequeue/internal/store"
)

// ErrMoved is what Open and New return (errors.Is) for a queue file whose
// jobs were moved to PostgreSQL (postgres.MoveFile, lqinspect migrate),
// unless opened read-only: a queue on the file would run the moved jobs a
// second time. errors.As gives a *MovedError with the destination.
var ErrMoved = store.ErrMoved

// MovedError says where and when a queue file was moved (its To has the
// password masked), and whether the move recorded its end (Complete); a
// move that did not is finished by running it again.
type MovedError = store.MovedError

// Moved returns the move the queue file records (a read-only open of a
// moved file succeeds), without its Path, or nil when the file was not
// moved or the queue is not on a SQLite file.
func (q *Queue) Moved(ctx context.Context) (*MovedError, error) {
	if q.lite == nil {
		return nil, nil
	}
	m, err := sqlitefile.ReadMoved(ctx, q.lite.DB())
	if err != nil {
		return nil, wrapf("litequeue: reading the move record: %w", err)
	}
	return m, nil
}
