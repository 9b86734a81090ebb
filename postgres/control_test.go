package postgres

import "context"

// cancelForTest cancels a pending job (it stays, in state cancelled).
func cancelForTest(ctx context.Context, s *pgStore, id int64) error {
	_, err := s.Cancel(ctx, []int64{id}, 1, nil)
	return err
}
