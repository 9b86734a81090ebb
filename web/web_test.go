package web_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/web"
	"github.com/stretchr/testify/require"
)

// Email is the test job type; its handler fails when Fail is set.
type Email struct {
	To   string `json:"to"`
	Fail string `json:"fail,omitempty"`
}

func (Email) Kind() string { return "email" }

type fixture struct {
	q     *litequeue.Queue
	path  string
	clock *clock.Mock
	dead  map[string]int // dead letters' ids by To
}

// newFixture opens a queue in t.TempDir() with a mock clock and makes the
// given dead letters (To → error message), then a few live jobs.
func newFixture(t *testing.T, dead map[string]string) *fixture {
	t.Helper()
	f := &fixture{path: filepath.Join(t.TempDir(), "q.db"), clock: clock.NewMock()}
	f.clock.Set(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	died := make(chan struct{}, 1000)
	q, err := litequeue.Open(f.path, &litequeue.Options{Clock: f.clock, PollInterval: -1, OnEvent: func(e litequeue.Event) {
		if e.Type == litequeue.EventDead {
			died <- struct{}{}
		}
	}})
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	f.q = q
	ctx := context.Background()
	if len(dead) > 0 {
		litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
			return errors.New(d.Job.Fail)
		})
		for to, msg := range dead {
			_, err := q.Enqueue(ctx, Email{To: to, Fail: msg}, nil)
			require.NoError(t, err)
		}
		require.NoError(t, q.Start(ctx))
		for range dead {
			select {
			case <-died:
			case <-time.After(10 * time.Second):
				t.Fatal("timed out waiting for the dead letters")
			}
		}
		require.NoError(t, q.Stop(ctx))
	}
	return f
}

// closeServer drops the open connections first: a live-refresh stream
// ends only with its connection, and Close waits for every request.
func closeServer(srv *httptest.Server) {
	srv.CloseClientConnections()
	srv.Close()
}

