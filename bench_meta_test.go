package litequeue_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/litequeue/litequeue"
)

// BenchmarkListByTagOnAMillionJobs lists by tag on a file of 1,000,000
// jobs: every 100th tagged "rare", every 3rd "common" (both tags on every
// 300th), the rest untagged. Building the file takes a few seconds before
// the timings start.
func BenchmarkListByTagOnAMillionJobs(b *testing.B) {
	path := filepath.Join(b.TempDir(), "million.db")
	q, err := litequeue.Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	q.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UnixNano()
	for _, stmt := range []string{
		`WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000)
		INSERT INTO lq_jobs (id, queue, kind, state, visible_at, payload, created_at, run_at, meta)
		SELECT x, 'default', 'send_email', CASE WHEN x % 7 = 0 THEN 3 ELSE 0 END, ?1 + x,
			CAST('{"to":"user' || x || '@example.com"}' AS BLOB), ?1 - x, ?1 - x,
			CASE WHEN x % 100 = 0 AND x % 3 = 0 THEN '{"tags":["rare","common"]}'
				WHEN x % 100 = 0 THEN '{"tags":["rare"]}' WHEN x % 3 = 0 THEN '{"tags":["common"]}' END
		FROM c`,
		`INSERT INTO lq_job_tags (tag, job_id) SELECT t.value, j.id FROM lq_jobs j, json_each(j.meta, '$.tags') t WHERE j.meta IS NOT NULL`,
		`ANALYZE`,
	} {
		if _, err := db.Exec(stmt, now); err != nil {
			b.Fatal(err)
		}
	}
	db.Close()
	q, err = litequeue.Open(path, &litequeue.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	ctx := context.Background()
	for _, c := range []struct {
		name string
		f    litequeue.JobQuery
		p    litequeue.PageRequest
	}{
		{"rare_first_page", litequeue.JobQuery{Tags: []string{"rare"}}, litequeue.PageRequest{}},
		{"rare_whole_file_window", litequeue.JobQuery{Tags: []string{"rare"}}, litequeue.PageRequest{ScanLimit: 1_000_000}},
		{"common_first_page", litequeue.JobQuery{Tags: []string{"common"}}, litequeue.PageRequest{}},
		{"rare_and_common", litequeue.JobQuery{Tags: []string{"rare", "common"}}, litequeue.PageRequest{ScanLimit: 1_000_000}},
		{"rare_dead", litequeue.JobQuery{Tags: []string{"rare"}, States: []litequeue.State{litequeue.StateDead}}, litequeue.PageRequest{}},
		{"absent_tag", litequeue.JobQuery{Tags: []string{"absent"}}, litequeue.PageRequest{ScanLimit: 1_000_000}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				page, err := q.ListJobs(ctx, c.f, c.p)
				if err != nil {
					b.Fatal(err)
				}
				if c.name != "absent_tag" && len(page.Jobs) == 0 {
					b.Fatal("no jobs")
				}
			}
		})
	}
	b.Run("count_rare", func(b *testing.B) {
		for b.Loop() {
			if _, err := q.CountJobs(ctx, litequeue.JobQuery{Tags: []string{"rare"}}, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
}
