package postgres

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/store"
)

// tables lists the tables of schema.
func tables(t *testing.T, admin *sql.DB, schema string) []string {
	t.Helper()
	rows, err := admin.Query(`SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`, schema)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		out = append(out, n)
	}
	return out
}

func TestOpenCreatesTheSchemaOnceAndReopens(t *testing.T) {
	u, admin := freshSchema(t)
	schema := schemaOf(t, u)
	ctx := context.Background()
	// Two opens at once: the advisory lock makes one migrate.
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			s, err := openStore(ctx, u, false)
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(tables(t, admin, schema), ","); got != "lq_attempts,lq_deps,lq_flow_starts,lq_history,lq_jobs,lq_meta,lq_processes,lq_queues,lq_schedule_events,lq_schedules" {
		t.Fatalf("tables %s", got)
	}
	var v string
	if err := admin.QueryRow(`SELECT value FROM ` + quoteIdent(schema) + `.lq_meta WHERE key = 'schema_version'`).Scan(&v); err != nil || v != strconv.Itoa(SchemaVersion) {
		t.Fatalf("schema_version %q %v", v, err)
	}
	// Nothing of the queue's lands in public.
	for _, tb := range tables(t, admin, "public") {
		if strings.HasPrefix(tb, "lq_") {
			t.Errorf("public has %s", tb)
		}
	}
}

func TestOpenRefusesANewerSchemaAndWritesNothing(t *testing.T) {
	u, admin := freshSchema(t)
	schema := schemaOf(t, u)
	s, err := openStore(context.Background(), u, false)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := admin.Exec(`UPDATE ` + quoteIdent(schema) + `.lq_meta SET value = '99' WHERE key = 'schema_version'`); err != nil {
		t.Fatal(err)
	}
	_, err = openStore(context.Background(), u, false)
	if !errors.Is(err, store.ErrSchemaTooNew) || !strings.Contains(err.Error(), "99") {
		t.Fatalf("err = %v, want ErrSchemaTooNew naming version 99", err)
	}
	var v string
	admin.QueryRow(`SELECT value FROM ` + quoteIdent(schema) + `.lq_meta WHERE key = 'schema_version'`).Scan(&v)
	if v != "99" {
		t.Fatalf("schema_version became %q", v)
	}
}

func TestOpenRefusesAnotherApplicationsLqJobs(t *testing.T) {
	u, admin := freshSchema(t)
	schema := schemaOf(t, u)
	if _, err := admin.Exec(`CREATE TABLE ` + quoteIdent(schema) + `.lq_jobs (id serial PRIMARY KEY, title text);
		INSERT INTO ` + quoteIdent(schema) + `.lq_jobs (title) VALUES ('theirs')`); err != nil {
		t.Fatal(err)
	}
	_, err := openStore(context.Background(), u, false)
	if !errors.Is(err, store.ErrNotLitequeue) || !strings.Contains(err.Error(), schema) {
		t.Fatalf("err = %v, want ErrNotLitequeue naming the schema", err)
	}
	if got := strings.Join(tables(t, admin, schema), ","); got != "lq_jobs" {
		t.Fatalf("tables after the refusal: %s", got)
	}
	var title string
	if err := admin.QueryRow(`SELECT title FROM ` + quoteIdent(schema) + `.lq_jobs`).Scan(&title); err != nil || title != "theirs" {
		t.Fatalf("their row: %q %v", title, err)
	}
}

func TestOpenExplainsConnectionFailures(t *testing.T) {
	u := pgURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// A port nobody listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	pu, _ := url.Parse(u)
	pu.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	_, err = openStore(ctx, pu.String(), false)
	if !errors.Is(err, ErrUnreachable) {
		t.Errorf("unreachable server: %v, want ErrUnreachable", err)
	}

	// A user the server does not know.
	pu, _ = url.Parse(u)
	pu.User = url.UserPassword("no_such_user_lq", "wrong")
	_, err = openStore(ctx, pu.String(), false)
	if !errors.Is(err, ErrAuth) {
		t.Errorf("wrong credentials: %v, want ErrAuth", err)
	}

	// A database that does not exist.
	pu, _ = url.Parse(u)
	pu.Path = "/no_such_database_lq"
	_, err = openStore(ctx, pu.String(), false)
	if !errors.Is(err, ErrNoDatabase) {
		t.Errorf("missing database: %v, want ErrNoDatabase", err)
	}

	// A search_path naming no schema.
	_, err = openStore(ctx, withParam(t, u, "search_path", "no_such_schema_lq"), false)
	if !errors.Is(err, ErrNoSchema) {
		t.Errorf("missing schema: %v, want ErrNoSchema", err)
	}
}

