package web_test

import (
	"bufio"
	"context"
	"database/sql"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/web"
)

// The dashboard as an attacker meets it: through a browser that visits
// another site (DNS rebinding), with oversized or multipart bodies, with
// flash messages and cookies of its choosing.

// rawRequest sends req, a whole HTTP/1.1 request, to the server at base on
// a connection of its own, and returns the response (its body read).
func rawRequest(t *testing.T, base string, req string) (*http.Response, string) {
	t.Helper()
	u, err := url.Parse(base)
	require.NoError(t, err)
	c, err := net.Dial("tcp", u.Host)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(c, req)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// hostOf is the host:port of the server at base.
func hostOf(t *testing.T, base string) string {
	u, err := url.Parse(base)
	require.NoError(t, err)
	return u.Host
}

// A page of another site whose name resolves to 127.0.0.1 reaches the
// dashboard through the browser with its own name as the Host, and its own
// origin on a POST: without a token, both are refused before anything
// happens, and no CSRF cookie is handed out.
func TestDNSRebindingIsRefusedWithoutAToken(t *testing.T) {
	f := newFixture(t, map[string]string{"a": "boom"})
	d := serve(t, web.Handler(f.q, nil))
	_, port, err := net.SplitHostPort(hostOf(t, d.URL))
	require.NoError(t, err)
	evil := "evil.example:" + port

	for _, path := range []string{"/", "/jobs/1", "/static/app.js", "/events"} {
		resp, body := rawRequest(t, d.URL, "GET "+path+" HTTP/1.1\r\nHost: "+evil+"\r\nConnection: close\r\n\r\n")
		require.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode, "%s with Host %s", path, evil)
		require.Empty(t, resp.Header.Values("Set-Cookie"), "%s: no cookie for a foreign host", path)
		require.Contains(t, body, "DNS rebinding", path)
		require.NotContains(t, body, "boom", path)
	}

	// The attacker's page posts with a CSRF pair it could only have read
	// through the rebound name: refused, nothing changes.
	page := d.open("/queues")
	tok := csrfOf(t, page)
	form := url.Values{"csrf": {tok}, "queue": {"default"}}.Encode()
	resp, _ := rawRequest(t, d.URL, "POST /queues/pause HTTP/1.1\r\nHost: "+evil+"\r\nOrigin: http://"+evil+
		"\r\nCookie: lq_csrf="+tok+"\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: "+
		strconv.Itoa(len(form))+"\r\nConnection: close\r\n\r\n"+form)
	require.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode)
	resp, _ = rawRequest(t, d.URL, "POST /bulk HTTP/1.1\r\nHost: "+hostOf(t, d.URL)+"\r\nOrigin: http://"+evil+
		"\r\nCookie: lq_csrf="+tok+"\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: "+
		strconv.Itoa(len(form))+"\r\nConnection: close\r\n\r\n"+form)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "a POST from a foreign origin")
	require.Empty(t, pausedQueues(t, f.q), "nothing paused")

	// The dashboard's own names are answered: IP addresses, localhost.
	for _, host := range []string{hostOf(t, d.URL), "localhost:" + port, "LocalHost.:" + port, "[::1]:" + port, "dash.localhost:" + port} {
		resp, _ := rawRequest(t, d.URL, "GET / HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n")
		require.Equal(t, http.StatusOK, resp.StatusCode, host)
	}
}

