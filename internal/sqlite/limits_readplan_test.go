package sqlite

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFlowReadsAreIndexRanges checks with EXPLAIN QUERY PLAN that the reads
// of why a job waits and of a queue's groups are ranges of
// lq_jobs_group_live (a group's live rows), lq_jobs_flow (the counted running rows) or the primary key,
// never a scan of lq_jobs.
func TestFlowReadsAreIndexRanges(t *testing.T) {
	s := openPlanStore(t)
	for _, qq := range []struct {
		name, sql string
		want      []string // every step on lq_jobs names one of these
		args      []any
	}{
		{"next group", nextGroupSQL, []string{"INDEX lq_jobs_group_live (queue=? AND grp>?)"}, []any{"q", ""}},
		{"group head", groupHeadSQL, []string{"USING INDEX lq_jobs_group_live (queue=? AND grp=?)"}, []any{"q", "g"}},
		{"group live", groupLiveSQL, []string{"USING COVERING INDEX lq_jobs_group_live (queue=? AND grp=?)", "USING INDEX lq_jobs_group_live (queue=? AND grp=?)"}, []any{"q", "g", 10001}},
		{"group marked", groupMarkedSQL, []string{"lq_jobs_flow (queue=? AND grp=?)"}, []any{"q", "g"}},
		{"counted in group", countedGroupSQL, []string{"lq_jobs_flow (queue=? AND grp=?"}, []any{"q", 1, "g"}},
		{"counted", countedSQL, []string{"lq_jobs_flow (queue=?"}, []any{"q", 1}},
		{"job group", jobGroupSQL, []string{"INTEGER PRIMARY KEY (rowid=?)"}, []any{1}},
	} {
		plan := queryPlan(t, s, qq.sql, qq.args...)
		found := false
		for _, d := range plan {
			if !strings.Contains(d, "lq_jobs") || strings.Contains(d, "lq_flow_starts") {
				continue
			}
			found = true
			ok := false
			for _, w := range qq.want {
				ok = ok || strings.Contains(d, w)
			}
			require.True(t, ok, "%s: step %q of plan %q is none of %q", qq.name, d, plan, qq.want)
		}
		require.True(t, found, "%s: plan %q", qq.name, plan)
		t.Logf("%s: %s", qq.name, strings.Join(plan, " | "))
	}
}
