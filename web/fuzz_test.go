package web

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/litequeue/litequeue"
)

// The fuzz targets of the dashboard's parsers of outside input (.ci/run
// runs each with a budget of executions).

// FuzzParams runs the parsers of query strings and forms (filters, the
// cursor, the bulk form, flash messages), of Host and Origin headers and of
// session cookies on arbitrary input: none panics, what one accepts stays
// within its bounds, and a filter survives the round trip through the links
// the pages build.
func FuzzParams(f *testing.F) {
	for _, seed := range []struct{ query, host, cookie string }{
		{"queue=invoices&state=dead&before=3671", "127.0.0.1:8080", "1772366400.abc"},
		{"action=requeue&scope=selected&id=1&id=2&csrf=x", "localhost", ""},
		{"action=delete&scope=filter&kind=%20k%20&q=smtp+550", "[::1]:80", "x.y.z"},
		{"done=schedule-triggered&job=42&name=nightly", "evil.example:8080", "..."},
		{"done=queue-paused&name=%E2%80%AEx", "a:b:c", "99999999999999999999.x"},
		{"before=-1&state=bogus", "dash.localhost.", ""},
		{"%zz&q=" + strings.Repeat("a", 300), "[x", ""},
	} {
		f.Add(seed.query, seed.host, seed.cookie)
	}
	s := &server{sessionKey: sessionKey("fuzz-token-fuzz-token")}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, query, host, cookie string) {
		v, _ := url.ParseQuery(query) // the values it could read; the server reads them so too
		if fl, err := filterFrom(v); err == nil {
			if len(fl.Queue) > maxFilterName || len(fl.Kind) > maxFilterName || len(fl.Text) > maxFilterText {
				t.Fatalf("filter %+v beyond its bounds", fl)
			}
			u, err := url.Parse(string(link("/root", "/jobs", fl.Values())))
			if err != nil || u.Path != "/root/jobs" {
				t.Fatalf("link of %+v: %v %q", fl, err, u)
			}
			back, err := filterFrom(u.Query())
			if err != nil || back != fl {
				t.Fatalf("filter %+v came back from its link as %+v (%v)", fl, back, err)
			}
			if fl.State != "" && len(fl.query().States) != 1 {
				t.Fatalf("state %q not in the query", fl.State)
			}
		}
		if n, err := cursorFrom(v); err == nil && n < 0 {
			t.Fatalf("cursor %d", n)
		}
		if b, err := bulkFrom(v); err == nil {
			if _, ok := bulkActions[b.Action]; !ok || len(b.IDs) > maxSelected || (b.Scope == "selected") != (len(b.IDs) > 0) {
				t.Fatalf("bulk request %+v", b)
			}
			for _, id := range b.IDs {
				if id <= 0 {
					t.Fatalf("bulk id %d", id)
				}
			}
		}
		if msg, job := flashFrom(v); msg != "" {
			if _, ok := flashes[v.Get("done")]; !ok || job < 0 {
				t.Fatalf("flash %q from %q", msg, query)
			}
			for _, r := range msg {
				if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
					t.Fatalf("flash %q holds %U", msg, r)
				}
			}
		} else if job != 0 {
			t.Fatalf("no flash, but job %d", job)
		}
		allowed := hostAllowed(host, nil)
		if name := hostName(host); allowed && host != "" && name == "" {
			t.Fatalf("host %q allowed without a name", host)
		}
		if !allowed && hostAllowed(host, []string{"*"}) != true {
			t.Fatalf("host %q refused with *", host)
		}
		originHost(host)
		clientKey(host)
		if s.sessionValid(cookie, now) {
			t.Fatalf("a session cookie %q that was never issued is valid", cookie)
		}
		if !s.sessionValid(s.newSession(now), now) {
			t.Fatal("a new session is not valid")
		}
	})
}

// fuzzJob is the job type of FuzzRequests' queue.
type fuzzJob struct{ N int }

func (fuzzJob) Kind() string { return "boom" }

// FuzzRequests sends arbitrary GET and POST requests (path, query and form)
// to the dashboard of a small queue file: none panics or fails with a
// server error, whatever the parameters.
func FuzzRequests(f *testing.F) {
	for _, seed := range []struct {
		post       bool
		target     string
		form       string
		withCookie bool
	}{
		{false, "/jobs?state=dead&queue=default&before=3", "", false},
		{false, "/jobs?q=boom&kind=email", "", false},
		{false, "/dead?queue=default", "", false},
		{false, "/plan?policy=" + url.QueryEscape(`{"max_attempts":9223372036854775807}`), "", false},
		{false, "/schedules/%2e%2e", "", false},
		{false, "/jobs/1", "", false},
		{false, "/?done=bulk-requeue&n=3", "", false},
		{true, "/bulk", "action=requeue&scope=selected&id=1", true},
		{true, "/bulk", "action=delete&scope=filter&state=dead", true},
		{true, "/dead/requeue", "key=boom&queue=default", true},
		{true, "/queues/pause", "queue=q", true},
		{true, "/schedules/trigger", "name=none", true},
		{true, "/jobs/1/requeue", "", true},
		{true, "/login", "token=x", false},
	} {
		f.Add(seed.post, seed.target, seed.form, seed.withCookie)
	}
	path := filepath.Join(f.TempDir(), "fuzz.db")
	q, err := litequeue.Open(path, &litequeue.Options{PollInterval: -1})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { q.Close() })
	ctx := context.Background()
	for i := range 3 {
		if _, err := q.Enqueue(ctx, fuzzJob{N: i}, &litequeue.EnqueueOptions{Delay: time.Duration(i) * time.Hour}); err != nil {
			f.Fatal(err)
		}
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		f.Fatal(err)
	}
	_, err = db.Exec(`INSERT INTO lq_jobs (queue, kind, state, visible_at, attempt, payload, created_at, run_at, finished_at, last_error)
		VALUES ('default', 'boom', 3, 0, 1, CAST('{}' AS BLOB), 0, 0, 1, 'boom 42: "x" refused'), ('default', 'boom', 3, 0, 1, CAST('{}' AS BLOB), 0, 0, 2, '')`)
	db.Close()
	if err != nil {
		f.Fatal(err)
	}
	h := Handler(q, &Options{RefreshInterval: -1})
	const csrf = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	f.Fuzz(func(t *testing.T, post bool, target, form string, withCookie bool) {
		method, body := http.MethodGet, ""
		if post {
			method, body = http.MethodPost, form+"&csrf="+csrf
		}
		req, err := http.NewRequest(method, "http://localhost/"+strings.TrimPrefix(target, "/"), strings.NewReader(body))
		if err != nil {
			return // not a request a client could send
		}
		if post {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if withCookie {
			req.AddCookie(&http.Cookie{Name: csrfCookie, Value: csrf})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req.WithContext(ctx))
		if w.Code >= 500 && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("%s %s (%q): %d %s", method, target, form, w.Code, w.Body.String())
		}
	})
}
