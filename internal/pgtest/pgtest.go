// Package pgtest finds the PostgreSQL server the tests run on and gives each
// test a schema of its own.
//
// The server is LITEQUEUE_PG_URL, default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable. When no server
// answers, tests skip with a message saying how to run them — unless
// LITEQUEUE_REQUIRE_PG=1 (CI sets it), when they fail.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx"
)

// DefaultURL is the server the tests use unless LITEQUEUE_PG_URL says
// otherwise.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// URL returns the admin URL of the test server, or skips (fails, with
// LITEQUEUE_REQUIRE_PG=1) when it does not answer.
func URL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("LITEQUEUE_PG_URL")
	if u == "" {
		u = DefaultURL
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

// Admin opens u, closed when the test ends.
func Admin(t testing.TB, u string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// FreshSchema creates a schema for the test, dropped (with everything in
// it) when the test ends, and returns a URL whose connections use it
// (search_path) and an admin connection.
func FreshSchema(t testing.TB) (string, *sql.DB) {
	t.Helper()
	u := URL(t)
	admin := Admin(t, u)
	b := make([]byte, 6)
	rand.Read(b)
	schema := "lqtest_" + hex.EncodeToString(b)
	if _, err := admin.Exec("CREATE SCHEMA " + pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Sessions of the test's queues may still hold locks briefly.
		for i := 0; ; i++ {
			_, err := admin.Exec("DROP SCHEMA " + pgx.Identifier{schema}.Sanitize() + " CASCADE")
			if err == nil {
				return
			}
			if i == 50 {
				t.Errorf("drop schema %s: %v", schema, err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	return WithParam(t, u, "search_path", schema), admin
}

// WithParam sets a query parameter of a URL.
func WithParam(t testing.TB, u, key, value string) string {
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

// Schema returns the search_path parameter of a URL.
func Schema(t testing.TB, u string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return pu.Query().Get("search_path")
}
