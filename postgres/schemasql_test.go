package postgres

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// applyMigrationSQL runs sql in schema, in one transaction, as the admin.
func applyMigrationSQL(t *testing.T, admin *sql.DB, schema, sql string) {
	t.Helper()
	tx, err := admin.Begin()
	require.NoError(t, err)
	defer tx.Rollback()
	_, err = tx.Exec("SET LOCAL search_path TO " + quoteIdent(schema))
	require.NoError(t, err)
	_, err = tx.Exec(sql)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
}

// catalog describes what schema holds — tables' columns, constraints,
// indexes, functions and lq_meta — with the schema's name taken out, so
// that two schemas built the same way describe the same.
func catalog(t *testing.T, admin *sql.DB, schema string) []string {
	t.Helper()
	var out []string
	for _, q := range []string{
		`SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' ||
		    coalesce(column_default, '') || ' ' || coalesce(collation_name, '') || ' ' || is_identity
		 FROM information_schema.columns WHERE table_schema = $1 ORDER BY table_name, ordinal_position`,
		`SELECT c.relname || ' ' || k.conname || ' ' || pg_get_constraintdef(k.oid)
		 FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		 WHERE n.nspname = $1 ORDER BY 1`,
		`SELECT indexname || ' ' || indexdef FROM pg_indexes WHERE schemaname = $1 ORDER BY indexname`,
		`SELECT p.proname || ' ' || pg_get_function_arguments(p.oid) || ' ' || p.prosrc
		 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 ORDER BY 1`,
		`SELECT key || '=' || value FROM ` + quoteIdent(schema) + `.lq_meta WHERE $1 <> '' ORDER BY key`,
	} {
		rows, err := admin.Query(q, schema)
		require.NoError(t, err)
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			out = append(out, strings.ReplaceAll(s, schema, "SCHEMA"))
		}
		require.NoError(t, rows.Err())
		rows.Close()
	}
	return out
}

func TestMigrationSQLBuildsTheSchemaOpenBuilds(t *testing.T) {
	ctx := context.Background()
	opened, admin := freshSchema(t)
	applied, _ := freshSchema(t)

	s, err := openStore(ctx, opened, false)
	require.NoError(t, err)
	s.Close()
	sql, err := MigrationSQL(0)
	require.NoError(t, err)
	applyMigrationSQL(t, admin, schemaOf(t, applied), sql)

	want := catalog(t, admin, schemaOf(t, opened))
	require.Greater(t, len(want), 40, "the catalog query found the schema: %v", want)
	require.Contains(t, want, fmt.Sprintf("schema_version=%d", SchemaVersion))
	require.Equal(t, want, catalog(t, admin, schemaOf(t, applied)))

	// Open takes the applied schema as its own and changes nothing.
	s, err = openStore(ctx, applied, false)
	require.NoError(t, err)
	s.Close()
	require.Equal(t, want, catalog(t, admin, schemaOf(t, applied)))

	// Applied twice, it fails (the tables exist) and the transaction
	// leaves the schema as it was.
	tx, err := admin.Begin()
	require.NoError(t, err)
	_, err = tx.Exec("SET LOCAL search_path TO " + quoteIdent(schemaOf(t, applied)))
	require.NoError(t, err)
	_, err = tx.Exec(sql)
	require.Error(t, err)
	tx.Rollback()
	require.Equal(t, want, catalog(t, admin, schemaOf(t, applied)))
}

// A schema at version 1 (before schedules stored their job's uniqueness)
// is migrated by Open, or by MigrationSQL(1), to the catalog a new schema
// gets; its schedules keep running, with no uniqueness until registered
// again.
func TestSchemaAtVersion1MigratesToTheCurrentCatalog(t *testing.T) {
	ctx := context.Background()
	fresh, admin := freshSchema(t)
	s, err := openStore(ctx, fresh, false)
	require.NoError(t, err)
	s.Close()
	want := catalog(t, admin, schemaOf(t, fresh))

	ms, err := migrations()
	require.NoError(t, err)
	atV1 := func() string {
		u, _ := freshSchema(t)
		applyMigrationSQL(t, admin, schemaOf(t, u), ms[0].SQL+`;
INSERT INTO lq_meta (key, value) VALUES ('format', 'litequeue'), ('schema_version', '1');
INSERT INTO lq_schedules (name, cron, queue, kind, payload, next_at, created_at, updated_at)
VALUES ('nightly', '0 2 * * *', 'default', 'role_job', '{"N":1}', 1, 1, 1)`)
		return u
	}

	byOpen := atV1()
	q, err := Open(ctx, byOpen, nil)
	require.NoError(t, err)
	all, err := q.Schedules(ctx)
	require.NoError(t, err)
	require.Len(t, all, 1)
	require.Nil(t, all[0].Unique)
	require.NoError(t, q.Close())
	require.Equal(t, want, catalog(t, admin, schemaOf(t, byOpen)))

	byTool := atV1()
	sql, err := MigrationSQL(1)
	require.NoError(t, err)
	applyMigrationSQL(t, admin, schemaOf(t, byTool), sql)
	require.Equal(t, want, catalog(t, admin, schemaOf(t, byTool)))
}