// client is an HTTP client with a cookie jar that does not follow redirects.
func client(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, u string) (int, string, http.Header) {
	t.Helper()
	resp, err := c.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func post(t *testing.T, c *http.Client, u string, form url.Values, origin string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest("POST", u, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func csrfOf(t *testing.T, body string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(body)
	require.NotNil(t, m, "no CSRF field in the page")
	return m[1]
}

func TestEveryPageRendersWithSecurityHeaders(t *testing.T) {
	f := newFixture(t, map[string]string{"a": "smtp 42 refused", "b": "smtp 7 refused"})
	_, err := f.q.Enqueue(context.Background(), Email{To: "later"}, &litequeue.EnqueueOptions{Delay: time.Hour})
	require.NoError(t, err)
	srv := httptest.NewServer(web.Handler(f.q, nil))
	defer closeServer(srv)
	c := client(t)
	for _, p := range []string{"/", "/jobs", "/jobs?state=dead", "/jobs/1", "/dead", "/queues", "/schedules", "/plan", "/plan?policy=%7B%22max_attempts%22%3A3%7D"} {
		code, body, h := get(t, c, srv.URL+p)
		require.Equal(t, 200, code, "%s: %s", p, body)
		require.Contains(t, h.Get("Content-Security-Policy"), "script-src 'self'", p)
		require.NotContains(t, body, "<script>", "%s: no inline script", p)
	}
	_, body, _ := get(t, c, srv.URL+"/dead")
	require.Contains(t, body, "smtp &lt;n&gt; refused")
	require.Contains(t, body, ">2<", "one group of two")
	code, _, _ := get(t, c, srv.URL+"/jobs/99999")
	require.Equal(t, 404, code)
	code, _, _ = get(t, c, srv.URL+"/metrics")
	require.Equal(t, 404, code, "no metrics handler configured")
}

func TestPayloadAndErrorAreEscaped(t *testing.T) {
	const evil = `<script>alert("x")</script><img src=x onerror=alert(1)>`
	f := newFixture(t, map[string]string{evil: evil})
	srv := httptest.NewServer(web.Handler(f.q, nil))
	defer closeServer(srv)
	c := client(t)
	for _, p := range []string{"/jobs", "/jobs/1", "/dead", "/jobs?q=" + url.QueryEscape(evil)} {
		code, body, _ := get(t, c, srv.URL+p)
		require.Equal(t, 200, code)
		require.NotContains(t, body, "<script>alert", p)
		require.NotContains(t, body, "<img src=x", p)
		require.Contains(t, body, "&lt;script&gt;", p)
	}
}

func TestActionsNeedPOSTWithTheCSRFToken(t *testing.T) {
	f := newFixture(t, map[string]string{"a": "boom"})
	srv := httptest.NewServer(web.Handler(f.q, nil))
	defer closeServer(srv)
	c := client(t)
	_, body, _ := get(t, c, srv.URL+"/jobs/1")
	tok := csrfOf(t, body)

	code, _, _ := get(t, c, srv.URL+"/jobs/1/requeue")
	require.Equal(t, http.StatusMethodNotAllowed, code, "no action on GET")
	code, _, _ = post(t, c, srv.URL+"/jobs/1/requeue", url.Values{}, "")
	require.Equal(t, http.StatusForbidden, code, "no token")
	code, _, _ = post(t, c, srv.URL+"/jobs/1/requeue", url.Values{"csrf": {strings.Repeat("0", 64)}}, "")
	require.Equal(t, http.StatusForbidden, code, "wrong token")
	code, _, _ = post(t, c, srv.URL+"/jobs/1/requeue", url.Values{"csrf": {tok}}, "https://evil.example")
	require.Equal(t, http.StatusForbidden, code, "cross-origin")
	j, err := f.q.Job(context.Background(), 1)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateDead, j.State, "nothing changed")

	code, _, h := post(t, c, srv.URL+"/jobs/1/requeue", url.Values{"csrf": {tok}}, "")
	require.Equal(t, http.StatusSeeOther, code)
	require.Contains(t, h.Get("Location"), "/jobs/1?done=")
	j, err = f.q.Job(context.Background(), 1)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateReady, j.State)
}

func TestReadOnlyHidesAndRefusesActions(t *testing.T) {
	f := newFixture(t, map[string]string{"a": "boom"})
	srv := httptest.NewServer(web.Handler(f.q, &web.Options{ReadOnly: true}))
	defer closeServer(srv)
	c := client(t)
	for _, p := range []string{"/jobs", "/jobs/1", "/dead"} {
		_, body, _ := get(t, c, srv.URL+p)
		require.NotContains(t, body, `method="post"`, p)
		require.Contains(t, body, "read-only", p)
	}
	for _, p := range []string{"/jobs/1/requeue", "/bulk", "/dead/requeue"} {
		code, _, _ := post(t, c, srv.URL+p, url.Values{"action": {"requeue"}, "scope": {"filter"}, "confirm": {"yes"}, "key": {"boom"}}, "")
		require.Equal(t, http.StatusForbidden, code, p)
	}
	n, err := f.q.CountJobs(context.Background(), litequeue.JobQuery{States: []litequeue.State{litequeue.StateDead}}, 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

func TestTokenIsRequiredAndComparedBeforeAnything(t *testing.T) {
	f := newFixture(t, nil)
	srv := httptest.NewServer(web.Handler(f.q, &web.Options{Token: "s3cret"}))
	defer closeServer(srv)
	c := client(t)
	code, body, _ := get(t, c, srv.URL+"/jobs")
	require.Equal(t, http.StatusUnauthorized, code)
	require.Contains(t, body, `name="token"`)
	code, _, _ = post(t, c, srv.URL+"/login", url.Values{"token": {"wrong"}}, "")
	require.Equal(t, http.StatusUnauthorized, code)
	code, _, _ = post(t, c, srv.URL+"/login", url.Values{"token": {"s3cret"}}, "")
	require.Equal(t, http.StatusSeeOther, code)
	code, _, _ = get(t, c, srv.URL+"/jobs")
	require.Equal(t, 200, code, "the login cookie lets the browser in")

	req, _ := http.NewRequest("GET", srv.URL+"/jobs", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode, "a bearer token works too")
}

func TestMountsUnderAPrefixEitherWay(t *testing.T) {
	f := newFixture(t, nil)
	mux := http.NewServeMux()
	mux.Handle("/stripped/", http.StripPrefix("/stripped", web.Handler(f.q, nil)))
	mux.Handle("/full/", web.Handler(f.q, &web.Options{Prefix: "/full"}))
	srv := httptest.NewServer(mux)
	defer closeServer(srv)
	c := client(t)
	for _, root := range []string{"/stripped", "/full"} {
		code, body, _ := get(t, c, srv.URL+root+"/jobs")
		require.Equal(t, 200, code, root)
		require.Contains(t, body, `href="`+root+`/static/app.css"`, root)
		require.Contains(t, body, `href="`+root+`/dead"`, root)
		code, _, _ = get(t, c, srv.URL+root+"/static/app.js")
		require.Equal(t, 200, code, root)
		code, _, h := get(t, c, srv.URL+root)
		require.Contains(t, []int{http.StatusMovedPermanently, http.StatusTemporaryRedirect}, code, root)
		require.Equal(t, root+"/", h.Get("Location"))
	}
}

func TestBulkActionAsksThenActsOnTheFilter(t *testing.T) {
	f := newFixture(t, map[string]string{"a": "x", "b": "x", "c": "y"})
	ctx := context.Background()
	for i := range 3 {
		_, err := f.q.Enqueue(ctx, Email{To: fmt.Sprint("live", i)}, nil)
		require.NoError(t, err)
	}
	srv := httptest.NewServer(web.Handler(f.q, nil))
	defer closeServer(srv)
	c := client(t)
	_, body, _ := get(t, c, srv.URL+"/jobs")
	tok := csrfOf(t, body)
	form := url.Values{"csrf": {tok}, "action": {"requeue"}, "scope": {"filter"}, "state": {"dead"}}
	code, body, _ := post(t, c, srv.URL+"/bulk", form, "")
	require.Equal(t, 200, code)
	require.Regexp(t, `class="count">3<`, body, "the confirmation counts the dead letters")
	n, _ := f.q.CountJobs(ctx, litequeue.JobQuery{States: []litequeue.State{litequeue.StateDead}}, 0)
	require.Equal(t, 3, n, "asking changes nothing")
	form.Set("confirm", "yes")
	code, _, h := post(t, c, srv.URL+"/bulk", form, "")
	require.Equal(t, http.StatusSeeOther, code)
	require.Contains(t, h.Get("Location"), "Requeue")
	n, _ = f.q.CountJobs(ctx, litequeue.JobQuery{States: []litequeue.State{litequeue.StateDead}}, 0)
	require.Zero(t, n)

	form = url.Values{"csrf": {tok}, "action": {"cancel"}, "scope": {"selected"}, "id": {"4", "5"}, "confirm": {"yes"}}
	code, _, _ = post(t, c, srv.URL+"/bulk", form, "")
	require.Equal(t, http.StatusSeeOther, code)
	n, _ = f.q.CountJobs(ctx, litequeue.JobQuery{States: []litequeue.State{litequeue.StateCancelled}}, 0)
	require.Equal(t, 2, n, "two of the six live jobs cancelled")
}
