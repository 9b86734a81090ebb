package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Bouncer is a PgBouncer in transaction pooling mode in front of the test
// server, started for one test by StartBouncer.
type Bouncer struct {
	admin string // the server's admin URL
	port  int

	mu  sync.Mutex
	dbs []string // made by FreshDatabase, dropped once the bouncer stopped
}

// StartBouncer starts a PgBouncer (transaction pooling, the mode that
// passes no session state between transactions) on a free port of
// 127.0.0.1 in front of the test server, stopped when t ends. Every database
// name a client asks for is the server's database of that name, logged into
// as the admin URL's user.
//
// The binary is LITEQUEUE_PGBOUNCER, else pgbouncer on PATH or in
// /usr/sbin. When there is none the test skips with a message saying how to
// install it — unless LITEQUEUE_REQUIRE_PGBOUNCER=1 (CI sets it), when it
// fails.
func StartBouncer(t *testing.T) *Bouncer {
	t.Helper()
	admin := URL(t)
	bin := os.Getenv("LITEQUEUE_PGBOUNCER")
	if bin == "" {
		if p, err := exec.LookPath("pgbouncer"); err == nil {
			bin = p
		} else if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
			bin = "/usr/sbin/pgbouncer"
		}
	}
	if bin == "" {
		msg := "PgBouncer is not installed (apt-get install pgbouncer, or point LITEQUEUE_PGBOUNCER at its binary) to run the tests through a connection pooler"
		if os.Getenv("LITEQUEUE_REQUIRE_PGBOUNCER") == "1" {
			t.Fatal(msg + " (LITEQUEUE_REQUIRE_PGBOUNCER=1: it is required)")
		}
		t.Skip(msg)
	}
	au, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	host, port := au.Hostname(), au.Port()
	if port == "" {
		port = "5432"
	}
	serverUser := au.User.Username()
	if serverUser == "" {
		serverUser = "postgres"
	}

	// PgBouncer refuses to run as root; as root it is told to switch to
	// the server's Unix user, which must be able to read its files.
	dir, err := os.MkdirTemp("", "lqbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	runAs := ""
	if os.Geteuid() == 0 {
		for _, name := range []string{"postgres", "nobody"} {
			if _, err := user.Lookup(name); err == nil {
				runAs = "user = " + name
				break
			}
		}
	}
	b := &Bouncer{admin: admin}
	var lastErr error
	for try := 0; try < 5; try++ {
		b.port = freePort(t)
		ini := filepath.Join(dir, "pgbouncer.ini")
		conf := fmt.Sprintf(`[databases]
* = host=%s port=%s user=%s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = any
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 40
server_idle_timeout = 1
ignore_startup_parameters = extra_float_digits
%s
`, host, port, serverUser, b.port, runAs)
		if err := os.WriteFile(ini, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, ini)
		logf, err := os.Create(filepath.Join(dir, "log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			logf.Close()
			t.Fatalf("start %s: %v", bin, err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait(); logf.Close() }()
		if lastErr = b.ready(exited); lastErr == nil {
			t.Cleanup(func() {
				cmd.Process.Kill()
				<-exited
				b.dropAll(t)
				if t.Failed() {
					log, _ := os.ReadFile(filepath.Join(dir, "log"))
					t.Logf("PgBouncer's log:\n%s", log)
				}
			})
			return b
		}
		cmd.Process.Kill()
		<-exited
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		lastErr = fmt.Errorf("%v; its log:\n%s", lastErr, log)
	}
	t.Fatalf("PgBouncer (%s) did not start: %v", bin, lastErr)
	return nil
}

// ready waits until the bouncer answers a query, or exited reports it
// stopped.
func (b *Bouncer) ready(exited <-chan error) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("pgbouncer exited: %v", err)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, b.url("test"))
		if err == nil {
			_, err = conn.Exec(ctx, "SELECT 1")
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// url is the bouncer's URL of database db, with pgx's
// default_query_exec_mode=simple_protocol: no prepared statements, which
// PgBouncer before 1.21 cannot pool.
func (b *Bouncer) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable&default_query_exec_mode=simple_protocol", b.port, url.PathEscape(db))
}

// FreshDatabase creates a database for the test on the server, dropped
// when the bouncer's test ends, and returns the URL that reaches it through
// the bouncer (see url) and the database's own URL on the server, bypassing
// the bouncer. A database rather than a
// schema: PgBouncer does not pass a search_path startup parameter on.
func (b *Bouncer) FreshDatabase(t testing.TB) (pooled, direct string) {
	t.Helper()
	admin := Admin(t, b.admin)
	r := make([]byte, 6)
	rand.Read(r)
	name := "lqtest_" + hex.EncodeToString(r)
	if _, err := admin.Exec("CREATE DATABASE " + pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	b.dbs = append(b.dbs, name)
	b.mu.Unlock()
	du, err := url.Parse(b.admin)
	if err != nil {
		t.Fatal(err)
	}
	du.Path = "/" + name
	return b.url(name), du.String()
}

// dropAll drops the databases FreshDatabase made. It runs once the bouncer
// is gone: the server ending a bouncer's connections under it (DROP
// DATABASE … WITH (FORCE)) while its clients are still closing theirs can
// make PgBouncer 1.18 exit (its cancel-request handling; fixed in later
// releases).
func (b *Bouncer) dropAll(t testing.TB) {
	admin := Admin(t, b.admin)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, name := range b.dbs {
		if _, err := admin.Exec("DROP DATABASE " + pgx.Identifier{name}.Sanitize() + " WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	}
	b.dbs = nil
}

// freePort returns a TCP port of 127.0.0.1 that nothing listened on a
// moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
