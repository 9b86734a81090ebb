package postgres

import (
	"context"
	"database/sql"
	"testing"

	"github.com/litequeue/litequeue/internal/store"
	"github.com/litequeue/litequeue/internal/storetest"
)

// TestStore runs the store-level conformance suite on the PostgreSQL store,
// one new schema per test. Without a reachable server it skips (fails with
// LITEQUEUE_REQUIRE_PG=1), as every PostgreSQL test does.
func TestStore(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		Fresh: func(t *testing.T) string {
			u, _ := freshSchema(t)
			return u
		},
		Open: func(t *testing.T, u string) store.Backend {
			s, err := openStore(context.Background(), u, false)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		DB: func(t *testing.T, u string) *sql.DB {
			db, err := sql.Open("pgx", u)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		},
	})
}
