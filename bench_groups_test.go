package litequeue_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/litequeue/litequeue"
)

// BenchmarkGroupsOnAMillionJobs pages the groups of an ordered queue of
// 1,000,000 pending jobs: 900,000 over 100,000 groups (g0 … g99999) and
// 100,000 in one group, "huge", whose count stops at GroupPendingCap.
// Building the file takes a few seconds before the timings start.
func BenchmarkGroupsOnAMillionJobs(b *testing.B) {
	path := filepath.Join(b.TempDir(), "million.db")
	q, err := litequeue.Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := q.SetLimits(context.Background(), "default", litequeue.QueueLimits{Ordered: true}); err != nil {
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
		INSERT INTO lq_jobs (id, queue, kind, state, visible_at, payload, created_at, run_at, grp)
		SELECT x, 'default', 'send_email', 0, ?1 + x, CAST('{}' AS BLOB), ?1 - x, ?1 - x,
			CASE WHEN x % 10 = 0 THEN 'huge' ELSE 'g' || (x % 100000) END
		FROM c`,
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
		name  string
		after string
		limit int
	}{
		{"first_page_of_20", "", 20},
		{"middle_page_of_20", "g5", 20},
		{"page_of_100", "g7", 100},
		{"huge_group", "g99999", 20},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				page, err := q.Groups(ctx, "default", litequeue.GroupsOptions{After: c.after, Limit: c.limit})
				if err != nil {
					b.Fatal(err)
				}
				if len(page.Groups) == 0 || page.Groups[0].Head == 0 {
					b.Fatalf("page %+v", page)
				}
				if c.name == "huge_group" && (page.Groups[0].Group != "huge" || !page.Groups[0].PendingMore) {
					b.Fatalf("huge group: %+v", page.Groups[0])
				}
			}
		})
	}
}
