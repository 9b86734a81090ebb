package web_test

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
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

// fixture is a queue for one test, on a mock clock set to 2026-03-01
// 12:00 UTC, with polling off, whose events go to a channel that
// waitEvent reads.
type fixture struct {
	q       *litequeue.Queue
	path    string // the SQLite file; "" on PostgreSQL
	clock   *clock.Mock
	evs     chan litequeue.Event
	dropped atomic.Int64 // events that found evs full
}

// openFixture opens a fixture on a SQLite file in t.TempDir() with opts
// (nil: the defaults); the fixture sets Clock, PollInterval and OnEvent.
func openFixture(t *testing.T, opts *litequeue.Options) *fixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "q.db")
	f := openFixtureOn(t, opts, func(opts *litequeue.Options) (*litequeue.Queue, error) {
		return litequeue.Open(path, opts)
	})
	f.path = path
	return f
}

// openFixtureOn opens a fixture with open, which opens the queue on either
// backend with the options given. The queue closes at the end of the test.
func openFixtureOn(t *testing.T, opts *litequeue.Options, open func(*litequeue.Options) (*litequeue.Queue, error)) *fixture {
	t.Helper()
	f := &fixture{clock: clock.NewMock(), evs: make(chan litequeue.Event, 1000)}
	f.clock.Set(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	if opts == nil {
		opts = &litequeue.Options{}
	}
	opts.Clock, opts.PollInterval = f.clock, -1
	opts.OnEvent = func(e litequeue.Event) {
		select {
		case f.evs <- e:
		default:
			f.dropped.Add(1) // never blocks the queue's Close; waitEvent says so
		}
	}
	q, err := open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	f.q = q
	return f
}

// newFixture opens a fixture (see openFixture) and makes the given dead
// letters (To → error message), run to their end and stopped.
func newFixture(t *testing.T, dead map[string]string) *fixture {
	t.Helper()
	f := openFixture(t, nil)
	if len(dead) == 0 {
		return f
	}
	ctx := context.Background()
	litequeue.Register(f.q, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		return errors.New(d.Job.Fail)
	})
	for to, msg := range dead {
		_, err := f.q.Enqueue(ctx, Email{To: to, Fail: msg}, nil)
		require.NoError(t, err)
	}
	require.NoError(t, f.q.Start(ctx))
	for range dead {
		f.waitEvent(t, litequeue.EventDead, 0)
	}
	require.NoError(t, f.q.Stop(ctx))
	return f
}

// waitEvent waits (at most 10s of real time) for an event of type typ about
// job id (any job when id is 0), skipping others.
func (f *fixture) waitEvent(t *testing.T, typ litequeue.EventType, id int64) litequeue.Event {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-f.evs:
			if e.Type == typ && (id == 0 || e.JobID == id) {
				return e
			}
		case <-timeout:
			t.Fatalf("no %s event for job %d within 10s (%d events dropped: the channel was full)", typ, id, f.dropped.Load())
		}
	}
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

// dash is a dashboard served for one test (closed at its end) and a
// browser-like client of it: a cookie jar, redirects not followed.
type dash struct {
	t   *testing.T
	URL string
	c   *http.Client
	tok string // the CSRF token of the forms of the last page opened
}

// serve serves h (the dashboard, or a mux it is mounted in) for t.
func serve(t *testing.T, h http.Handler) *dash {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(func() { closeServer(srv) })
	return &dash{t: t, URL: srv.URL, c: client(t)}
}

func (d *dash) get(path string) (int, string, http.Header) {
	d.t.Helper()
	return get(d.t, d.c, d.URL+path)
}

func (d *dash) post(path string, form url.Values, origin string) (int, string, http.Header) {
	d.t.Helper()
	return post(d.t, d.c, d.URL+path, form, origin)
}

// open reads the page at path (200 OK), keeps the CSRF token of its forms
// for send and act, and returns the page.
func (d *dash) open(path string) string {
	d.t.Helper()
	code, body, _ := d.get(path)
	require.Equal(d.t, 200, code, "%s: %s", path, body)
	d.tok = csrfOf(d.t, body)
	return body
}

// send posts form to path as a form of the page opened would: with its
// CSRF token, from the same origin. form is not changed.
func (d *dash) send(path string, form url.Values) (int, string, http.Header) {
	d.t.Helper()
	require.NotEmpty(d.t, d.tok, "open a page before sending its forms")
	return d.post(path, withToken(form, d.tok), "")
}

// withToken returns a copy of form with the CSRF token tok.
func withToken(form url.Values, tok string) url.Values {
	f := url.Values{"csrf": {tok}}
	for k, v := range form {
		f[k] = v
	}
	return f
}

var flashRE = regexp.MustCompile(`<p class="flash" role="status">([^<]*)`)

