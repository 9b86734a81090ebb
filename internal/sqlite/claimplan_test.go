package sqlite

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestClaimQueriesReadOnlyHandledKinds checks with EXPLAIN QUERY PLAN that
// the claim, the insert-and-claim hand-off and the next-due computation read
// lq_jobs only through ranges that include the kind (lq_jobs_kind_due), the
// priority walk's seeks and the primary key: due rows of a kind the process
// does not handle are never stepped over.
func TestClaimQueriesReadOnlyHandledKinds(t *testing.T) {
	s := openPlanStore(t)
	queries := []struct {
		name string
		sql  string
		args []any
	}{
		{"claim of one kind", claimSQL(1), []any{1, 2, 3, "q", nil, 10, 0, "a"}},
		{"claim of three kinds", claimSQL(3), []any{1, 2, 3, "q", nil, 10, 0, "a", "b", "c"}},
		{"claim of the inserted job", claimNewSQL, []any{1, 2, 3, 4, "q", 0, `["a","b"]`, 9}},
		{"next due", nextDueSQL, []any{"q", 0, `["a","b"]`}},
		{"next priority", nextPrioritySQL, []any{"q", 0}},
	}
	for _, qq := range queries {
		plan := queryPlan(t, s, qq.sql, qq.args...)
		for _, d := range plan {
			if !strings.Contains(d, "lq_jobs ") && !strings.HasSuffix(d, "lq_jobs") {
				continue
			}
			ok := strings.Contains(d, "INTEGER PRIMARY KEY") ||
				strings.HasPrefix(d, "SEARCH lq_jobs USING INDEX lq_jobs_kind_due (queue=? AND priority=? AND kind=?") ||
				strings.HasPrefix(d, "SEARCH lq_jobs USING COVERING INDEX lq_jobs_kind_due (queue=? AND priority=? AND kind=?") ||
				(qq.name == "next priority" || qq.name == "claim of the inserted job") && strings.Contains(d, "(queue=? AND priority>?)") ||
				qq.name == "claim of the inserted job" && strings.Contains(d, "(queue=?)")
			require.True(t, ok, "%s: %q is not a range of one handled kind; plan %q", qq.name, d, plan)
		}
		t.Logf("%s: %s", qq.name, strings.Join(plan, " | "))
	}
}
