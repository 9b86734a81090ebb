package postgres

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// planNode is one node of EXPLAIN (ANALYZE, FORMAT JSON).
type planNode struct {
	NodeType      string     `json:"Node Type"`
	Relation      string     `json:"Relation Name"`
	Index         string     `json:"Index Name"`
	ActualRows    float64    `json:"Actual Rows"`
	Loops         float64    `json:"Actual Loops"`
	RemovedFilter float64    `json:"Rows Removed by Filter"`
	RemovedIndex  float64    `json:"Rows Removed by Index Recheck"`
	Plans         []planNode `json:"Plans"`
}

// explainAnalyze runs query with args under EXPLAIN ANALYZE in a
// transaction it rolls back, and returns the plan's root. generic plans it
// as the driver's prepared statement is planned after its first
// executions: once, for any parameters (PREPARE with plan_cache_mode
// force_generic_plan), which is how the queue runs it most of the time.
func explainAnalyze(t *testing.T, db *sql.DB, generic bool, query string, args ...any) planNode {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback()
	var out []byte
	if generic {
		_, err := tx.ExecContext(ctx, "SET LOCAL plan_cache_mode = force_generic_plan")
		require.NoError(t, err)
		_, err = tx.ExecContext(ctx, "PREPARE lq_explained AS "+query)
		require.NoError(t, err)
		defer tx.ExecContext(ctx, "DEALLOCATE lq_explained") // a session's, not the transaction's
		lits := make([]string, len(args))
		for i, a := range args {
			lits[i] = sqlLiteral(a)
		}
		require.NoError(t, tx.QueryRowContext(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE lq_explained ("+strings.Join(lits, ", ")+")").Scan(&out))
	} else {
		require.NoError(t, tx.QueryRowContext(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+query, args...).Scan(&out))
	}
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal(out, &plans), "%s", out)
	return plans[0].Plan
}

// sqlLiteral writes a test's parameter as an SQL literal.
func sqlLiteral(a any) string {
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	switch v := a.(type) {
	case string:
		return quote(v)
	case []byte:
		return quote(`\x`+hex.EncodeToString(v)) + "::bytea"
	case []string:
		q := make([]string, len(v))
		for i, s := range v {
			q[i] = quote(s)
		}
		return "ARRAY[" + strings.Join(q, ", ") + "]::text[]"
	case []int64:
		q := make([]string, len(v))
		for i, n := range v {
			q[i] = strconv.FormatInt(n, 10)
		}
		return "ARRAY[" + strings.Join(q, ", ") + "]::bigint[]"
	default:
		return fmt.Sprint(v)
	}
}

// rowsRead is how many rows of lq_jobs the plan's nodes read, kept or
// filtered out, over all their loops; seq is whether one scanned the table.
func rowsRead(n planNode) (rows float64, seq bool) {
	if n.Relation == "lq_jobs" {
		rows += (n.ActualRows + n.RemovedFilter + n.RemovedIndex) * max(n.Loops, 1)
		seq = n.NodeType == "Seq Scan"
	}
	for _, c := range n.Plans {
		r, s := rowsRead(c)
		rows += r
		seq = seq || s
	}
	return rows, seq
}

// TestClaimPlansSkipOtherRows runs the claim, the insert-and-claim
// hand-off and the next-due computation beside 20,000 due rows of a kind
// the process does not handle and 20,000 rows of its kind scheduled far
// ahead, and checks with EXPLAIN ANALYZE, with the plan for the parameters
// and with the generic plan, that none of them reads those rows: each
// reads a few dozen rows of lq_jobs (the priority walk's seeks and the
// handled kinds' ranges), with no scan of the table.
func TestClaimPlansSkipOtherRows(t *testing.T) {
	s, _, _ := newTestStore(t)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO lq_jobs (queue, kind, priority, visible_at, run_at, created_at, payload)
SELECT 'q', 'other', 0, i, i, i, '\x7b7d' FROM generate_series(1, 20000) i`,
		`INSERT INTO lq_jobs (queue, kind, priority, visible_at, run_at, created_at, payload)
SELECT 'q', 'a', 0, 1000000000 + i, i, i, '\x7b7d' FROM generate_series(1, 20000) i`,
		`INSERT INTO lq_jobs (queue, kind, priority, visible_at, run_at, created_at, payload)
SELECT 'q', k, 0, 30000 + i, 30000 + i, i, '\x7b7d' FROM generate_series(1, 10) i, unnest(ARRAY['a', 'b']) k`,
		`ANALYZE lq_jobs `,
	} {
		_, err := s.db.ExecContext(ctx, s.q(q))
		require.NoError(t, err)
	}
	kinds := []string{"a", "b"}
	for _, c := range []struct {
		name  string
		query string
		args  []any
	}{
		{"claim", claimSQL, []any{"q", kinds, 5, int64(40000), int64(50000), int64(7), int64(9)}},
		{"claim of one kind", claimSQL, []any{"q", []string{"a"}, 5, int64(40000), int64(50000), int64(7), int64(9)}},
		{"insert and claim", insertClaimNewSQL, []any{"q", "a", int64(0), int64(40000), int64(40000), []byte("{}"),
			int64(50000), int64(8), int64(40000), s.channel, kinds, int64(9)}},
		{"insert and claim beside none due", insertClaimNewSQL, []any{"q", "a", int64(0), int64(20), int64(20), []byte("{}"),
			int64(50000), int64(8), int64(20), s.channel, []string{"a"}, int64(9)}},
		{"next due", nextDueSQL, []any{"q", kinds}},
	} {
		for _, generic := range []bool{false, true} {
			plan := explainAnalyze(t, s.db, generic, s.q(c.query), c.args...)
			rows, seq := rowsRead(plan)
			require.False(t, seq, "%s (generic plan: %v) scans lq_jobs", c.name, generic)
			require.Less(t, rows, 100.0, "%s (generic plan: %v) reads %v rows of lq_jobs beside 40,000 rows it must not read", c.name, generic, rows)
			t.Logf("%s (generic plan: %v): %v rows of lq_jobs read", c.name, generic, rows)
		}
	}
}
