package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/litequeue/litequeue/internal/sqlkit"
	"github.com/litequeue/litequeue/internal/store"
)

// The dashboard's reads: keyset pages of jobs, counts, and per-queue
// summaries, each bounded by its limits through the primary key or an
// index (see TestDashboardQueriesUseIndexes).

// queryWhere renders the conditions of q as SQL on lq_jobs, with named
// arguments (:now among them).
func queryWhere(q store.JobQuery) ([]string, []any) {
	var where []string
	args := []any{sql.Named("now", q.Now)}
	if q.Queue != "" {
		where = append(where, "queue = :queue")
		args = append(args, sql.Named("queue", q.Queue))
	}
	if q.Kind != "" {
		where = append(where, "kind = :kind")
		args = append(args, sql.Named("kind", q.Kind))
	}
	if len(q.Kinds) > 0 {
		where = append(where, "kind IN (SELECT value FROM json_each(:kinds))")
		args = append(args, sql.Named("kinds", stringsJSON(q.Kinds)))
	}
	for _, b := range []struct {
		cond string
		at   int64
	}{
		{"created_at >= :created_from", q.CreatedFrom}, {"created_at < :created_before", q.CreatedBefore},
		{"finished_at >= :finished_from", q.FinishedFrom}, {"finished_at < :finished_before", q.FinishedBefore},
	} {
		if b.at != 0 {
			name := b.cond[strings.LastIndexByte(b.cond, ':')+1:]
			where = append(where, b.cond)
			args = append(args, sql.Named(name, b.at))
		}
	}
	if len(q.States) > 0 {
		var ors []string
		for _, s := range q.States {
			ors = append(ors, StateSQL(s))
		}
		where = append(where, "("+strings.Join(ors, " OR ")+")")
	}
	if q.Text != "" {
		where = append(where, textSearchSQL)
		args = append(args, sql.Named("text", strings.ToLower(q.Text)))
	}
	if len(q.IDs) > 0 {
		where = append(where, "id IN (SELECT value FROM json_each(:ids))")
		args = append(args, sql.Named("ids", idsJSON(q.IDs)))
	}
	where, args = metaWhere(q, where, args)
	return where, args
}

// stringsJSON is the JSON array of ss, for json_each.
func stringsJSON(ss []string) string {
	b, _ := json.Marshal(ss) // a []string always marshals
	return string(b)
}

// textSearchSQL keeps the rows whose payload or last error holds :text in
// its first store.TextSearchChars characters.
var textSearchSQL = fmt.Sprintf(`(instr(lower(substr(CAST(payload AS TEXT), 1, %[1]d)), :text) > 0 OR instr(lower(substr(coalesce(last_error, ''), 1, %[1]d)), :text) > 0)`,
	store.TextSearchChars)

// searchSQL is the query of one Search page: the filter's conditions
// inside the id window, through the primary key.
func searchSQL(where []string) string { return searchSQLFrom(store.JobQuery{}, where) }

// searchSQLFrom is searchSQL for q, which may list by tag (tagFrom).
func searchSQLFrom(q store.JobQuery, where []string) string {
	from, id := tagFrom(q)
	where = append([]string{id + " < :before", id + " >= :floor"}, where...)
	return "SELECT " + JobColumns + " FROM " + from + " WHERE " + strings.Join(where, " AND ") + " ORDER BY " + id + " DESC LIMIT :limit"
}

// Search implements store.Admin.
func (s *Store) Search(ctx context.Context, q store.JobQuery, p store.PageQuery) (store.Page, error) {
	if s.noMeta && hasMetaFilter(q) {
		return store.MakePage(p, nil, 0, 0, true), nil
	}
	where, args := queryWhere(q)
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return store.Page{}, err
	}
	defer tx.Rollback()
	var lo, hi sql.NullInt64
	if err := tx.QueryRowContext(ctx, idRangeSQL).Scan(&lo, &hi); err != nil {
		return store.Page{}, err
	}
	if !hi.Valid {
		return store.MakePage(p, nil, 0, 0, true), nil
	}
	before, floor := p.Window(lo.Int64, hi.Int64)
	if before <= lo.Int64 {
		return store.MakePage(p, nil, lo.Int64, hi.Int64, false), nil
	}
	args = append(args, sql.Named("before", before), sql.Named("floor", floor), sql.Named("limit", p.Limit))
	rows, err := tx.QueryContext(ctx, s.noMetaColumns(searchSQLFrom(q, where)), args...)
	if err != nil {
		return store.Page{}, err
	}
	defer rows.Close()
	var jobs []store.Job
	for rows.Next() {
		j, err := ScanJob(rows)
		if err != nil {
			return store.Page{}, err
		}
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return store.Page{}, err
	}
	return store.MakePage(p, jobs, lo.Int64, hi.Int64, false), nil
}

