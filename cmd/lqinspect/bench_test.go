package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/litequeue/litequeue"
)

// BenchmarkCommandsOnAMillionJobs times lqinspect commands (every reading
// command and listing, the dry runs of the writing ones), through run,
// on a file of 1,000,000 jobs: 700,000 pending (half of them due), 300,000
// dead letters, in three queues and four kinds, with 20 schedules. Mistyped
// names are included: finding what they may have meant must stay bounded
// too. Building the file takes several seconds before the timings start:
//
//	go test -run '^$' -bench CommandsOnAMillionJobs -benchtime 3x .
func BenchmarkCommandsOnAMillionJobs(b *testing.B) {
	path := filepath.Join(b.TempDir(), "million.db")
	q, err := litequeue.Open(path, &litequeue.Options{PollInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := range 20 {
		_, err := q.RegisterSchedule(ctx, litequeue.Schedule{Name: fmt.Sprintf("report-%02d", i), Cron: fmt.Sprintf("%d 3 * * *", i), Job: Ping{}})
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		b.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		b.Fatal(err)
	}
	// Times are around fixtureNow, which run uses as now.
	_, err = db.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000)
		INSERT INTO lq_jobs (queue, kind, state, priority, visible_at, attempt, payload, created_at, run_at, finished_at, last_error, dead_reason)
		SELECT 'q' || (i % 3), 'kind_' || (i % 4), iif(i % 10 < 7, 0, 3), 0,
			?1 + iif(i % 2 = 0, -i, i) * 1000, iif(i % 10 < 7, 0, 1), CAST('{"n":' || i || '}' AS BLOB),
			?1 - i * 1000, ?1 - i * 1000, iif(i % 10 < 7, NULL, ?1 - i), iif(i % 10 < 7, NULL, 'failed ' || (i % 13)),
			iif(i % 10 < 7, NULL, 'permanent error')
		FROM n`, fixtureNow.UnixNano())
	if err != nil {
		b.Fatal(err)
	}
	// The rows went in behind the store's back: count them as its
	// migration 0010 does.
	if _, err := db.Exec(`DELETE FROM lq_counts; INSERT INTO lq_counts (queue, state, due, n)
		SELECT queue, state, CASE WHEN state = 0 THEN visible_at >> 38 ELSE 0 END, count(*) FROM lq_jobs GROUP BY 1, 2, 3`); err != nil {
		b.Fatal(err)
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	// A next-due cursor in the middle of the pending jobs (due around
	// fixtureNow, spread over ±700 s).
	nextDueCursor := fmt.Sprintf("%d:0:500001", fixtureNow.UnixNano()+300*1e9)
	for _, c := range []struct {
		name string
		args []string
		code int
	}{
		{"stats", []string{"stats", path}, exitOK},
		{"stats_json", []string{"stats", path, "--json"}, exitOK},
		{"jobs", []string{"jobs", path}, exitOK},
		{"jobs_after_deep", []string{"jobs", path, "--after", "100000"}, exitOK},
		{"jobs_offset_10000", []string{"jobs", path, "--offset", "10000"}, exitOK},
		{"jobs_queue_state", []string{"jobs", path, "--queue", "q2", "--state", "ready"}, exitOK},
		{"jobs_state_kind", []string{"jobs", path, "--state", "dead", "--kind", "kind_3"}, exitOK},
		{"jobs_next_due", []string{"jobs", path, "--order", "next-due"}, exitOK},
		{"jobs_next_due_after", []string{"jobs", path, "--order", "next-due", "--after", nextDueCursor}, exitOK},
		{"jobs_next_due_queue_kind", []string{"jobs", path, "--order", "next-due", "--queue", "q1", "--kind", "kind_1"}, exitOK},
		{"jobs_next_due_dead", []string{"jobs", path, "--order", "next-due", "--state", "dead"}, exitOK},
		{"jobs_queue_typo", []string{"jobs", path, "--queue", "q9"}, exitOK},
		{"dead", []string{"dead", path}, exitOK},
		{"dead_queue_kind", []string{"dead", path, "--queue", "q1", "--kind", "kind_2"}, exitOK},
		{"purge_dead_unconfirmed", []string{"purge", path, "--dead", "--queue", "q1"}, exitUsage},
		{"processes", []string{"processes", path}, exitOK},
		{"stats_queue", []string{"stats", path, "--queue", "q1"}, exitOK},
		{"stats_queue_typo", []string{"stats", path, "--queue", "q9"}, exitError},
		{"jobs_kind_typo", []string{"jobs", path, "--kind", "kind_9", "--limit", "20"}, exitOK},
		{"show", []string{"show", path, "999999"}, exitOK},
		{"requeue_all_dry_run", []string{"requeue", path, "--all", "--dry-run", "--queue", "q1", "--kind", "kind_1"}, exitOK},
		{"requeue_all_kind_typo", []string{"requeue", path, "--all", "--dry-run", "--kind", "knd_1"}, exitError},
		{"pause_typo", []string{"pause", path, "q7"}, exitError},
		{"resume_not_paused", []string{"resume", path, "q1"}, exitOK},
		{"schedules", []string{"schedules", path}, exitOK},
		{"schedules_history", []string{"schedules", path, "history", "report-07"}, exitOK},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if r := lq(b, "", c.args...); r.code != c.code {
					b.Fatalf("%v: exit %d: %s", c.args, r.code, r.stderr)
				}
			}
		})
	}
}
