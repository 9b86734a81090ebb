package sqlitefile

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/litequeue/litequeue/internal/store"
)

// A queue file may come from anyone: before the queue reads a row of it,
// its queue tables are checked to be what litequeue's own migrations make
// for the file's schema version — tables (not views, which can recurse for
// ever), with exactly the expected columns (no generated ones) — and, in a
// queue file of its own (Open), free of triggers (which can delete, rewrite
// or stall every write). With trusted_schema off on every connection (see
// dsn) the schema's own functions are limited to SQLite's innocuous ones.

// column is one column of a table as PRAGMA table_xinfo describes it.
type column struct {
	name, typ, dflt string
	notNull, pk     int
	hidden          int // 0 plain, 1 hidden (virtual tables), 2/3 generated
}

func (c column) String() string {
	s := c.name + " " + c.typ
	if c.pk > 0 {
		s += " PRIMARY KEY"
	}
	if c.notNull != 0 {
		s += " NOT NULL"
	}
	if c.dflt != "" {
		s += " DEFAULT " + c.dflt
	}
	if c.hidden >= 2 {
		s += " GENERATED"
	}
	return s
}

// shape is the columns of each queue table (named lq_*), by lower-case name.
type shape map[string][]column

// expectedShapes are the shapes of a file at each schema version, made once
// by running the embedded migrations on an in-memory database.
var expectedShapes = sync.OnceValues(func() (map[int]shape, error) {
	ms, err := migrations()
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", "file:litequeue-shape?mode=memory")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	out := map[int]shape{}
	for _, m := range ms {
		if _, err := conn.ExecContext(ctx, m.SQL); err != nil {
			return nil, fmt.Errorf("litequeue: shape of migration %d: %w", m.Version, err)
		}
		tables, err := queueTables(ctx, conn)
		if err != nil {
			return nil, err
		}
		sh := shape{}
		for _, t := range tables {
			if sh[t], err = columnsOf(ctx, conn, t); err != nil {
				return nil, err
			}
		}
		out[m.Version] = sh
	}
	return out, nil
})

// queueTables lists the queue tables (lq_*) of db, lower-case.
func queueTables(ctx context.Context, db Execer) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT lower(name) FROM sqlite_schema WHERE type = 'table' AND lower(name) LIKE 'lq\_%' ESCAPE '\'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// columnsOf describes the columns of table, generated ones included.
func columnsOf(ctx context.Context, db Execer, table string) ([]column, error) {
	rows, err := db.QueryContext(ctx, `SELECT name, type, coalesce(dflt_value, ''), "notnull", pk, hidden FROM pragma_table_xinfo(?)`, table)
	if err != nil {
		return nil, ClassifyOpenError(err)
	}
	defer rows.Close()
	var out []column
	for rows.Next() {
		var c column
		if err := rows.Scan(&c.name, &c.typ, &c.dflt, &c.notNull, &c.pk, &c.hidden); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// schemaObject is one row of sqlite_schema.
type schemaObject struct{ typ, name, table string }

// objectsOn returns the schema's objects, by lower-case name.
func schemaObjects(ctx context.Context, db Execer) (map[string]schemaObject, []schemaObject, error) {
	rows, err := db.QueryContext(ctx, `SELECT type, name, tbl_name FROM sqlite_schema`)
	if err != nil {
		return nil, nil, ClassifyOpenError(err)
	}
	defer rows.Close()
	byName := map[string]schemaObject{}
	var triggers []schemaObject
	for rows.Next() {
		var o schemaObject
		if err := rows.Scan(&o.typ, &o.name, &o.table); err != nil {
			return nil, nil, err
		}
		byName[strings.ToLower(o.name)] = o
		if o.typ == "trigger" {
			triggers = append(triggers, o)
		}
	}
	return byName, triggers, rows.Err()
}

// checkTable refuses, naming it, a queue table that is missing, is not a
// table, or has other columns than want.
func checkTable(ctx context.Context, db Execer, objects map[string]schemaObject, name string, want []column) error {
	o, ok := objects[name]
	switch {
	case !ok:
		return fmt.Errorf("%w: the queue table %s is missing", store.ErrNotLitequeue, name)
	case o.typ != "table":
		return fmt.Errorf("%w: %s is a %s, not a table: the file's queue tables were altered; litequeue reads only tables its own migrations made (nothing was read)", store.ErrNotLitequeue, o.name, o.typ)
	}
	got, err := columnsOf(ctx, db, name)
	if err != nil {
		return err
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("%w: the table %s has columns (%s), not the columns litequeue's migrations made (%s): the file's queue tables were altered (nothing was read)",
			store.ErrNotLitequeue, o.name, columnList(got), columnList(want))
	}
	return nil
}

func columnList(cs []column) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = c.String()
	}
	return strings.Join(s, ", ")
}

