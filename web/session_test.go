package web_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue/web"
)

// signIn posts the token to /login of d and returns the cookies set.
func signIn(t *testing.T, d *dash, token string) (int, []*http.Cookie) {
	t.Helper()
	req, err := http.NewRequest("POST", d.URL+"/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := d.c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode, resp.Cookies()
}

// withCookie gets path from d with only the cookie c.
func withCookie(t *testing.T, d *dash, path string, c *http.Cookie) int {
	t.Helper()
	req, err := http.NewRequest("GET", d.URL+path, nil)
	require.NoError(t, err)
	req.AddCookie(c)
	tr := d.c.Transport
	if tr == nil {
		tr = http.DefaultTransport
	}
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// The sign-in cookie is a session, not the token: scoped, HttpOnly,
// SameSite=Strict, ending after SessionLifetime (on the queue's clock); the
// token itself in a cookie opens nothing.
func TestTheSignInCookieIsASessionNotTheToken(t *testing.T) {
	f := newFixture(t, nil)
	mux := http.NewServeMux()
	mux.Handle("/admin/queue/", http.StripPrefix("/admin/queue", web.Handler(f.q, &web.Options{Token: testToken})))
	d := serve(t, mux)
	d.c = &http.Client{CheckRedirect: d.c.CheckRedirect} // no jar: the cookies are checked by hand
	code, cookies := signIn(t, &dash{t: t, URL: d.URL + "/admin/queue", c: d.c}, testToken)
	require.Equal(t, http.StatusSeeOther, code)
	require.Len(t, cookies, 1)
	c := cookies[0]
	require.Equal(t, "lq_session", c.Name)
	require.NotContains(t, c.Value, testToken)
	require.NotContains(t, c.Raw, testToken)
	require.Equal(t, "/admin/queue/", c.Path, "scoped to the dashboard's path")
	require.True(t, c.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, c.SameSite)
	require.Equal(t, int(web.SessionLifetime/time.Second), c.MaxAge)

	in := &dash{t: t, URL: d.URL + "/admin/queue", c: d.c}
	require.Equal(t, http.StatusOK, withCookie(t, in, "/jobs", c))
	for _, forged := range []*http.Cookie{
		{Name: "lq_token", Value: testToken},
		{Name: "lq_session", Value: testToken},
		{Name: "lq_session", Value: "1772366400." + strings.Repeat("A", 43)},
		{Name: "lq_session", Value: strconv.FormatInt(f.clock.Now().Unix()+1, 10) + c.Value[strings.Index(c.Value, "."):]},
	} {
		require.Equal(t, http.StatusUnauthorized, withCookie(t, in, "/jobs", forged), "%s=%s", forged.Name, forged.Value)
	}
	f.clock.Add(web.SessionLifetime - time.Second)
	require.Equal(t, http.StatusOK, withCookie(t, in, "/jobs", c), "still valid")
	f.clock.Add(time.Second)
	require.Equal(t, http.StatusUnauthorized, withCookie(t, in, "/jobs", c), "expired")

	// Another token: the session of the old one opens nothing.
	other := serve(t, web.Handler(f.q, &web.Options{Token: testToken + "-rotated"}))
	f.clock.Add(-time.Hour)
	require.Equal(t, http.StatusOK, withCookie(t, in, "/jobs", c))
	require.Equal(t, http.StatusUnauthorized, withCookie(t, &dash{t: t, URL: other.URL, c: d.c}, "/jobs", c))
}

// Over TLS the cookie has the __Host- prefix: Secure, Path=/, no Domain.
func TestTheSignInCookieOverTLSIsHostBound(t *testing.T) {
	f := newFixture(t, nil)
	srv := httptest.NewTLSServer(web.Handler(f.q, &web.Options{Token: testToken}))
	t.Cleanup(func() { closeServer(srv) })
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	d := &dash{t: t, URL: srv.URL, c: c}
	code, cookies := signIn(t, d, testToken)
	require.Equal(t, http.StatusSeeOther, code)
	require.Len(t, cookies, 1)
	require.Equal(t, "__Host-lq_session", cookies[0].Name)
	require.True(t, cookies[0].Secure)
	require.Equal(t, "/", cookies[0].Path)
	require.Empty(t, cookies[0].Domain)
	require.Equal(t, http.StatusOK, withCookie(t, d, "/jobs", cookies[0]))
}

// Sign-ins are rate-limited per client address, on the queue's clock: a
// burst, then one every few seconds; the right token too waits its turn,
// and another address is not held back.
func TestSignInsAreRateLimitedPerAddress(t *testing.T) {
	f := newFixture(t, nil)
	h := web.Handler(f.q, &web.Options{Token: testToken})
	try := func(remote, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = remote
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	const attacker = "192.0.2.7:4000"
	n := 0
	for ; n < 100; n++ {
		if w := try(attacker, "guess-"+strconv.Itoa(n)+"-xxxxxxxxxx"); w.Code != http.StatusUnauthorized {
			require.Equal(t, http.StatusTooManyRequests, w.Code)
			require.NotEmpty(t, w.Header().Get("Retry-After"))
			require.Contains(t, w.Body.String(), "Too many sign-in attempts")
			break
		}
	}
	require.Equal(t, 10, n, "a burst of 10 guesses, then none")
	require.Equal(t, http.StatusTooManyRequests, try(attacker, testToken).Code, "the right token waits too")
	require.Equal(t, http.StatusTooManyRequests, try("192.0.2.7:4001", "x").Code, "another port of the same address")
	require.Equal(t, http.StatusSeeOther, try("198.51.100.1:4000", testToken).Code, "another address")
	f.clock.Add(6 * time.Second)
	require.Equal(t, http.StatusUnauthorized, try(attacker, "one more guess").Code, "one more after 6s")
	require.Equal(t, http.StatusTooManyRequests, try(attacker, "and another").Code)
}
