package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/litequeue/litequeue/internal/store"
)

const (
	reportProgressSQL = `UPDATE lq_jobs SET progress = ?, progress_msg = ?, progress_at = ?
		WHERE id = ? AND lease = ? AND state = 1`
	reportOutputSQL = `UPDATE lq_jobs SET output = ? WHERE id = ? AND lease = ? AND state = 1`
	reportBothSQL   = `UPDATE lq_jobs SET progress = ?, progress_msg = ?, progress_at = ?, output = ?
		WHERE id = ? AND lease = ? AND state = 1`
)

// Report implements store.Runtime: one conditional UPDATE in the writer's next
// transaction.
func (s *Store) Report(ctx context.Context, r store.Report) error {
	if s.w == nil {
		return store.ErrReadOnly
	}
	if !r.HasProgress && r.Output == nil {
		return nil
	}
	return s.w.do(ctx, func(ctx context.Context, tx Execer) error {
		var ok bool
		var err error
		switch {
		case r.HasProgress && r.Output != nil:
			ok, err = execHolds(ctx, tx, reportBothSQL, r.Fraction, r.Message, r.At, r.Output, r.ID, r.Lease.Lease)
		case r.HasProgress:
			ok, err = execHolds(ctx, tx, reportProgressSQL, r.Fraction, r.Message, r.At, r.ID, r.Lease.Lease)
		default:
			ok, err = execHolds(ctx, tx, reportOutputSQL, r.Output, r.ID, r.Lease.Lease)
		}
		if err != nil {
			return err
		}
		if !ok {
			return store.ErrLeaseLost
		}
		return nil
	})
}

// Progress implements store.Admin: one read by primary key on the read pool.
func (s *Store) Progress(ctx context.Context, id int64) (store.JobProgress, error) {
	var p store.JobProgress
	var frac sql.NullFloat64
	var msg sql.NullString
	var at sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT state, visible_at, progress, progress_msg, progress_at, output FROM lq_jobs WHERE id = ?`, id).
		Scan(&p.State, &p.VisibleAt, &frac, &msg, &at, &p.Output)
	if errors.Is(err, sql.ErrNoRows) {
		return store.JobProgress{}, fmt.Errorf("litequeue: job %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.JobProgress{}, err
	}
	p.HasProgress = at.Valid
	p.Fraction, p.Message, p.At = frac.Float64, msg.String, at.Int64
	return p, nil
}
