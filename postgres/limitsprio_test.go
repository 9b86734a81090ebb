package postgres

import (
	"context"
	"testing"

	"github.com/litequeue/litequeue/internal/store"
	"github.com/stretchr/testify/require"
)

// TestFlowClaimWalksPrioritiesInOrder checks that a group-limited claim
// takes the most urgent priority's rows first and goes on to the next
// priorities for what it still takes, within each group's limit: with
// KeyConcurrency 1, groups a and b have rows of priorities 1 and 3, group c
// of priority 3 only, and group d of priority 7; a claim of 3 takes a and b
// at priority 1 and c at priority 3, and the next claim takes d at 7 (a and
// b are running).
func TestFlowClaimWalksPrioritiesInOrder(t *testing.T) {
	s, _, _ := newTestStore(t)
	ctx := context.Background()
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO lq_jobs (queue, kind, priority, visible_at, run_at, created_at, payload, grp)
VALUES ('q', 'k', 3, 1, 1, 1, '\x7b7d', 'a'), ('q', 'k', 3, 2, 2, 2, '\x7b7d', 'b'), ('q', 'k', 3, 3, 3, 3, '\x7b7d', 'c'),
       ('q', 'k', 1, 4, 4, 4, '\x7b7d', 'a'), ('q', 'k', 1, 5, 5, 5, '\x7b7d', 'b'), ('q', 'k', 7, 6, 6, 6, '\x7b7d', 'd')`))
	require.NoError(t, err)
	_, err = s.SetLimits(ctx, "q", store.Limits{KeyConcurrency: 1})
	require.NoError(t, err)
	claim := func(n int) []int64 {
		var got []int64
		_, err := s.claimLimited(ctx, store.ClaimQuery{Queue: "q", Kinds: []string{"k"}, N: n, Now: 100, Until: 1000, Lease: 1, Limited: true, Process: 1},
			func(cs []store.Claimed) {
				for _, c := range cs {
					got = append(got, c.ID)
				}
			})
		require.NoError(t, err)
		return got
	}
	require.ElementsMatch(t, []int64{4, 5, 3}, claim(3), "priority 1's a and b, then priority 3's c")
	require.ElementsMatch(t, []int64{6}, claim(3), "a and b run: priority 7's d only")
}
