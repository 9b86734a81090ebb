package main

import (
	"flag"
	"fmt"
	"strconv"

	"github.com/litequeue/litequeue/internal/redact"
	"github.com/litequeue/litequeue/postgres"
)

func (a *app) schema(args []string) error {
	fs := a.newFlags("schema", "[--from N | postgres://URL]", `
Print the SQL that creates, or brings up to this build's version, a
PostgreSQL queue's tables — for a database whose schema is changed only by
its owner or a migration tool, while the queue runs as a role that may only
read and write rows (it needs USAGE on the schema and SELECT, INSERT,
UPDATE, DELETE on the lq_* tables).

With a URL it reads the version installed there (writing nothing) and prints
what that schema still needs, or nothing when it is up to date; with --from
it prints the SQL from version N (0, the default: no tables yet).

Apply the SQL in one transaction with the queue's schema first in
search_path, for example, for the schema jobs:

  lqinspect schema 'postgres://owner@db/app?search_path=jobs' |
    PGOPTIONS=-csearch_path=jobs psql -1 -v ON_ERROR_STOP=1 postgres://owner@db/app`)
	from := fs.Int("from", 0, "the schema version to start from (0: no tables yet)")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	fromSet := false
	fs.Visit(func(f *flag.Flag) { fromSet = fromSet || f.Name == "from" })
	switch {
	case len(pos) == 1 && fromSet:
		return usagef("give --from or a URL, not both: with a URL the version installed there is the start")
	case len(pos) > 1:
		return usagef("want at most one postgres:// URL, got %d arguments", len(pos))
	case len(pos) == 1 && !isPostgresURL(pos[0]):
		return usagef("%q is not a postgres:// URL (schema prints PostgreSQL SQL; a queue file makes its own tables)", redact.URL(pos[0]))
	}
	if len(pos) == 1 {
		v, schema, err := postgres.InstalledVersion(a.ctx, pos[0])
		if err != nil {
			return err
		}
		if v > postgres.SchemaVersion {
			return fmt.Errorf("schema %q is at litequeue schema version %d, newer than this lqinspect's %d: use the lqinspect of the build that migrated it", schema, v, postgres.SchemaVersion)
		}
		if v == postgres.SchemaVersion {
			fmt.Fprintf(a.stderr, "schema %q is at version %d, this build's: nothing to apply\n", schema, v)
			return nil
		}
		*from = v
	}
	sql, err := postgres.MigrationSQL(*from)
	if err != nil {
		return usagef("--from %s: %v", strconv.Itoa(*from), err)
	}
	if sql == "" {
		fmt.Fprintf(a.stderr, "version %d is this build's: nothing to apply\n", *from)
		return nil
	}
	_, err = fmt.Fprint(a.stdout, sql)
	return err
}
