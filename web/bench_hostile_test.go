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

// The cost of each page on files whose data has a hostile shape: huge
// handler errors, and many distinct priorities. Every page must stay under
// a second on each (the figures are in docs/security.md).

// hostileFileN makes a queue file and runs fill, SQL writing rows straight
// into it (?1 is the current time in Unix nanoseconds, ?2 is n); it returns
// the file opened read-only.
func hostileFileN(b *testing.B, fill string, n int) *litequeue.Queue {
	b.Helper()
	path := filepath.Join(b.TempDir(), "hostile.db")
	q, err := litequeue.Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	q.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(fill, time.Now().UnixNano(), n); err != nil {
		b.Fatal(err)
	}
	db.Close()
	q, err = litequeue.Open(path, &litequeue.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { q.Close() })
	return q
}

// benchPages renders each path on h as a sub-benchmark.
func benchPages(b *testing.B, h http.Handler, paths ...string) {
	for _, p := range paths {
		b.Run(p, func(b *testing.B) {
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest("GET", "http://localhost"+p, nil).WithContext(context.Background()))
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", p, w.Code, w.Body.String())
				}
			}
		})
	}
}

// deadWithErrorsSQL writes ?2 dead letters in two queues whose last error
// is one line of about ?3 bytes: a short distinct head, then hexadecimal
// (the worst case for the grouping's patterns), and one attempt row for
// the newest.
const deadWithErrorsSQL = `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?2)
INSERT INTO lq_jobs (queue, kind, state, priority, visible_at, attempt, payload, created_at, run_at, finished_at, last_error, dead_reason)
SELECT CASE x % 2 WHEN 0 THEN 'default' ELSE 'mail' END, 'send_email', 3, 0, ?1 - x, 1,
	CAST('{"to":"user' || x || '@example.com"}' AS BLOB), ?1 - x, ?1 - x, ?1 - x,
	'job ' || x || ' failed (' || (x % 7) || '): ' || substr(hex(randomblob(?3 / 2)), 1, ?3),
	'give_up'
FROM c`

func BenchmarkPagesWithHugeErrors(b *testing.B) {
	for _, tc := range []struct {
		name      string
		n, errLen int
	}{
		{"10000x10KB", 10_000, 10 << 10},
		{"1000x1MB", 1_000, 1 << 20},
	} {
		b.Run(tc.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "errors.db")
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
			if _, err := db.Exec(deadWithErrorsSQL, now, tc.n, tc.errLen); err != nil {
				b.Fatal(err)
			}
			var last int64
			if err := db.QueryRow(`SELECT max(id) FROM lq_jobs`).Scan(&last); err != nil {
				b.Fatal(err)
			}
			if _, err := db.Exec(`INSERT INTO lq_attempts (job_id, attempt, started_at, finished_at, error, decision)
				SELECT id, 1, finished_at - 1000, finished_at, last_error, 'give_up' FROM lq_jobs WHERE id = ?`, last); err != nil {
				b.Fatal(err)
			}
			db.Close()
			q, err = litequeue.Open(path, &litequeue.Options{ReadOnly: true})
			if err != nil {
				b.Fatal(err)
			}
			defer q.Close()
			h := web.Handler(q, &web.Options{ReadOnly: true})
			benchPages(b, h, "/", "/dead", "/dead?queue=mail", "/jobs?q=zzzz", "/jobs?state=dead", fmt.Sprintf("/jobs/%d", last))
		})
	}
}

// distinctPrioritiesSQL writes ?2 ready jobs in one queue, each of its own
// priority.
const distinctPrioritiesSQL = `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?2)
INSERT INTO lq_jobs (queue, kind, state, priority, visible_at, attempt, payload, created_at, run_at)
SELECT 'default', 'send_email', 0, x, ?1 - 1000000000 - x, 0, CAST('{"n":' || x || '}' AS BLOB), ?1 - x, ?1 - x
FROM c`

func BenchmarkPagesWithDistinctPriorities(b *testing.B) {
	q := hostileFileN(b, distinctPrioritiesSQL, 100_000)
	benchPages(b, web.Handler(q, &web.Options{ReadOnly: true}), "/", "/queues", "/jobs?state=ready")
}