// AllowedHosts adds names; a token turns the host check off (the token
// guards the dashboard instead).
func TestAllowedHostsAndTokenTakeOverTheHostCheck(t *testing.T) {
	f := newFixture(t, nil)
	named := serve(t, web.Handler(f.q, &web.Options{AllowedHosts: []string{"queue.internal", "ops.example:9000"}}))
	for host, want := range map[string]int{"queue.internal": 200, "queue.internal:8080": 200, "ops.example:9000": 200,
		"ops.example:9001": 421, "evil.example": 421, "queue.internal.evil.example": 421} {
		resp, _ := rawRequest(t, named.URL, "GET / HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n")
		require.Equal(t, want, resp.StatusCode, host)
	}
	guarded := serve(t, web.Handler(f.q, &web.Options{Token: testToken}))
	resp, _ := rawRequest(t, guarded.URL, "GET / HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "with a token, a foreign host meets the sign-in page")
}

// multipartBody is a multipart form of one file field of n bytes.
func multipartBody(n int) (contentType string, body io.Reader) {
	const boundary = "lqboundary"
	head := "--" + boundary + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n"
	tail := "\r\n--" + boundary + "--\r\n"
	return "multipart/form-data; boundary=" + boundary, io.MultiReader(strings.NewReader(head), io.LimitReader(zeros{}, int64(n)), strings.NewReader(tail))
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// tempFiles lists the files in dir.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// A large multipart POST, unauthenticated, is refused without being read:
// nothing is spooled to the temporary directory (net/http's multipart
// parser writes file parts beyond 32 MiB there).
func TestLargeUnauthenticatedPostsWriteNothingToTheTempDir(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	f := newFixture(t, map[string]string{"a": "boom"})
	open := serve(t, web.Handler(f.q, nil))
	guarded := serve(t, web.Handler(f.q, &web.Options{Token: testToken}))
	const size = 40 << 20
	for _, tc := range []struct {
		d    *dash
		path string
		want []int
	}{
		{open, "/jobs/1/requeue", []int{http.StatusForbidden}},         // no CSRF cookie
		{open, "/bulk", []int{http.StatusForbidden}},                   // no CSRF cookie
		{guarded, "/bulk", []int{http.StatusUnauthorized}},             // not signed in
		{guarded, "/login", []int{http.StatusUnsupportedMediaType}},    // not a url-encoded form
		{open, "/login", []int{http.StatusSeeOther}},                   // no token: nothing to sign in to
		{open, "/queues/pause", []int{http.StatusForbidden}},           // no CSRF cookie
		{guarded, "/queues/pause", []int{http.StatusUnauthorized}},     // not signed in
		{open, "/schedules/trigger", []int{http.StatusForbidden}},      // no CSRF cookie
		{guarded, "/dead/requeue", []int{http.StatusUnauthorized}},     // not signed in
		{open, "/dead/requeue", []int{http.StatusForbidden}},           // no CSRF cookie
		{guarded, "/jobs/1/delete", []int{http.StatusUnauthorized}},    // not signed in
		{open, "/jobs/1/delete", []int{http.StatusForbidden}},          // no CSRF cookie
		{guarded, "/schedules/remove", []int{http.StatusUnauthorized}}, // not signed in
	} {
		ct, body := multipartBody(size)
		req, err := http.NewRequest("POST", tc.d.URL+tc.path, body)
		require.NoError(t, err)
		req.Header.Set("Content-Type", ct)
		req.ContentLength = -1 // chunked: the server cannot tell the size up front
		c := client(t)
		c.Timeout = 20 * time.Second
		resp, err := c.Do(req)
		if err == nil { // the server may close the connection before the client finished sending
			resp.Body.Close()
			require.Contains(t, tc.want, resp.StatusCode, tc.path)
		}
		require.Empty(t, tempFiles(t, tmp), "%s: nothing spooled to $TMPDIR", tc.path)
	}
	// Signed in with the CSRF cookie, a multipart form is still refused unread.
	page := open.open("/jobs")
	ct, body := multipartBody(size)
	req, err := http.NewRequest("POST", open.URL+"/bulk", body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", ct)
	req.AddCookie(&http.Cookie{Name: "lq_csrf", Value: csrfOf(t, page)})
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		resp.Body.Close()
		require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode)
	}
	require.Empty(t, tempFiles(t, tmp))
}

// A url-encoded form over the cap, such as a selection of a million ids,
// is refused as too large, not as a stale security token.
func TestAFormTooLargeIsSaidToBe(t *testing.T) {
	f := newFixture(t, map[string]string{"a": "boom"})
	d := serve(t, web.Handler(f.q, nil))
	d.open("/jobs")
	var b strings.Builder
	b.WriteString("action=requeue&scope=selected&csrf=" + d.tok)
	for i := 1; i <= 1_000_000; i++ {
		b.WriteString("&id=" + strconv.Itoa(i))
	}
	req, err := http.NewRequest("POST", d.URL+"/bulk", strings.NewReader(b.String()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := d.c.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, string(body))
	require.Contains(t, string(body), "too large")
	require.NotContains(t, string(body), "security token")
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
}

// Error pages, like every page, are not cached: the header is set before
// the status is written.
func TestErrorPagesAreNotCached(t *testing.T) {
	f := newFixture(t, nil)
	d := serve(t, web.Handler(f.q, nil))
	for path, code := range map[string]int{"/jobs/99999": 404, "/jobs/x": 400, "/jobs?state=bogus": 400, "/schedules/none": 404} {
		got, _, h := d.get(path)
		require.Equal(t, code, got, path)
		require.Equal(t, "no-store", h.Get("Cache-Control"), path)
	}
	code, _, h := serve(t, web.Handler(f.q, &web.Options{ReadOnly: true})).post("/bulk", url.Values{}, "")
	require.Equal(t, http.StatusForbidden, code)
	require.Equal(t, "no-store", h.Get("Cache-Control"), "the read-only refusal")
}

// A link cannot make the dashboard say what it likes: "done" is a code of a
// fixed set; the values it takes are checked.
func TestFlashMessagesAreFixedSentences(t *testing.T) {
	f := newFixture(t, nil)
	d := serve(t, web.Handler(f.q, nil))
	for _, q := range []string{
		"done=" + url.QueryEscape("Your session expired: call +1 555 0100"),
		"done=job-requeued&job=x",
		"done=queue-paused&name=" + url.QueryEscape("a\u202eb"),
		"done=queue-paused&name=" + strings.Repeat("x", 300),
		"done=bulk-delete&n=-1",
	} {
		_, body, _ := d.get("/?" + q)
		require.NotContains(t, body, `class="flash"`, q)
	}
	_, body, _ := d.get("/?done=queue-paused&name=billing")
	require.Contains(t, body, `<p class="flash" role="status">Queue &#34;billing&#34; paused: no process starts its jobs`)
	_, body, _ = d.get("/?done=schedule-triggered&job=42&name=nightly")
	require.Contains(t, body, `Schedule &#34;nightly&#34; triggered: enqueued job 42. <a href="/jobs/42">Open job 42</a>`)
}

// A queue named "*" has counts of its own in the live refresh, apart from
// the total of dead letters that the navigation's badge shows.
func TestAQueueNamedStarKeepsItsOwnLiveCounts(t *testing.T) {
	f := newFixture(t, map[string]string{"a": "boom", "b": "boom"})
	ctx := context.Background()
	_, err := f.q.Enqueue(ctx, Email{To: "star"}, &litequeue.EnqueueOptions{Queue: "*"})
	require.NoError(t, err)
	d := serve(t, web.Handler(f.q, &web.Options{RefreshInterval: 20 * time.Millisecond}))
	_, page, _ := d.get("/")
	badge := regexpFind(t, page, `<span class="badge" data-live="([^"]*)">`)
	ev := next(t, d.events("/events"))
	require.Equal(t, "2", ev.data[badge], "the badge: dead letters of every queue")
	require.Equal(t, "0", ev.data["*/dead"], "queue * has no dead letter")
	require.Equal(t, "1", ev.data["*/ready"])
}

// regexpFind returns the first group of re's first match in s.
func regexpFind(t *testing.T, s, re string) string {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(s)
	require.NotNil(t, m, "no %s in the page", re)
	return m[1]
}

// A short token is refused when the handler is made, with a clear error.
func TestAShortTokenIsRefused(t *testing.T) {
	f := newFixture(t, nil)
	require.PanicsWithError(t, "web: the access token is too short: it is 6 bytes long, and must be at least 16 (make one with: openssl rand -hex 16)", func() {
		web.Handler(f.q, &web.Options{Token: "s3cret"})
	})
	require.ErrorIs(t, web.CheckToken(strings.Repeat("x", web.MinTokenLength-1)), web.ErrTokenTooShort)
	require.NoError(t, web.CheckToken(strings.Repeat("x", web.MinTokenLength)))
	require.NoError(t, web.CheckToken(""), "no token: the host check guards the dashboard")
}

// A file may hold errors of any size (written before errors were capped, or
// crafted): a job's page shows the first 64 KiB of each and says how much
// it left out.
func TestHugeStoredErrorsAreClippedOnTheJobPage(t *testing.T) {
	f := newFixture(t, map[string]string{"a": "boom"})
	db, err := sql.Open("sqlite", f.path)
	require.NoError(t, err)
	defer db.Close()
	huge := "first line " + strings.Repeat("x", 2<<20)
	_, err = db.Exec(`UPDATE lq_jobs SET last_error = ?, dead_reason = ?`, huge, huge)
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE lq_attempts SET error = ?`, huge)
	require.NoError(t, err)
	d := serve(t, web.Handler(f.q, nil))
	code, body, _ := d.get("/jobs/1")
	require.Equal(t, http.StatusOK, code)
	require.Less(t, len(body), 512<<10, "the page stays small")
	require.Contains(t, body, "more bytes not shown")
	for _, p := range []string{"/jobs", "/dead", "/jobs?q=first+line"} {
		code, body, _ := d.get(p)
		require.Equal(t, http.StatusOK, code, p)
		require.Less(t, len(body), 64<<10, p)
		require.Contains(t, body, "first line", p)
	}
}
