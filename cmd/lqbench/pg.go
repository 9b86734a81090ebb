package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/postgres"
)

// pgRun is one run's PostgreSQL database: created fresh through the admin
// URL, dropped at the end (also on SIGINT and SIGTERM), as the peer harness
// does for its PostgreSQL peers.
type pgRun struct {
	admin string // the -pg URL
	name  string // lqbench_<pid>_<8 hex>
	url   string // admin with the run's database
	stop  func()
}

func newPGRun(ctx context.Context, admin string) (*pgRun, error) {
	if admin == "" {
		admin = os.Getenv("PG_URL")
	}
	if admin == "" {
		admin = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	b := make([]byte, 4)
	rand.Read(b)
	r := &pgRun{admin: admin, name: fmt.Sprintf("lqbench_%d_%s", os.Getpid(), hex.EncodeToString(b))}
	db, err := sql.Open("pgx", admin)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+pgx.Identifier{r.name}.Sanitize()+" TEMPLATE template0"); err != nil {
		return nil, fmt.Errorf("create database %s through %s: %w", r.name, admin, err)
	}
	u, err := url.Parse(admin)
	if err != nil || u.Scheme == "" {
		r.drop()
		return nil, fmt.Errorf("-pg must be a postgres:// URL: %q", admin)
	}
	u.Path = "/" + r.name
	r.url = u.String()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sig:
			r.drop()
			fmt.Fprintln(os.Stderr, "lqbench: dropped", r.name, "on", s)
			os.Exit(1)
		case <-done:
		}
	}()
	r.stop = func() { signal.Stop(sig); close(done) }
	return r, nil
}

// drop drops the run's database, closing whatever still uses it.
func (r *pgRun) drop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sql.Open("pgx", r.admin)
	if err != nil {
		return
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{r.name}.Sanitize()+" WITH (FORCE)"); err != nil {
		fmt.Fprintln(os.Stderr, "lqbench: drop database", r.name+":", err)
	}
}

func (r *pgRun) close() {
	if r.stop != nil {
		r.stop()
	}
	r.drop()
}

// openPG opens the queue of a run on PostgreSQL.
func openPG(ctx context.Context, r *pgRun, opts *litequeue.Options) (*litequeue.Queue, error) {
	return postgres.Open(ctx, r.url, opts)
}

// pgSettings reads back, on a connection to the run's database, the server
// settings that affect speed (the same list as the peers').
func pgSettings(r *pgRun) any {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := sql.Open("pgx", r.url)
	if err != nil {
		return "read failed: " + err.Error()
	}
	defer db.Close()
	out := map[string]string{}
	for _, name := range []string{"synchronous_commit", "fsync", "wal_sync_method", "full_page_writes", "commit_delay", "server_version", "default_transaction_isolation"} {
		var v string
		if err := db.QueryRowContext(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
			return "read failed: " + err.Error()
		}
		out[name] = v
	}
	return out
}

func redact(u string) string {
	pu, err := url.Parse(u)
	if err != nil {
		return "(unparsable)"
	}
	if _, ok := pu.User.Password(); ok {
		pu.User = url.UserPassword(pu.User.Username(), "xxx")
	}
	return strings.TrimSpace(pu.String())
}