func TestReadOnlyOpenCreatesNothing(t *testing.T) {
	u, admin := freshSchema(t)
	_, err := openStore(context.Background(), u, true)
	if err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("read-only open of an empty schema: %v", err)
	}
	if got := tables(t, admin, schemaOf(t, u)); len(got) != 0 {
		t.Fatalf("tables %v", got)
	}
	s, err := openStore(context.Background(), u, false)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	ro, err := openStore(context.Background(), u, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, _, err := ro.Insert(context.Background(), store.Tx{}, []store.NewJob{job("q", "a", 0, 1, "")}); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("Insert on a read-only store: %v", err)
	}
}

func TestNewRefusesAPoolOfOneConnectionAndWritesNothing(t *testing.T) {
	u, admin := freshSchema(t)
	db, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	_, err = New(db, nil)
	if !errors.Is(err, ErrPoolTooSmall) || !strings.Contains(err.Error(), "at least 5") {
		t.Fatalf("New on a pool of one: %v", err)
	}
	if got := tables(t, admin, schemaOf(t, u)); len(got) != 0 {
		t.Fatalf("tables written: %v", got)
	}
	// Two connections are enough to run (LISTEN and one for the rest).
	db.SetMaxOpenConns(2)
	q, err := New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ran := make(chan struct{}, 1)
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[roleJob]) error {
		ran <- struct{}{}
		return nil
	})
	ctx := context.Background()
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(ctx, roleJob{N: 1}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("a queue on two connections did not run its job")
	}
}

// TestOpenChecksTheListenURLAndWritesNothing: an Options.ListenURL that does
// not parse, reaches no server, or reaches another database than the
// queue's (where its notifications would never arrive) is refused by
// OpenWith and NewWith — and, given as the deprecated
// litequeue.Options.ListenURL, by Open and New — with an error that names
// it, before any table is written.
func TestOpenChecksTheListenURLAndWritesNothing(t *testing.T) {
	u, admin := freshSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	other, _ := url.Parse(u)
	other.Path = "/postgres"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed, _ := url.Parse(u)
	closed.Host = l.Addr().String()
	l.Close()

	db, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, c := range []struct {
		name, listen string
		want         error
		says         string
	}{
		{"another database", other.String(), ErrListenElsewhere, "point ListenURL at"},
		{"no server", closed.String(), ErrUnreachable, "Options.ListenURL"},
		{"not a URL", "postgres://[::1", nil, "Options.ListenURL"},
	} {
		opts := &Options{ListenURL: c.listen}
		_, errOpen := OpenWith(ctx, u, opts)
		_, errNew := NewWith(db, opts)
		//lint:ignore SA1019 the deprecated field is honoured for one release.
		old := &litequeue.Options{ListenURL: c.listen}
		_, errOpenOld := Open(ctx, u, old)
		_, errNewOld := New(db, old)
		for _, err := range []error{errOpen, errNew, errOpenOld, errNewOld} {
			if err == nil || !strings.Contains(err.Error(), c.says) || (c.want != nil && !errors.Is(err, c.want)) {
				t.Errorf("%s: %v, want %v saying %q", c.name, err, c.want, c.says)
			}
		}
		if got := tables(t, admin, schemaOf(t, u)); len(got) != 0 {
			t.Fatalf("%s: tables written: %v", c.name, got)
		}
	}

	// The queue's own database, reached directly: accepted.
	q, err := OpenWith(ctx, u, &Options{ListenURL: u})
	if err != nil {
		t.Fatal(err)
	}
	q.Close()
	//lint:ignore SA1019 the deprecated field is honoured for one release.
	q, err = Open(ctx, u, &litequeue.Options{ListenURL: u})
	if err != nil {
		t.Fatal(err)
	}
	q.Close()
}
