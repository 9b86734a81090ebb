package postgres

import (
	"context"
	"database/sql"
	"testing"

	"github.com/litequeue/litequeue/internal/pgtest"
)

func pgURL(t testing.TB) string { return pgtest.URL(t) }

func freshSchema(t testing.TB) (string, *sql.DB) { return pgtest.FreshSchema(t) }

func withParam(t testing.TB, u, key, value string) string { return pgtest.WithParam(t, u, key, value) }

func schemaOf(t testing.TB, u string) string { return pgtest.Schema(t, u) }

// newTestStore opens a store on a fresh schema.
func newTestStore(t testing.TB) (*pgStore, string, *sql.DB) {
	t.Helper()
	u, admin := freshSchema(t)
	s, err := openStore(context.Background(), u, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, u, admin
}