// act sends form to path (see send) as an action that succeeds: it requires
// 303 See Other with a flash message's code in the Location's "done",
// follows the redirect and requires the page there (200 OK) to show a
// flash message (the code's sentence). It returns the Location and that
// page.
func (d *dash) act(path string, form url.Values) (loc, page string) {
	d.t.Helper()
	code, body, h := d.send(path, form)
	require.Equal(d.t, http.StatusSeeOther, code, "%s: %s", path, body)
	loc = h.Get("Location")
	u, err := url.Parse(loc)
	require.NoError(d.t, err)
	done := u.Query().Get("done")
	require.NotEmpty(d.t, done, "no flash message in %s", loc)
	code, page, _ = d.get(loc)
	require.Equal(d.t, 200, code, "%s: %s", loc, page)
	m := flashRE.FindStringSubmatch(page)
	require.NotNil(d.t, m, "%s shows no flash message", loc)
	msg := strings.TrimSpace(html.UnescapeString(m[1]))
	require.NotEmpty(d.t, msg, "the flash message on %s", loc)
	require.NotContains(d.t, msg, done, "the flash message on %s is a sentence, not its code", loc)
	return loc, page
}

// requireForgeriesRefused requires the dashboard to refuse form posted to
// path every way but from its own page, with 403 Forbidden: without the
// CSRF token, with a wrong one, from another origin, and with the token of
// the page opened but without its cookie.
func (d *dash) requireForgeriesRefused(path string, form url.Values) {
	d.t.Helper()
	code, _, _ := d.post(path, form, "")
	require.Equal(d.t, http.StatusForbidden, code, "%s without a CSRF token", path)
	code, _, _ = d.post(path, withToken(form, strings.Repeat("0", 64)), "")
	require.Equal(d.t, http.StatusForbidden, code, "%s with a wrong CSRF token", path)
	code, _, _ = d.post(path, withToken(form, d.tok), "https://evil.example")
	require.Equal(d.t, http.StatusForbidden, code, "%s cross-origin", path)
	code, _, _ = post(d.t, client(d.t), d.URL+path, withToken(form, d.tok), "")
	require.Equal(d.t, http.StatusForbidden, code, "%s with a token but without its cookie", path)
}

// requireReadOnly requires each page to be served (200 OK) marked
// read-only and offering no action: no form that posts, no button but the
// Filter buttons of the filter forms (GET).
func (d *dash) requireReadOnly(pages ...string) {
	d.t.Helper()
	for _, p := range pages {
		code, body, _ := d.get(p)
		require.Equal(d.t, 200, code, p)
		require.Contains(d.t, body, `<span class="ro"`, p)
		require.NotContains(d.t, body, `method="post"`, p)
		require.Equal(d.t, strings.Count(body, `<button type="submit">Filter</button>`), strings.Count(body, "<button"), "%s: a button other than Filter", p)
	}
}

func TestEveryPageRendersWithSecurityHeaders(t *testing.T) {
	f := newFixture(t, map[string]string{"a": "smtp 42 refused", "b": "smtp 7 refused"})
	_, err := f.q.Enqueue(context.Background(), Email{To: "later"}, &litequeue.EnqueueOptions{Delay: time.Hour})
	require.NoError(t, err)
	d := serve(t, web.Handler(f.q, nil))
	for _, p := range []string{"/", "/jobs", "/jobs?state=dead", "/jobs/1", "/dead", "/queues", "/schedules", "/plan", "/plan?policy=%7B%22max_attempts%22%3A3%7D"} {
		code, body, h := d.get(p)
		require.Equal(t, 200, code, "%s: %s", p, body)
		require.Contains(t, h.Get("Content-Security-Policy"), "script-src 'self'", p)
		require.NotContains(t, body, "<script>", "%s: no inline script", p)
	}
	_, body, _ := d.get("/dead")
	require.Contains(t, body, "smtp &lt;n&gt; refused")
	require.Contains(t, body, ">2<", "one group of two")
	code, _, _ := d.get("/jobs/99999")
	require.Equal(t, 404, code)
	code, _, _ = d.get("/metrics")
	require.Equal(t, 404, code, "no metrics handler configured")
}

func TestPayloadAndErrorAreEscaped(t *testing.T) {
	const evil = `<script>alert("x")</script><img src=x onerror=alert(1)>`
	f := newFixture(t, map[string]string{evil: evil})
	d := serve(t, web.Handler(f.q, nil))
	for _, p := range []string{"/jobs", "/jobs/1", "/dead", "/jobs?q=" + url.QueryEscape(evil)} {
		code, body, _ := d.get(p)
		require.Equal(t, 200, code)
		require.NotContains(t, body, "<script>alert", p)
		require.NotContains(t, body, "<img src=x", p)
		require.Contains(t, body, "&lt;script&gt;", p)
	}
}