func TestMigrationSQLRefusesVersionsItDoesNotKnow(t *testing.T) {
	for _, from := range []int{-1, SchemaVersion + 1} {
		sql, err := MigrationSQL(from)
		require.Error(t, err, "from %d", from)
		require.Contains(t, err.Error(), "versions run from 0")
		require.Empty(t, sql)
	}
	sql, err := MigrationSQL(SchemaVersion)
	require.NoError(t, err)
	require.Empty(t, sql, "nothing to do from the current version")
}

// newRole creates a login role that may use schema but create nothing in
// it, dropped when the test ends, and returns its name and u with the role
// as its user.
func newRole(t *testing.T, admin *sql.DB, u, schema string) (string, string) {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	role := "lqtest_role_" + hex.EncodeToString(b)
	_, err := admin.Exec("CREATE ROLE " + quoteIdent(role) + " LOGIN")
	require.NoError(t, err)
	t.Cleanup(func() {
		admin.Exec("DROP OWNED BY " + quoteIdent(role))
		if _, err := admin.Exec("DROP ROLE " + quoteIdent(role)); err != nil {
			t.Errorf("drop role %s: %v", role, err)
		}
	})
	_, err = admin.Exec("GRANT USAGE ON SCHEMA " + quoteIdent(schema) + " TO " + quoteIdent(role))
	require.NoError(t, err)
	pu, err := url.Parse(u)
	require.NoError(t, err)
	pu.User = url.User(role)
	return role, pu.String()
}

type roleJob struct{ N int }

func (roleJob) Kind() string { return "role_job" }

func TestARoleThatMayNotCreateTablesRunsAQueueOnAnAppliedSchema(t *testing.T) {
	ctx := context.Background()
	u, admin := freshSchema(t)
	schema := schemaOf(t, u)
	role, ru := newRole(t, admin, u, schema)

	// No tables yet, and the role may not create them: a clear error,
	// nothing written.
	_, err := Open(ctx, ru, nil)
	require.ErrorIs(t, err, ErrNoCreatePrivilege)
	var pe *pgconn.PgError
	require.True(t, errors.As(err, &pe), "the server's error is kept: %v", err)
	require.Equal(t, "42501", pe.Code)
	require.Contains(t, err.Error(), "lqinspect schema -from 0")
	require.Empty(t, tables(t, admin, schema))

	// The owner applies the schema and grants the role its rows.
	sql, err := MigrationSQL(0)
	require.NoError(t, err)
	applyMigrationSQL(t, admin, schema, sql)
	_, err = admin.Exec("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA " + quoteIdent(schema) + " TO " + quoteIdent(role))
	require.NoError(t, err)

	// The role runs the queue: enqueue, a worker's claim, a retry, a
	// success — every write a queue makes.
	q, err := Open(ctx, ru, &litequeue.Options{Queues: []litequeue.QueueConfig{{Name: litequeue.DefaultQueue,
		Retry: litequeue.FixedRetry(3, time.Millisecond)}}})
	require.NoError(t, err)
	defer q.Close()
	done := make(chan int, 1)
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[roleJob]) error {
		if d.Attempt == 1 {
			return errors.New("first attempt fails")
		}
		done <- d.Attempt
		return nil
	})
	require.NoError(t, q.Start(ctx))
	_, err = q.Enqueue(ctx, roleJob{N: 1}, nil)
	require.NoError(t, err)
	select {
	case a := <-done:
		require.Equal(t, 2, a)
	case <-time.After(30 * time.Second):
		t.Fatal("the job did not run twice")
	}
	// And backs the queue up, reading only what its grants allow: without
	// the id sequence, the copy's ids still continue after every id its
	// rows name (here only the schedule's last job, whose row is gone).
	_, err = q.RegisterSchedule(ctx, litequeue.Schedule{Name: "daily", Cron: "@daily", Job: roleJob{N: 2}})
	require.NoError(t, err)
	last, err := q.TriggerSchedule(ctx, "daily")
	require.NoError(t, err)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the triggered job did not run")
	}
	require.NoError(t, q.Stop(ctx))
	path := filepath.Join(t.TempDir(), "copy.db")
	require.NoError(t, q.Backup(ctx, path))
	copied, err := litequeue.Open(path, &litequeue.Options{PollInterval: -1})
	require.NoError(t, err)
	defer copied.Close()
	id, err := copied.Enqueue(ctx, roleJob{N: 3}, nil)
	require.NoError(t, err)
	require.Greater(t, id, last)
}
