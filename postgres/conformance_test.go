package postgres_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/conformance"
	"github.com/litequeue/litequeue/internal/pgtest"
	"github.com/litequeue/litequeue/postgres"
)

// TestConformance runs the behaviour suite every backend passes on
// PostgreSQL, one new schema per test.
func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Backend{
		Fresh: func(t *testing.T) string {
			u, _ := pgtest.FreshSchema(t)
			return u
		},
		Open: func(t *testing.T, u string, opts *litequeue.Options) (*litequeue.Queue, error) {
			return postgres.Open(context.Background(), u, opts)
		},
		FailJobDeletes:      refuseJobDeletes,
		DB:                  openDB,
		RefuseAttemptErrors: refuseAttemptErrors,
	})
}

// TestConformanceWithoutPreparedStatements runs the behaviour suite on
// connections that prepare no statement and send every value as text
// (pgx's default_query_exec_mode=simple_protocol in the URL): what a
// connection pooler in transaction mode, such as PgBouncer before 1.21,
// requires.
func TestConformanceWithoutPreparedStatements(t *testing.T) {
	conformance.Run(t, conformance.Backend{
		Fresh: func(t *testing.T) string {
			u, _ := pgtest.FreshSchema(t)
			return pgtest.WithParam(t, u, "default_query_exec_mode", "simple_protocol")
		},
		Open: func(t *testing.T, u string, opts *litequeue.Options) (*litequeue.Queue, error) {
			return postgres.Open(context.Background(), u, opts)
		},
	})
}

// refuseJobDeletes makes the database at u (the queue's schema on its
// search_path) refuse every delete of a job row, as a failing device
// refuses a write, until the returned restore is called.
func refuseJobDeletes(t *testing.T, u string) (restore func()) {
	db, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	exec := func(q string) {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	exec(`CREATE FUNCTION lq_test_refuse_delete() RETURNS trigger LANGUAGE plpgsql AS
		$$BEGIN RAISE EXCEPTION 'refused by the test: the device failed'; END$$`)
	exec(`CREATE TRIGGER lq_test_refuse_delete BEFORE DELETE ON lq_jobs
		FOR EACH ROW EXECUTE FUNCTION lq_test_refuse_delete()`)
	return func() { exec(`DROP TRIGGER lq_test_refuse_delete ON lq_jobs`) }
}

// openDB opens a *sql.DB on the database at u (the queue's schema on its
// search_path), closed when the test ends.
func openDB(t *testing.T, u string) *sql.DB {
	db, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// refuseAttemptErrors makes the database at u refuse every attempt record
// whose error contains marker, until the returned restore is called.
func refuseAttemptErrors(t *testing.T, u, marker string) (restore func()) {
	db := openDB(t, u)
	exec := func(q string) {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	exec(`CREATE FUNCTION lq_test_refuse_attempt() RETURNS trigger LANGUAGE plpgsql AS
		$$BEGIN
			IF position(` + pgQuote(marker) + ` in NEW.error) > 0 THEN
				RAISE EXCEPTION 'refused by the test: the database does not take this value';
			END IF;
			RETURN NEW;
		END$$`)
	exec(`CREATE TRIGGER lq_test_refuse_attempt BEFORE INSERT ON lq_attempts
		FOR EACH ROW EXECUTE FUNCTION lq_test_refuse_attempt()`)
	return func() { exec(`DROP TRIGGER lq_test_refuse_attempt ON lq_attempts`) }
}

// pgQuote quotes s as a PostgreSQL string literal.
func pgQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
