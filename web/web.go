// Package web serves a litequeue dashboard: an http.Handler with server-rendered
// pages (overview, jobs, job detail with live progress and output, dead
// letters grouped by error with each group's jobs, queues with pause and
// resume and each queue's configuration, schedules with their next runs and
// history, a retry plan explorer), live counters over server-sent events,
// and actions on one job (run now, retry, requeue, cancel, delete), on a
// dead-letter group and in bulk; the destructive ones ask first.
//
// Mount it in an application's own mux, next to its other handlers:
//
//	mux.Handle("/queue/", http.StripPrefix("/queue", web.Handler(q, nil)))
//
// or, without StripPrefix, with Options.Prefix set to "/queue". The command
// "lqinspect serve FILE" serves it on its own.
//
// The handler is safe by default: every change is a POST carrying a CSRF
// token (and a cross-origin check), nothing changes on GET, everything shown
// is escaped by html/template, responses carry a Content-Security-Policy
// that forbids inline scripts and are not cached, request bodies are capped
// and read only after the credentials are checked, and Options.ReadOnly
// hides and refuses every action. Options.Token requires an access token
// (see Options.Token); without one, only requests for the dashboard's own
// host names are answered (see Options.AllowedHosts). NewServer makes an
// http.Server with every timeout set, as lqinspect serve runs it; the
// threat model is in docs/security.md. The page assets are embedded: there
// is no build step.
//
// Live refresh holds one streaming request open per open page, which ends
// only when its client leaves or its request's context ends: give the
// http.Server a BaseContext that you cancel before calling Shutdown (as
// lqinspect serve does), or Shutdown waits for its timeout. The counts the
// streams show are read once per RefreshInterval for all of them.
package web

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/litequeue/litequeue"
)

// Options configures Handler. A nil *Options, and every zero field, means the
// documented default.
type Options struct {
	// ReadOnly hides every action and refuses every POST that would change
	// the queue with 403 Forbidden. Default false. A queue opened with
	// litequeue.Options.ReadOnly refuses changes anyway; set this too so
	// the pages do not offer them.
	ReadOnly bool
	// Token, when not empty, is required on every request: typed once
	// into the sign-in form, which gives the browser a session cookie (not
	// the token; see SessionLifetime), or sent as "Authorization: Bearer
	// TOKEN" (for /metrics scrapers). It is compared in constant time, and
	// sign-ins are rate-limited per client address. It must be at least
	// MinTokenLength bytes long (Handler panics otherwise). Default none:
	// then only requests for the dashboard's own host names are answered
	// (see AllowedHosts).
	Token string
	// SignInHint is what the sign-in page says about where the token
	// comes from, as plain text. Default: that it is the token the
	// application gave the dashboard (Options.Token). lqinspect serve
	// says it was set with its --token flag or environment variable.
	SignInHint string
	// AllowedHosts are the host names, besides IP addresses, localhost and
	// names under .localhost, that the dashboard answers to when it has no
	// Token: a request whose Host header (or, for a request that may
	// change something, whose Origin) names another host is refused, with
	// 421 Misdirected Request (or 403 Forbidden). This stops DNS
	// rebinding: a page of another site whose name resolves to this
	// machine cannot reach the dashboard through the visitor's browser. An
	// entry is a name ("queue.internal", any port) or a name and port
	// ("queue.internal:8080"); "*" allows every host (when something in
	// front of the dashboard checks who may reach it). Ignored when Token
	// is set. Default none.
	AllowedHosts []string
	// Prefix is the path the handler is mounted at when the mux passes
	// the full path on (no http.StripPrefix), for example "/admin/queue".
	// Default "": the handler sees paths from its own root; links are made
	// relative to where the request came in, so http.StripPrefix works
	// without setting Prefix.
	Prefix string
	// RefreshInterval is how often the live counters of an open page are
	// refreshed over server-sent events. Default DefaultRefreshInterval
	// (2s); negative disables live refresh, and with it the live progress
	// of a job's page (which otherwise follows every report as it comes).
	RefreshInterval time.Duration
	// PageSize is how many jobs a page of the jobs list shows. Default 50.
	PageSize int
	// Metrics, when set, is served at /metrics (for example the handler of
	// the metrics/prometheus sub-package). Default none: /metrics is 404.
	Metrics http.Handler
	// Logger receives a record for each action taken and each failed
	// request. Default: discard.
	Logger *slog.Logger
}