// checkMetaShape refuses a file whose lq_meta is not a table with plain
// key and value columns, before Identify reads a value from it (a
// generated column could compute anything). Its exact shape is checked
// with the others once the version is known: a newer schema may change it.
func checkMetaShape(ctx context.Context, db Execer) error {
	objects, _, err := schemaObjects(ctx, db)
	if err != nil {
		return err
	}
	if o := objects["lq_meta"]; o.typ != "table" {
		return fmt.Errorf("%w: %s is a %s, not a table (nothing was read)", store.ErrNotLitequeue, o.name, o.typ)
	}
	cols, err := columnsOf(ctx, db, "lq_meta")
	if err != nil {
		return err
	}
	var key, value bool
	for _, c := range cols {
		if c.hidden != 0 {
			return fmt.Errorf("%w: the table lq_meta has a generated column %s: the file's queue tables were altered (nothing was read)", store.ErrNotLitequeue, c.name)
		}
		key = key || strings.EqualFold(c.name, "key")
		value = value || strings.EqualFold(c.name, "value")
	}
	if !key || !value {
		return fmt.Errorf("%w: the table lq_meta has columns (%s), not key and value", store.ErrNotLitequeue, columnList(cols))
	}
	return nil
}

// CheckShape refuses a file whose queue tables are not those of schema
// version (views in their place, other columns) or, when own (a queue file
// of its own, not the application's database of New), that has triggers on
// them. The error names the object and wraps store.ErrNotLitequeue.
func CheckShape(ctx context.Context, db Execer, version int, own bool) error {
	shapes, err := expectedShapes()
	if err != nil {
		return err
	}
	want, ok := shapes[version]
	if !ok {
		return fmt.Errorf("%w: schema version %d", store.ErrSchemaTooNew, version)
	}
	objects, triggers, err := schemaObjects(ctx, db)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := checkTable(ctx, db, objects, name, want[name]); err != nil {
			return err
		}
	}
	if !own {
		return nil
	}
	for _, tr := range triggers {
		if _, queue := want[strings.ToLower(tr.table)]; queue {
			return fmt.Errorf("%w: trigger %q on %s: litequeue's tables have no triggers, and one could delete, change or stall what the queue writes; drop it (DROP TRIGGER) if it is yours (nothing was read)",
				store.ErrNotLitequeue, tr.name, tr.table)
		}
	}
	return nil
}

// CheckFile checks the queue file conn is open on as Open does before it
// reads anything: a litequeue file of a schema this build reads, whose
// queue tables are the tables its migrations made, without triggers. It
// returns the file's schema version. For MoveFile, which reads the file on
// a connection of its own.
func CheckFile(ctx context.Context, conn Execer) (int, error) {
	version, foreign, err := Identify(ctx, conn)
	if err == nil {
		err = CheckVersion(version, foreign)
	}
	if err == nil {
		err = CheckShape(ctx, conn, version, true)
	}
	return version, err
}
