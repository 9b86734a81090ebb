package sqlite

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/litequeue/litequeue/internal/store"
	"github.com/stretchr/testify/require"
)

// TestTagListingReadsTheTagIndex checks that a listing by tag walks the
// first tag's range of lq_job_tags and reaches each job by its id: its cost
// follows the page, not how many jobs the file or the tag has.
func TestTagListingReadsTheTagIndex(t *testing.T) {
	s := openPlanStore(t)
	for _, q := range []store.JobQuery{
		{Tags: []string{"a"}},
		{Tags: []string{"a", "b"}, States: []store.ListState{store.ListDead}, Metadata: map[string]string{"k": "v"}},
	} {
		where, args := queryWhere(q)
		args = append(args, sql.Named("before", 10), sql.Named("floor", 1), sql.Named("limit", 5))
		plan := queryPlan(t, s, searchSQLFrom(q, where), args...)
		require.NotEmpty(t, plan)
		require.True(t, strings.HasPrefix(plan[0], "SEARCH tg USING PRIMARY KEY (tag=? AND job_id>? AND job_id<?)"),
			"the tag's range of lq_job_tags drives the page: %q", plan)
		for _, d := range plan {
			require.False(t, strings.HasPrefix(d, "SCAN ") || strings.Contains(d, "TEMP B-TREE"), "%q in plan %q", d, plan)
		}
	}
}
