package sqlite

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue/internal/store"
)

// TestNextDueLivePageUsesTheClaimIndex checks with EXPLAIN QUERY PLAN that
// a next-due page of live jobs reads ranges of the claim index in order:
// no query of it scans lq_jobs (but for the claim index, LIMIT 1) or sorts
// (USE TEMP B-TREE).
func TestNextDueLivePageUsesTheClaimIndex(t *testing.T) {
	s := openPlanStore(t)
	live := []store.ListState{store.ListReady, store.ListScheduled, store.ListRunning}
	args := []any{sql.Named("now", 1), sql.Named("queue", "q"), sql.Named("prio", 0), sql.Named("limit", 10),
		sql.Named("kind", "k"), sql.Named("due", 1), sql.Named("id", 1)}
	queries := map[string][]any{
		firstRangeSQL:      nil,
		firstQueueRangeSQL: {"q"},
		nextRangeSQL:       {"q", 0, "k"},
	}
	for _, f := range []store.JobFilter{
		{States: live},
		{States: live[:1], Kind: "k"},
		{States: live, After: &store.Cursor{Priority: 0}},
		{States: live, After: &store.Cursor{Priority: 1}},
		{States: live, After: &store.Cursor{Priority: -1}},
	} {
		q := nextDuePageSQL(JobColumns, f, 0)
		var used []any
		for _, a := range args {
			if strings.Contains(q, ":"+a.(sql.NamedArg).Name) {
				used = append(used, a)
			}
		}
		queries[q] = used
	}
	for q, a := range queries {
		plan := queryPlan(t, s, q, a...)
		for _, d := range plan {
			// The first range is a scan of the claim index that LIMIT 1 stops.
			require.False(t, strings.HasPrefix(d, "SCAN ") && !strings.Contains(d, "INDEX lq_jobs_kind_due") && !strings.HasPrefix(d, "SCAN (subquery"), "%q scans: %q", q, plan)
			require.NotContains(t, d, "TEMP B-TREE", "%q sorts: %q", q, plan)
		}
		t.Logf("%s\n  %s", q, strings.Join(plan, " | "))
	}
}