func TestActionsNeedPOSTWithTheCSRFToken(t *testing.T) {
	f := newFixture(t, map[string]string{"a": "boom"})
	d := serve(t, web.Handler(f.q, nil))
	d.open("/jobs/1")
	code, _, _ := d.get("/jobs/1/requeue")
	require.Equal(t, http.StatusMethodNotAllowed, code, "no action on GET")
	d.requireForgeriesRefused("/jobs/1/requeue", url.Values{})
	j, err := f.q.Job(context.Background(), 1)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateDead, j.State, "nothing changed")

	loc, _ := d.act("/jobs/1/requeue", nil)
	require.Contains(t, loc, "/jobs/1?done=")
	j, err = f.q.Job(context.Background(), 1)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateReady, j.State)
}

func TestReadOnlyHidesAndRefusesActions(t *testing.T) {
	f := newFixture(t, map[string]string{"a": "boom"})
	d := serve(t, web.Handler(f.q, &web.Options{ReadOnly: true}))
	d.requireReadOnly("/jobs", "/jobs/1", "/dead")
	for _, p := range []string{"/jobs/1/requeue", "/bulk", "/dead/requeue"} {
		code, _, _ := d.post(p, url.Values{"action": {"requeue"}, "scope": {"filter"}, "confirm": {"yes"}, "key": {"boom"}}, "")
		require.Equal(t, http.StatusForbidden, code, p)
	}
	n, err := f.q.CountJobs(context.Background(), litequeue.JobQuery{States: []litequeue.State{litequeue.StateDead}}, 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// testToken is an access token long enough for Options.Token.
const testToken = "s3cret-s3cret-s3cret"

func TestTokenIsRequiredAndComparedBeforeAnything(t *testing.T) {
	f := newFixture(t, nil)
	d := serve(t, web.Handler(f.q, &web.Options{Token: testToken}))
	code, body, _ := d.get("/jobs")
	require.Equal(t, http.StatusUnauthorized, code)
	require.Contains(t, body, `name="token"`)
	code, _, _ = d.post("/login", url.Values{"token": {"wrong"}}, "")
	require.Equal(t, http.StatusUnauthorized, code)
	code, _, _ = d.post("/login", url.Values{"token": {testToken}}, "")
	require.Equal(t, http.StatusSeeOther, code)
	code, _, _ = d.get("/jobs")
	require.Equal(t, 200, code, "the login cookie lets the browser in")

	req, _ := http.NewRequest("GET", d.URL+"/jobs", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
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
	d := serve(t, mux)
	for _, root := range []string{"/stripped", "/full"} {
		code, body, _ := d.get(root + "/jobs")
		require.Equal(t, 200, code, root)
		require.Contains(t, body, `href="`+root+`/static/app.css"`, root)
		require.Contains(t, body, `href="`+root+`/dead"`, root)
		code, _, _ = d.get(root + "/static/app.js")
		require.Equal(t, 200, code, root)
		code, _, h := d.get(root)
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
	d := serve(t, web.Handler(f.q, nil))
	d.open("/jobs")
	form := url.Values{"action": {"requeue"}, "scope": {"filter"}, "state": {"dead"}}
	code, body, _ := d.send("/bulk", form)
	require.Equal(t, 200, code)
	require.Regexp(t, `class="count">3<`, body, "the confirmation counts the dead letters")
	n, _ := f.q.CountJobs(ctx, litequeue.JobQuery{States: []litequeue.State{litequeue.StateDead}}, 0)
	require.Equal(t, 3, n, "asking changes nothing")
	form.Set("confirm", "yes")
	loc, page := d.act("/bulk", form)
	require.Contains(t, loc, "state=dead", "back to the filter")
	require.Contains(t, page, "Requeue: 3 jobs.")
	n, _ = f.q.CountJobs(ctx, litequeue.JobQuery{States: []litequeue.State{litequeue.StateDead}}, 0)
	require.Zero(t, n)

	d.act("/bulk", url.Values{"action": {"cancel"}, "scope": {"selected"}, "id": {"4", "5"}, "confirm": {"yes"}})
	n, _ = f.q.CountJobs(ctx, litequeue.JobQuery{States: []litequeue.State{litequeue.StateCancelled}}, 0)
	require.Equal(t, 2, n, "two of the six live jobs cancelled")
}

// The overview's oldest-waiting column shows how long the oldest ready job
// has waited, on the queue's Clock, and a dash for a queue with none ready.
func TestOverviewShowsTheOldestWaitingJobOrNone(t *testing.T) {
	f := newFixture(t, map[string]string{"dead@example.com": "boom"}) // default queue: dead only
	ctx := context.Background()
	id, err := f.q.Enqueue(ctx, Email{To: "waits"}, &litequeue.EnqueueOptions{Queue: "media"})
	require.NoError(t, err)
	f.clock.Add(90 * time.Second)
	code, page, _ := serve(t, web.Handler(f.q, nil)).get("/")
	require.Equal(t, http.StatusOK, code)
	require.Regexp(t, `data-live="default/oldest" title="no job waiting">—<`, page)
	require.Regexp(t, fmt.Sprintf(`href="/jobs/%d" data-live="media/oldest">1m30s<`, id), page)
}