// DefaultSignInHint is the default Options.SignInHint.
const DefaultSignInHint = "Use the access token the application gave this dashboard when it mounted it (web.Options.Token in its code or configuration)."

// DefaultRefreshInterval is the default Options.RefreshInterval.
const DefaultRefreshInterval = 2 * time.Second

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// server is the dashboard of one queue.
type server struct {
	q          *litequeue.Queue
	opts       Options
	pages      map[string]*template.Template
	mux        *http.ServeMux
	tokenSum   [32]byte
	sessionKey []byte
	logins     *limiter
	live       *liveHub
	cop        *http.CrossOriginProtection
	static     http.Handler
}

// Handler returns the dashboard of q. A nil opts means defaults. It panics
// when Options.Token is set but shorter than MinTokenLength (a
// configuration error, to be found at start), and if the embedded
// templates do not parse (a build error, not a runtime one).
func Handler(q *litequeue.Queue, opts *Options) http.Handler {
	s := &server{q: q}
	if opts != nil {
		s.opts = *opts
	}
	if err := CheckToken(s.opts.Token); err != nil {
		panic(err)
	}
	if s.opts.RefreshInterval == 0 {
		s.opts.RefreshInterval = DefaultRefreshInterval
	}
	if s.opts.PageSize <= 0 {
		s.opts.PageSize = 50
	}
	if s.opts.SignInHint == "" {
		s.opts.SignInHint = DefaultSignInHint
	}
	if s.opts.Logger == nil {
		s.opts.Logger = slog.New(slog.DiscardHandler)
	}
	s.opts.Prefix = strings.TrimSuffix(s.opts.Prefix, "/")
	s.tokenSum = sha256.Sum256([]byte(s.opts.Token))
	s.sessionKey = sessionKey(s.opts.Token)
	s.logins = newLimiter(loginBurst, loginEvery, loginTableMax)
	s.live = newLiveHub(s)
	s.cop = http.NewCrossOriginProtection()
	s.pages = parsePages(q.Now)
	sub, _ := fs.Sub(staticFS, "static")
	s.static = http.FileServerFS(sub)
	s.routes()
	return s
}

func (s *server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", s.overview)
	m.HandleFunc("GET /jobs", s.jobs)
	m.HandleFunc("GET /jobs/{id}", s.job)
	m.HandleFunc("GET /jobs/{id}/progress", s.progress)
	m.HandleFunc("GET /dead", s.dead)
	m.HandleFunc("GET /queues", s.queues)
	m.HandleFunc("GET /queue", s.queue)
	m.HandleFunc("GET /schedules", s.schedules)
	m.HandleFunc("GET /schedules/{name...}", s.schedule)
	m.HandleFunc("GET /processes", s.processes)
	m.HandleFunc("GET /plan", s.plan)
	m.HandleFunc("GET /events", s.events)
	m.HandleFunc("GET /static/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache") // revalidated: the assets change with the version
		r2 := *r
		u := *r.URL
		u.Path = strings.TrimPrefix(r.URL.Path, "/static")
		r2.URL = &u
		s.static.ServeHTTP(w, &r2)
	})
	m.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Metrics == nil {
			http.NotFound(w, r)
			return
		}
		s.opts.Metrics.ServeHTTP(w, r)
	})
	m.HandleFunc("POST /login", s.login)
	m.HandleFunc("POST /jobs/{id}/{action}", s.action(s.jobAction))
	m.HandleFunc("POST /bulk", s.action(s.bulk))
	m.HandleFunc("POST /dead/{action}", s.action(s.requeueGroup))
	m.HandleFunc("POST /queues/{action}", s.action(s.queueAction))
	m.HandleFunc("POST /limits", s.action(s.setLimits))
	m.HandleFunc("POST /schedules/{action}", s.action(s.scheduleAction))
	s.mux = m
}

