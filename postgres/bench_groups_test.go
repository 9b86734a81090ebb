package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// BenchmarkGroupsOnAMillionJobs pages the groups of a queue of 1,000,000
// pending jobs on PostgreSQL, as the SQLite benchmark of the same name
// does: 900,000 over 100,000 groups and 100,000 in the group "huge".
// Building the table takes a while before the timings start.
func BenchmarkGroupsOnAMillionJobs(b *testing.B) {
	s, _, _ := newTestStore(b)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO lq_jobs (queue, kind, priority, visible_at, run_at, created_at, payload, grp)
SELECT 'default', 'a', 0, i, i, i, '\x7b7d', CASE WHEN i % 10 = 0 THEN 'huge' ELSE 'g' || (i % 100000) END
FROM generate_series(1, 1000000) i`,
		`ANALYZE lq_jobs`,
	} {
		if _, err := s.db.ExecContext(ctx, s.q(q)); err != nil {
			b.Fatal(err)
		}
	}
	now := time.Now().UnixNano()
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
				rows, err := s.Groups(ctx, "default", c.after, c.limit, now)
				if err != nil {
					b.Fatal(err)
				}
				if len(rows) == 0 || (c.name == "huge_group" && rows[0].Pending <= store.GroupCountCap) {
					b.Fatalf("rows %+v", rows)
				}
			}
		})
	}
}
