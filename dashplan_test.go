package litequeue

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDashboardQueriesUseIndexes checks with EXPLAIN QUERY PLAN that no
// query a dashboard page runs reads the whole of lq_jobs: each is a search
// through the primary key or an index, or a scan of a partial index (of the
// live rows, or of the finished ones) that the query bounds with LIMIT.
func TestDashboardQueriesUseIndexes(t *testing.T) {
	h := setup(t, nil)
	ctx := context.Background()
	search := func(f JobQuery) string {
		where, _, err := queryWhere(f)
		require.NoError(t, err)
		return searchSQL(where)
	}
	named := func(names ...string) []any {
		var a []any
		for _, n := range names {
			a = append(a, sql.Named(n, 1))
		}
		return a
	}
	win := named("now", "before", "floor", "limit", "queue", "kind", "text", "ids")
	type query struct {
		name string
		sql  string
		args []any
	}
	queries := []query{
		{"id range", idRangeSQL, nil},
		{"live queues", nextLiveQueueSQL, []any{""}},
		{"live counts", liveCountSQL, []any{1, "q", 10}},
		{"completed counts", completedCountSQL, []any{10}},
		{"dead counts", deadCountSQL, []any{10}},
		{"first priority", firstLivePrioritySQL, []any{"q"}},
		{"next priority", nextLivePrioritySQL, []any{"q", 0}},
		{"oldest ready", oldestReadySQL, []any{"q", 0, 1}},
		{"jobs page", search(JobQuery{}), win},
		{"jobs page by queue", search(JobQuery{Queue: "q"}), win},
		{"jobs page by kind and state", search(JobQuery{Kind: "k", States: []State{StateDead}}), win},
		{"jobs page by text", search(JobQuery{Text: "x", States: []State{StateReady, StateScheduled}}), win},
		{"dead groups", deadGroupsSQL([]string{"state IN (2, 3)", "state = 3"}), []any{10}},
		{"dead groups by queue", deadGroupsSQL([]string{"state IN (2, 3)", "state = 3", "queue = ?"}), []any{"q", 10}},
		{"job", "SELECT " + jobColumns + " FROM lq_jobs WHERE id = ?", []any{1}},
		{"job attempts", `SELECT attempt, started_at, finished_at, error, decision, delay FROM lq_attempts WHERE job_id = ? ORDER BY id`, []any{1}},
		{"history", historySQL + ` AND queue = ?`, []any{0, "q"}},
	}
	for _, qq := range queries {
		rows, err := h.q.lite.DB().QueryContext(ctx, "EXPLAIN QUERY PLAN "+qq.sql, qq.args...)
		require.NoError(t, err, qq.name)
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
			plan = append(plan, detail)
		}
		require.NoError(t, rows.Err())
		rows.Close()
		for _, d := range plan {
			if !strings.Contains(d, "lq_jobs") && !strings.Contains(d, "lq_history") && !strings.Contains(d, "lq_attempts") {
				continue
			}
			full := strings.HasPrefix(d, "SCAN ") && !strings.Contains(d, "USING INDEX lq_jobs_claim") &&
				!strings.Contains(d, "USING INDEX lq_jobs_finished") && !strings.Contains(d, "USING COVERING INDEX lq_jobs_claim") &&
				!strings.Contains(d, "USING COVERING INDEX lq_jobs_finished")
			require.False(t, full, "%s: %q reads the whole table; plan %q", qq.name, d, plan)
		}
		t.Logf("%s: %s", qq.name, strings.Join(plan, " | "))
	}
}
