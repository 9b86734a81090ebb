package postgres

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// defaultPGURL is where the tests find PostgreSQL unless LITEQUEUE_PG_URL
// says otherwise.
const defaultPGURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// pgURL returns the admin URL of the test server. When no server answers,
// the test is skipped with how to run it — or fails, when
// LITEQUEUE_REQUIRE_PG=1 (CI sets it, so CI never skips silently).
func pgURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("LITEQUEUE_PG_URL")
	if u == "" {
		u = defaultPGURL
	}
	db, err := sql.Open("pgx", u)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = db.PingContext(ctx)
		cancel()
		db.Close()
	}
	if err != nil {
		msg := "PostgreSQL is not reachable at " + u + " (" + err.Error() + "); start a server there (user postgres, trust auth, database test) or point LITEQUEUE_PG_URL at one to run the PostgreSQL tests"
		if os.Getenv("LITEQUEUE_REQUIRE_PG") == "1" {
			t.Fatal(msg + " (LITEQUEUE_REQUIRE_PG=1: the server is required)")
		}
		t.Skip(msg)
	}
	return u
}

// adminDB opens the admin URL.
func adminDB(t testing.TB, u string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// freshSchema creates a schema of its own for the test, dropped at its end,
// and returns a URL whose connections use it and the admin connection.
func freshSchema(t testing.TB) (string, *sql.DB) {
	t.Helper()
	u := pgURL(t)
	admin := adminDB(t, u)
	b := make([]byte, 6)
	rand.Read(b)
	schema := "lqtest_" + hex.EncodeToString(b)
	if _, err := admin.Exec("CREATE SCHEMA " + quoteIdent(schema)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec("DROP SCHEMA " + quoteIdent(schema) + " CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return withParam(t, u, "search_path", schema), admin
}

// withParam sets a query parameter of a URL.
func withParam(t testing.TB, u, key, value string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := pu.Query()
	q.Set(key, value)
	pu.RawQuery = q.Encode()
	return pu.String()
}

// schemaOf returns the search_path parameter of a test URL.
func schemaOf(t testing.TB, u string) string {
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return pu.Query().Get("search_path")
}

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
