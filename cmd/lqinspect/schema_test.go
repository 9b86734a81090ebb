package main

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue/internal/pgtest"
	"github.com/litequeue/litequeue/postgres"
)

func TestSchemaPrintsWhatADatabaseStillNeedsAndNothingOnceApplied(t *testing.T) {
	u, admin := pgtest.FreshSchema(t)
	schema := pgtest.Schema(t, u)
	all, err := postgres.MigrationSQL(0)
	require.NoError(t, err)

	r := lq(t, "", "schema")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, all, r.stdout)

	// An empty schema needs everything; reading its version writes nothing.
	r = lq(t, "", "schema", u)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, all, r.stdout)
	var n int
	require.NoError(t, admin.QueryRow(`SELECT count(*) FROM information_schema.tables WHERE table_schema = $1`, schema).Scan(&n))
	require.Zero(t, n)

	tx, err := admin.Begin()
	require.NoError(t, err)
	_, err = tx.Exec(`SELECT set_config('search_path', $1, true)`, schema)
	require.NoError(t, err)
	_, err = tx.Exec(r.stdout)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())

	r = lq(t, "", "schema", u)
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, "nothing to apply")
	r = lq(t, "", "stats", u)
	require.Equal(t, 0, r.code, r.stderr)

	// A newer build's schema: refused, with what to do.
	_, err = admin.Exec(`UPDATE ` + pgx.Identifier{schema}.Sanitize() + `.lq_meta SET value = '99' WHERE key = 'schema_version'`)
	require.NoError(t, err)
	r = lq(t, "", "schema", u)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "newer than this lqinspect's")
	require.Empty(t, r.stdout)
}

func TestSchemaRefusesBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{"schema", "--from", "99"},
		{"schema", "--from", "-1"},
		{"schema", "--from", "0", "postgres://postgres@127.0.0.1:5432/test"},
		{"schema", "queue.db"},
		{"schema", "postgres://a/b", "postgres://c/d"},
	} {
		r := lq(t, "", args...)
		require.Equal(t, exitUsage, r.code, "%v: %s", args, r.stderr)
		require.Empty(t, r.stdout, "%v", args)
	}
}
