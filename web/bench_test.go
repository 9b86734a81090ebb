package web_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/web"
)

// BenchmarkPagesOnAMillionJobs renders each page of the dashboard (each
// listing in every state) on a file
// of 1,000,000 jobs: 600,000 scheduled, 100,000 ready, 100,000 running,
// 100,000 completed and 100,000 dead (with varied errors), in three queues
// (one paused), with 20 schedules; half the jobs are in 40 groups and the
// 25 oldest others in a group "rare".
// Building the file takes a few seconds before the timings start.
func BenchmarkPagesOnAMillionJobs(b *testing.B) {
	path := filepath.Join(b.TempDir(), "million.db")
	q, err := litequeue.Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 20 { // and one paused queue
		_, err := q.RegisterSchedule(context.Background(), litequeue.Schedule{Name: fmt.Sprintf("schedule-%02d", i),
			Cron: fmt.Sprintf("%d * * * *", i), Job: Email{To: "ops@example.com"}})
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := q.Pause(context.Background(), "mail"); err != nil {
		b.Fatal(err)
	}
	q.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UnixNano()
	_, err = db.Exec(`WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000)
		INSERT INTO lq_jobs (queue, kind, state, priority, visible_at, attempt, payload, lease, created_at, run_at, finished_at, last_error, grp)
		SELECT CASE x % 3 WHEN 0 THEN 'default' WHEN 1 THEN 'media' ELSE 'mail' END,
			CASE x % 4 WHEN 0 THEN 'send_email' WHEN 1 THEN 'resize' WHEN 2 THEN 'import' ELSE 'sync' END,
			CASE WHEN x % 10 < 6 THEN 0 WHEN x % 10 = 6 THEN 0 WHEN x % 10 = 7 THEN 1 WHEN x % 10 = 8 THEN 2 ELSE 3 END,
			x % 3,
			CASE WHEN x % 10 < 6 THEN ?1 + 3600000000000 + x ELSE ?1 - 1000000000 - x END,
			CASE WHEN x % 10 >= 7 THEN 1 ELSE 0 END,
			CAST('{"to":"user' || x || '@example.com","n":' || x || '}' AS BLOB),
			CASE WHEN x % 10 = 7 THEN x END,
			?1 - x, ?1 - x,
			CASE WHEN x % 10 >= 8 THEN ?1 - x END,
			CASE WHEN x % 10 = 9 THEN CASE x % 3 WHEN 0 THEN 'timeout after ' || (x % 997) || 'ms' WHEN 1 THEN 'smtp ' || (x % 500) || ' refused' ELSE 'bad row ' || x END END,
			CASE WHEN x % 2 = 0 THEN 'g' || (x % 40) WHEN x <= 50 THEN 'rare' END
		FROM c`, now)
	if err != nil {
		b.Fatal(err)
	}
	// The rows went in behind the store's back: count them as its
	// migration 0010 does, or every count the pages read from lq_counts
	// would be 0.
	if _, err := db.Exec(`DELETE FROM lq_counts; INSERT INTO lq_counts (queue, state, due, n)
		SELECT queue, state, CASE WHEN state = 0 THEN visible_at >> 38 ELSE 0 END, count(*) FROM lq_jobs GROUP BY 1, 2, 3`); err != nil {
		b.Fatal(err)
	}
	db.Close()
	q, err = litequeue.Open(path, &litequeue.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	h := web.Handler(q, &web.Options{ReadOnly: true})
	for _, p := range []struct{ name, path string }{
		{"overview", "/"},
		{"jobs", "/jobs"},
		{"jobs_dead_in_queue", "/jobs?state=dead&queue=media"},
		{"jobs_ready", "/jobs?state=ready"},
		{"jobs_scheduled_in_queue", "/jobs?state=scheduled&queue=mail"},
		{"jobs_running", "/jobs?state=running"},
		{"jobs_completed_kind", "/jobs?state=completed&kind=sync"},
		{"jobs_cancelled", "/jobs?state=cancelled"},
		{"jobs_page_deep", "/jobs?before=300000"},
		{"jobs_kind_page_deep", "/jobs?kind=import&before=500000"},
		{"jobs_text", "/jobs?q=user77777%40"},
		{"job", "/jobs/999999"},
		{"dead_groups", "/dead"},
		{"queues", "/queues"},
		{"queue", "/queue?name=media"},
		{"dead_group_jobs", "/jobs?group=smtp+%3Cn%3E+refused&queue=media"},
		{"dead_group_jobs_no_match", "/jobs?group=no+such+group"},
		{"job_group_jobs", "/jobs?jobgroup=g8&queue=media"},
		{"job_group_jobs_ready", "/jobs?jobgroup=g8&state=ready"},
		{"job_group_jobs_page_deep", "/jobs?jobgroup=g8&before=300000"},
		{"job_group_jobs_oldest_only", "/jobs?jobgroup=rare"},
		{"job_group_jobs_no_match", "/jobs?jobgroup=no+such+group&queue=media"},
		{"schedules", "/schedules"},
		{"schedule", "/schedules/schedule-07"},
		{"processes", "/processes"},
		{"plan", "/plan"},
	} {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest("GET", "http://localhost"+p.path, nil).WithContext(context.Background()))
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", p.path, w.Code, w.Body.String())
				}
			}
		})
	}
}
