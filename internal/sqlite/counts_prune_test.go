package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// A count that falls to 0 stays as a row until the writer prunes the empty
// counts, every pruneEvery transactions that lowered one: claiming jobs due
// in pruneEvery+100 distinct due buckets, one claim per transaction, empties
// as many counts, and afterwards only those emptied since the prune are
// left.
func TestEmptiedCountsArePruned(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "q.db"), Options{BusyTimeout: time.Second, Synchronous: "OFF"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = pruneEvery + 100
	jobs := make([]store.NewJob, n)
	for i := range jobs {
		at := int64(i) << dueShift
		jobs[i] = store.NewJob{Queue: "q", Kind: "k", VisibleAt: at, CreatedAt: at, Payload: []byte(`{}`)}
	}
	if _, _, err := s.Insert(ctx, store.Tx{}, jobs); err != nil {
		t.Fatal(err)
	}
	now := int64(n) << dueShift
	for i := range n {
		q := store.ClaimQuery{Queue: "q", Kinds: []string{"k"}, KindsJSON: `["k"]`, N: 1, Now: now, Until: now + int64(time.Hour), Lease: int64(i + 1)}
		if got, err := s.Claim(ctx, q, func([]store.Claimed) {}); err != nil || got != 1 {
			t.Fatalf("claim %d: %d, %v", i, got, err)
		}
	}
	var zero, running int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM lq_counts WHERE n = 0`).Scan(&zero); err != nil {
		t.Fatal(err)
	}
	if err := s.db.QueryRowContext(ctx, `SELECT n FROM lq_counts WHERE queue = 'q' AND state = 1`).Scan(&running); err != nil {
		t.Fatal(err)
	}
	if zero != n-pruneEvery {
		t.Errorf("%d counts of 0 are left after %d emptied; want the %d emptied since the prune", zero, n, n-pruneEvery)
	}
	if running != n {
		t.Errorf("running count %d, want %d", running, n)
	}
}
