package sqlite

import (
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue/internal/store"
)

// TestDashboardQueriesUseIndexes checks with EXPLAIN QUERY PLAN that no
// query a dashboard page or a bulk action runs reads the whole of lq_jobs:
// each is a search through the primary key or an index, or a scan of a
// partial index (of the live rows, the finished or the cancelled ones) that the query
// bounds with LIMIT.
func TestDashboardQueriesUseIndexes(t *testing.T) {
	s := openPlanStore(t)
	where := func(q store.JobQuery) []string {
		w, _ := queryWhere(q)
		return w
	}
	named := func(names ...string) []any {
		var a []any
		for _, n := range names {
			a = append(a, sql.Named(n, 1))
		}
		return a
	}
	win := named("now", "before", "floor", "limit", "queue", "kind", "text", "ids")
	chunk := named("now", "cursor", "chunk", "queue", "kind", "text", "ids")
	dead, deadArgs := deadQuery(store.JobQuery{})
	deadQ, deadQArgs := deadQuery(store.JobQuery{Queue: "q", Kind: "k"})
	deadK, deadKArgs := deadQuery(store.JobQuery{Kinds: []string{"a", "b"}, FinishedBefore: 1, Text: "x"})
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
		{"cancelled counts", cancelledCountSQL, []any{10}},
		{"first priority", firstLivePrioritySQL, []any{"q"}},
		{"next priority", nextLivePrioritySQL, []any{"q", 0}},
		{"oldest ready: next kind", oldestKindSQL, []any{"q", 0, "k"}},
		{"oldest ready: a range's first rows", oldestHeadSQL, []any{"q", 0, "k", 1, 64}},
		{"oldest ready: the rest of a range", oldestRestSQL, []any{"q", 0, "k", 1, 2}},
		{"jobs page", searchSQL(where(store.JobQuery{})), win},
		{"jobs page by queue", searchSQL(where(store.JobQuery{Queue: "q"})), win},
		{"jobs page by kind and state", searchSQL(where(store.JobQuery{Kind: "k", States: []store.ListState{store.ListDead}})), win},
		{"jobs page by text", searchSQL(where(store.JobQuery{Text: "x", States: []store.ListState{store.ListReady, store.ListScheduled}})), win},
		{"bulk chunk", bulkSelectSQL(where(store.JobQuery{States: []store.ListState{store.ListDead}})), chunk},
		{"bulk chunk by ids", bulkSelectSQL(where(store.JobQuery{IDs: []int64{1, 2}, States: []store.ListState{store.ListDead}})), chunk},
		{"bulk chunk by queue and text", bulkSelectSQL(where(store.JobQuery{Queue: "q", Text: "x"})), chunk},
		{"dead groups", latestDeadSQL(dead), append(deadArgs, named("limit")...)},
		{"dead groups by queue", latestDeadSQL(deadQ), append(deadQArgs, named("limit")...)},
		{"dead groups by kinds, time and text", latestDeadSQL(deadK), append(deadKArgs, named("limit")...)},
		{"dead group chunk", deadBeforeSQL(deadQ), append(deadQArgs, named("before", "limit")...)},
		{"jobs page by kinds and time", searchSQL(where(store.JobQuery{Kinds: []string{"a"}, CreatedFrom: 1, CreatedBefore: 2})),
			named("now", "before", "floor", "limit", "kinds", "created_from", "created_before")},
		{"job", "SELECT " + JobColumns + " FROM lq_jobs WHERE id = ?", []any{1}},
		{"job attempts", `SELECT attempt, started_at, finished_at, error, decision, delay FROM lq_attempts WHERE job_id = ? ORDER BY id`, []any{1}},
		{"history", historySQL + ` AND queue = ? ORDER BY minute, queue`, []any{0, "q"}},
		{"history prune", pruneHistorySQL, []any{0}},
	}
	for _, qq := range queries {
		plan := queryPlan(t, s, qq.sql, qq.args...)
		for _, d := range plan {
			if !strings.Contains(d, "lq_jobs") && !strings.Contains(d, "lq_history") && !strings.Contains(d, "lq_attempts") {
				continue
			}
			full := strings.HasPrefix(d, "SCAN ") && !strings.Contains(d, "USING INDEX lq_jobs_kind_due") &&
				!strings.Contains(d, "USING INDEX lq_jobs_finished") && !strings.Contains(d, "USING COVERING INDEX lq_jobs_kind_due") &&
				!strings.Contains(d, "USING COVERING INDEX lq_jobs_finished") && !strings.Contains(d, "USING INDEX lq_jobs_cancelled")
			require.False(t, full, "%s: %q reads the whole table; plan %q", qq.name, d, plan)
		}
		t.Logf("%s: %s", qq.name, strings.Join(plan, " | "))
	}
}

// openPlanStore opens a store on a new file for a plan test.
func openPlanStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "queue.db"), Options{BusyTimeout: 5 * time.Second, Synchronous: "FULL", Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// queryPlan returns the detail column of EXPLAIN QUERY PLAN for query.
func queryPlan(t *testing.T, s *Store, query string, args ...any) []string {
	t.Helper()
	rows, err := s.DB().QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+query, args...)
	require.NoError(t, err)
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
		plan = append(plan, detail)
	}
	require.NoError(t, rows.Err())
	return plan
}