// ServeHTTP sets the security headers, caps the request's body, refuses a
// host or origin that is not the dashboard's own when it has no token (see
// checkHost), finds the path below the mount point, checks the access token
// and routes.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	if !s.checkHost(w, r) {
		return
	}
	p := r.URL.Path
	if s.opts.Prefix != "" && (p == s.opts.Prefix || strings.HasPrefix(p, s.opts.Prefix+"/")) {
		p = strings.TrimPrefix(p, s.opts.Prefix)
	}
	root := mountRoot(r, p)
	if p == "" {
		http.Redirect(w, r, root+"/", http.StatusMovedPermanently)
		return
	}
	r2 := r.WithContext(withRoot(r.Context(), root))
	u := *r.URL
	u.Path, u.RawPath = p, ""
	r2.URL = &u
	if r2.Body != nil {
		r2.Body = http.MaxBytesReader(w, r2.Body, maxBodyBytes)
	}
	if s.opts.Token != "" && !s.authorized(r2) && p != "/login" && !strings.HasPrefix(p, "/static/") {
		s.render(w, r2, http.StatusUnauthorized, "login", &page{Title: "Sign in", Data: s.opts.SignInHint})
		return
	}
	if name, ok := strings.CutPrefix(p, "/schedules/"); ok && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		// A schedule's name may hold anything, "//" and "/../" too: the
		// mux would clean those out of the path and redirect, so the
		// schedule pages are routed here, with the name as it came.
		r2.SetPathValue("name", name)
		s.schedule(w, r2)
		return
	}
	s.mux.ServeHTTP(w, r2)
}

// mountRoot returns the URL path the handler is mounted at: the request's
// original path without the part the handler routes on.
func mountRoot(r *http.Request, p string) string {
	orig := r.URL.Path
	if u, err := url.ParseRequestURI(r.RequestURI); err == nil && r.RequestURI != "" {
		orig = u.Path
	}
	root := strings.TrimSuffix(orig, p)
	if root == orig && p != "" && p != orig {
		root = ""
	}
	return strings.TrimSuffix(root, "/")
}

// csrfToken returns the request's CSRF token, setting the cookie that holds
// it when the request has none.
func (s *server) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) == 64 {
		return c.Value
	}
	var b [32]byte
	rand.Read(b[:])
	tok := hex.EncodeToString(b[:])
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: tok, Path: rootOf(r) + "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	return tok
}

// action wraps a POST handler that changes the queue: refused in read-only
// mode, refused across origins, refused without the CSRF cookie before the
// body is read, then refused unless the form's CSRF token matches the
// cookie.
func (s *server) action(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.opts.ReadOnly {
			s.render(w, r, http.StatusForbidden, "error", &page{Title: "Read-only", Error: "This dashboard is read-only: it makes no changes."})
			return
		}
		if err := s.cop.Check(r); err != nil {
			http.Error(w, "cross-origin request refused", http.StatusForbidden)
			return
		}
		c, err := r.Cookie(csrfCookie)
		if err != nil || len(c.Value) != 64 {
			s.render(w, r, http.StatusForbidden, "error", &page{Title: "Refused", Error: "The form's security token is missing or stale: reload the page and try again."})
			return
		}
		if !s.readForm(w, r) {
			return
		}
		if subtle.ConstantTimeCompare([]byte(c.Value), []byte(r.PostFormValue("csrf"))) != 1 {
			s.render(w, r, http.StatusForbidden, "error", &page{Title: "Refused", Error: "The form's security token is missing or stale: reload the page and try again."})
			return
		}
		h(w, r)
	}
}
