//go:build !litequeue_control

package postgres

import "context"

// cancelForTest cancels (deletes) a pending job.
func cancelForTest(ctx context.Context, s *pgStore, id int64) error {
	_, err := s.Cancel(ctx, []int64{id})
	return err
}
