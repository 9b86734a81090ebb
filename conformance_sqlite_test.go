package litequeue_test

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/litequeue/litequeue"
)

// TestConformance runs the behaviour suite every backend passes on SQLite
// files, one new file per test.
func TestConformance(t *testing.T) {
	runConformance(t, conformanceBackend{
		Fresh: func(t *testing.T) string { return filepath.Join(t.TempDir(), "queue.db") },
		Open: func(t *testing.T, path string, opts *litequeue.Options) (*litequeue.Queue, error) {
			return litequeue.Open(path, opts)
		},
		FailJobDeletes: func(t *testing.T, path string) func() {
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			exec := func(q string) {
				if _, err := db.Exec(q); err != nil {
					t.Fatal(err)
				}
			}
			exec(`CREATE TRIGGER lq_test_refuse_delete BEFORE DELETE ON lq_jobs
				BEGIN SELECT RAISE(ABORT, 'refused by the test: the device failed'); END`)
			return func() { exec(`DROP TRIGGER lq_test_refuse_delete`) }
		},
		RefuseAttemptErrors: func(t *testing.T, path, marker string) func() {
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			exec := func(q string, args ...any) {
				if _, err := db.Exec(q, args...); err != nil {
					t.Fatal(err)
				}
			}
			exec(`CREATE TRIGGER lq_test_refuse_attempt BEFORE INSERT ON lq_attempts
				WHEN instr(NEW.error, '` + strings.ReplaceAll(marker, "'", "''") + `') > 0
				BEGIN SELECT RAISE(ABORT, 'refused by the test: the database does not take this value'); END`)
			return func() { exec(`DROP TRIGGER lq_test_refuse_attempt`) }
		},
		DB: func(t *testing.T, path string) *sql.DB {
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		},
	})
}