// Count implements store.Admin. A state filter counts through an index; a
// filter by kind or text alone reads every row.
func (s *Store) Count(ctx context.Context, q store.JobQuery, limit int) (int, error) {
	if s.noMeta && hasMetaFilter(q) {
		return 0, nil
	}
	where, args := queryWhere(q)
	from, _ := tagFrom(q)
	query := "SELECT 1 FROM " + from
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	if limit > 0 {
		query += " LIMIT :limit"
		args = append(args, sql.Named("limit", limit))
	}
	var n int
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM ("+query+")", args...).Scan(&n); err != nil {
		return 0, err
	}
	return n, nil
}

// The queries of Search and Summaries (see TestDashboardQueriesUseIndexes).
const (
	idRangeSQL       = `SELECT (SELECT min(id) FROM lq_jobs), (SELECT max(id) FROM lq_jobs)`
	nextLiveQueueSQL = `SELECT min(queue) FROM lq_jobs WHERE state IN (0, 1) AND queue > ?`
	liveCountSQL     = `SELECT id, state, visible_at FROM lq_jobs WHERE queue = ? AND state IN (0, 1) LIMIT ?`
	// The states are literals so that the planner sees the partial
	// finished index applies.
	completedCountSQL = `SELECT queue, count(*) FROM
		(SELECT queue FROM lq_jobs INDEXED BY lq_jobs_finished WHERE state IN (2, 3) AND state = 2 ORDER BY finished_at DESC LIMIT ?) GROUP BY queue`
	deadCountSQL = `SELECT queue, count(*) FROM
		(SELECT queue FROM lq_jobs INDEXED BY lq_jobs_finished WHERE state IN (2, 3) AND state = 3 ORDER BY finished_at DESC LIMIT ?) GROUP BY queue`
	firstLivePrioritySQL = `SELECT min(priority) FROM lq_jobs WHERE queue = ? AND state IN (0, 1)`
	nextLivePrioritySQL  = `SELECT min(priority) FROM lq_jobs WHERE queue = ? AND state IN (0, 1) AND priority > ?`
)

// Summaries implements store.Dashboard: the live queue names come from a skip
// scan of lq_jobs_kind_due, one seek per queue; the live rows of each are
// counted through it up to limit, which finds the oldest ready row too when
// the count did not stop there; the completed and dead ones are counted
// through the finished index up to limit in all.
func (s *Store) Summaries(ctx context.Context, now int64, limit int) ([]store.QueueSummary, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	sums := store.Summaries{}
	var live []string
	for {
		last := ""
		if len(live) > 0 {
			last = live[len(live)-1]
		}
		var name sql.NullString
		if err := tx.QueryRowContext(ctx, nextLiveQueueSQL, last).Scan(&name); err != nil {
			return nil, err
		}
		if !name.Valid {
			break
		}
		live = append(live, name.String)
	}
	for _, name := range live {
		sum := sums.Get(name)
		if err := liveCounts(ctx, tx, sum, now, limit); err != nil {
			return nil, err
		}
		if sum.LiveCapped {
			if err := oldestReady(ctx, tx, sum, now); err != nil {
				return nil, err
			}
		}
	}
	if err := sqlkit.AddFinished(ctx, sums, tx, store.Completed, limit, completedCountSQL, limit); err != nil {
		return nil, err
	}
	if err := sqlkit.AddFinished(ctx, sums, tx, store.Dead, limit, deadCountSQL, limit); err != nil {
		return nil, err
	}
	return sums.List(), nil
}

// liveCounts counts the live rows of sum's queue, up to limit, and finds
// the oldest ready row among them.
func liveCounts(ctx context.Context, tx *sql.Tx, sum *store.QueueSummary, now int64, limit int) error {
	rows, err := tx.QueryContext(ctx, liveCountSQL, sum.Queue, limit)
	if err != nil {
		return err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id, visible int64
		var state store.State
		if err := rows.Scan(&id, &state, &visible); err != nil {
			return err
		}
		n++
		switch {
		case state == store.Running:
			sum.Running++
		case visible <= now:
			sum.Ready++
			sum.OfferOldest(id, visible)
		default:
			sum.Scheduled++
		}
	}
	sum.LiveCapped = n >= limit
	return rows.Err()
}
