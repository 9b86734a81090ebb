package sqlite_test

import (
	"database/sql"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/litequeue/litequeue/internal/sqlite"
	"github.com/litequeue/litequeue/internal/store"
	"github.com/litequeue/litequeue/internal/storetest"
)

// TestStore runs the store-level conformance suite on the SQLite store, one
// new queue file per test.
func TestStore(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		Fresh: func(t *testing.T) string { return filepath.Join(t.TempDir(), "q.db") },
		Open: func(t *testing.T, path string) store.Backend {
			s, err := sqlite.Open(path, sqlite.Options{BusyTimeout: 5 * time.Second, Synchronous: "NORMAL", Logger: slog.Default()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
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
