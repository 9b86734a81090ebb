package sqlite

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStatsQueriesReadNoBacklog checks with EXPLAIN QUERY PLAN that Stats
// reads lq_counts and, of lq_jobs, only seeks and ranges of one (queue,
// priority, kind) of lq_jobs_kind_due bounded by now: never a scan of a
// queue's rows, nor of the ready, finished or dead ones. The completion's
// lookup of a lease's queue reads by primary key.
func TestStatsQueriesReadNoBacklog(t *testing.T) {
	s := openPlanStore(t)
	queries := []struct {
		name, sql string
		args      []any
		want      string
	}{
		{"counts", statsCountsSQL, nil, "SCAN lq_counts"},
		{"first group", statsFirstGroupSQL, []any{"q"}, "SEARCH lq_jobs USING INDEX lq_jobs_kind_due (queue=?)"},
		{"next kind", statsNextGroupSQL, []any{"q", 0, "k"}, "SEARCH lq_jobs USING INDEX lq_jobs_kind_due (queue=? AND priority=? AND kind>?)"},
		{"next priority", statsNextGroupSQL, []any{"q", 0, "k"}, "SEARCH lq_jobs USING INDEX lq_jobs_kind_due (queue=? AND priority>?)"},
		{"later", statsLaterSQL, []any{"q", 0, "k", 5, 9}, "SEARCH lq_jobs USING INDEX lq_jobs_kind_due (queue=? AND priority=? AND kind=? AND visible_at>? AND visible_at<?)"},
		{"next", statsNextSQL, []any{"q", 0, "k", 5}, "SEARCH lq_jobs USING INDEX lq_jobs_kind_due (queue=? AND priority=? AND kind=? AND visible_at>?)"},
		{"oldest, first rows", oldestHeadSQL, []any{"q", 0, "k", 5, 64}, "SEARCH lq_jobs USING INDEX lq_jobs_kind_due (queue=? AND priority=? AND kind=? AND visible_at<?)"},
		{"oldest, the rest", oldestRestSQL, []any{"q", 0, "k", 5, 9}, "SEARCH lq_jobs USING INDEX lq_jobs_kind_due (queue=? AND priority=? AND kind=? AND visible_at>? AND visible_at<?)"},
		{"lease queue", leaseQueueSQL, []any{"[1,2]", 7}, "SEARCH lq_jobs USING INTEGER PRIMARY KEY (rowid=?)"},
	}
	for _, qq := range queries {
		plan := queryPlan(t, s, qq.sql, qq.args...)
		t.Logf("%s: %s", qq.name, strings.Join(plan, " | "))
		require.True(t, slices.ContainsFunc(plan, func(d string) bool { return strings.HasSuffix(d, qq.want) }), "%s: %q", qq.name, plan)
		for _, d := range plan {
			require.False(t, strings.HasPrefix(d, "SCAN lq_jobs"), "%s: %q scans lq_jobs", qq.name, d)
			require.NotContains(t, d, "(priority,kind)>", "%s: a row-value range steps over the rows of its start", qq.name)
		}
	}
}
