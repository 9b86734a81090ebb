package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Signing in: the login form takes the access token once and gives the
// browser a session cookie that is not the token, nor anything the token
// can be recovered from: the time the session was issued, a random session
// id, and an HMAC-SHA256 of both under a key derived from the token (itself
// an HMAC of a fixed label under the token). It proves the token was typed
// without holding it, ends after SessionLifetime, and stops working when
// the token changes; a leaked cookie gives a session, never the token.
// Nothing is kept on the server, so a restart signs nobody out.

// MinTokenLength is the shortest Options.Token that Handler accepts. Sixteen
// random hexadecimal digits are 64 bits: at the sign-in rate limit, a
// guess per address every few seconds, out of reach.
const MinTokenLength = 16

// ErrTokenTooShort is the error of CheckToken for a token shorter than
// MinTokenLength.
var ErrTokenTooShort = errors.New("web: the access token is too short")

// CheckToken returns an error wrapping ErrTokenTooShort when token is set
// but shorter than MinTokenLength; nil for no token ("") and for one long
// enough.
func CheckToken(token string) error {
	if token != "" && len(token) < MinTokenLength {
		return fmt.Errorf("%w: it is %d bytes long, and must be at least %d (make one with: openssl rand -hex 16)", ErrTokenTooShort, len(token), MinTokenLength)
	}
	return nil
}

// SessionLifetime is how long a sign-in lasts.
const SessionLifetime = 12 * time.Hour

// Login attempts allowed per client address: a burst of loginBurst, then one
// every loginEvery. The table of addresses is bounded by loginTableMax:
// addresses beyond it share one bucket.
const (
	loginBurst    = 10
	loginEvery    = 6 * time.Second
	loginTableMax = 10_000
)

// maxLoginBytes bounds the body of a login form.
const maxLoginBytes = 4 << 10

const (
	sessionCookie    = "lq_session"
	sessionCookieTLS = "__Host-lq_session" // Secure, Path=/, no Domain: bound to this origin
	csrfCookie       = "lq_csrf"
)

// sessionKey derives the key that signs sessions from the token.
func sessionKey(token string) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("litequeue/web session v1"))
	return m.Sum(nil)
}

// newSession returns the value of a session cookie issued at now:
// "ISSUED.ID.MAC", the Unix time, a random session id, and the HMAC of
// both under the session key.
func (s *server) newSession(now time.Time) string {
	var id [16]byte
	rand.Read(id[:])
	body := strconv.FormatInt(now.Unix(), 10) + "." + base64.RawURLEncoding.EncodeToString(id[:])
	return body + "." + s.sessionMAC(body)
}

func (s *server) sessionMAC(body string) string {
	m := hmac.New(sha256.New, s.sessionKey)
	m.Write([]byte(body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// sessionValid reports whether v is a session cookie this dashboard issued
// (under its current token) less than SessionLifetime before now.
func (s *server) sessionValid(v string, now time.Time) bool {
	i := strings.LastIndexByte(v, '.')
	if i < 0 || i > 64 {
		return false
	}
	body, mac := v[:i], v[i+1:]
	issued, id, ok := strings.Cut(body, ".")
	if !ok || len(issued) > 20 || id == "" {
		return false
	}
	if subtle.ConstantTimeCompare([]byte(mac), []byte(s.sessionMAC(body))) != 1 {
		return false
	}
	at, err := strconv.ParseInt(issued, 10, 64)
	if err != nil {
		return false
	}
	age := now.Sub(time.Unix(at, 0))
	return age >= -time.Minute && age < SessionLifetime
}

// sessionCookieName is the session cookie's name on r: with the __Host-
// prefix over TLS.
func sessionCookieName(r *http.Request) string {
	if r.TLS != nil {
		return sessionCookieTLS
	}
	return sessionCookie
}

// authorized reports whether r carries the access token as
// "Authorization: Bearer TOKEN", or a valid session cookie.
func (s *server) authorized(r *http.Request) bool {
	if a, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return s.tokenMatches(a)
	}
	c, err := r.Cookie(sessionCookieName(r))
	return err == nil && s.sessionValid(c.Value, s.q.Now())
}

// tokenMatches compares digests in constant time, so neither the token's
// bytes nor its length leak through timing.
func (s *server) tokenMatches(got string) bool {
	sum := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(sum[:], s.tokenSum[:]) == 1
}

// login checks the token of the sign-in form, within the client address's
// rate limit, and sets the session cookie.
func (s *server) login(w http.ResponseWriter, r *http.Request) {
	root := rootOf(r)
	if s.opts.Token == "" {
		http.Redirect(w, r, root+"/", http.StatusSeeOther)
		return
	}
	if wait := s.logins.take(clientKey(r.RemoteAddr), s.q.Now()); wait > 0 {
		secs := int(math.Ceil(wait.Seconds()))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		s.opts.Logger.Warn("litequeue/web: too many sign-in attempts", "remote", r.RemoteAddr)
		s.render(w, r, http.StatusTooManyRequests, "login", &page{Title: "Sign in", Data: s.opts.SignInHint,
			Error: fmt.Sprintf("Too many sign-in attempts from your address: try again in %d s.", secs)})
		return
	}
	if err := s.cop.Check(r); err != nil {
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBytes)
	if !s.readForm(w, r) {
		return
	}
	if !s.tokenMatches(r.PostFormValue("token")) {
		s.opts.Logger.Warn("litequeue/web: sign-in with a wrong token", "remote", r.RemoteAddr)
		s.render(w, r, http.StatusUnauthorized, "login", &page{Title: "Sign in", Data: s.opts.SignInHint, Error: "That token is not right."})
		return
	}
	c := &http.Cookie{Name: sessionCookie, Value: s.newSession(s.q.Now()), Path: root + "/",
		MaxAge: int(SessionLifetime / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode}
	if r.TLS != nil {
		c.Name, c.Path, c.Secure = sessionCookieTLS, "/", true
	}
	http.SetCookie(w, c)
	http.Redirect(w, r, root+"/", http.StatusSeeOther)
}

// clientKey is the rate-limit key of a remote address: its IP, or for
// IPv6 its /64 (one host's usual share).
func clientKey(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// limiter is a token bucket per key: burst tokens, one more every every.
// Its table holds at most max keys; further keys share one bucket.
type limiter struct {
	burst   float64
	every   time.Duration
	max     int
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newLimiter(burst int, every time.Duration, max int) *limiter {
	return &limiter{burst: float64(burst), every: every, max: max, buckets: map[string]*bucket{}}
}

// take spends one token of key's bucket at now; when there is none it
// spends nothing and returns how long until there is one.
func (l *limiter) take(key string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= l.max {
			l.sweep(now)
		}
		if len(l.buckets) >= l.max {
			key = "\x00overflow"
			b = l.buckets[key]
		}
		if b == nil {
			b = &bucket{tokens: l.burst, at: now}
			l.buckets[key] = b
		}
	}
	l.refill(b, now)
	if b.tokens < 1 {
		return time.Duration((1 - b.tokens) * float64(l.every))
	}
	b.tokens--
	return 0
}

func (l *limiter) refill(b *bucket, now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(l.burst, b.tokens+float64(d)/float64(l.every))
		b.at = now
	}
}

// sweep drops the buckets that are full again: they hold nothing a new
// bucket would not.
func (l *limiter) sweep(now time.Time) {
	for k, b := range l.buckets {
		if l.refill(b, now); b.tokens >= l.burst {
			delete(l.buckets, k)
		}
	}
}
