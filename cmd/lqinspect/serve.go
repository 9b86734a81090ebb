package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/litequeue/litequeue/metrics/prometheus"
	"github.com/litequeue/litequeue/web"
)

// envToken is the environment variable that holds serve's access token
// when --token is not given.
const envToken = "LQINSPECT_TOKEN"

// serveCommand registers serve with the other commands.
var serveCommand = command{"serve", "serve the web dashboard and /metrics of a queue file", (*app).serve}

func (a *app) serve(args []string) error {
	fs := a.newFlags("serve", "FILE [--addr HOST:PORT] [--read-only] [--token TOKEN] [--tls-cert FILE --tls-key FILE]", `
Serve the web dashboard of the queue file FILE: per-queue counts that refresh
by themselves, jobs with filters, each job's attempts and its live progress
and output, dead letters grouped by error, queues with pause and resume,
schedules with their next runs and history (trigger, pause, resume, remove),
a retry plan explorer, bulk requeue, cancel and delete, and /metrics in the
Prometheus text format. It runs until interrupted.

It listens on the loopback interface unless told otherwise, and refuses an
address other machines can reach without an access token (--token or $`+envToken+`,
at least 16 characters: openssl rand -hex 16 makes one). The browser asks
for the token once and keeps a session cookie (not the token) for 12 hours;
scrapers send "Authorization: Bearer TOKEN". Without a token it answers only
requests for localhost, an IP address or the host of --addr (a guard against
DNS rebinding). With --tls-cert and --tls-key (PEM files) it serves HTTPS.
docs/security.md has the threat model.`)
	addr := fs.String("addr", "127.0.0.1:8080", "the address to listen on")
	readOnly := fs.Bool("read-only", false, "open the file read-only and offer no actions")
	token := fs.String("token", "", "require this access token, at least 16 characters (default $"+envToken+")")
	tlsCert := fs.String("tls-cert", "", "serve HTTPS with this certificate (PEM; with --tls-key)")
	tlsKey := fs.String("tls-key", "", "the private key (PEM) of --tls-cert")
	fs.fileFlags(true)
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return usagef("missing FILE")
	case len(pos) > 1:
		return usagef("serve takes one FILE, got %q", pos)
	}
	if *token == "" {
		*token = a.getenv(envToken)
	}
	if err := web.CheckToken(*token); err != nil {
		return usagef("--token (or $%s): %v", envToken, err)
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		return usagef("--tls-cert and --tls-key go together: give both, or neither")
	}
	var tlsConfig *tls.Config
	if *tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
		if err != nil {
			return fmt.Errorf("serve: --tls-cert %s and --tls-key %s: %w", *tlsCert, *tlsKey, err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	loopback, err := isLoopback(*addr)
	if err != nil {
		return usagef("--addr %q: %v", *addr, err)
	}
	if !loopback && *token == "" {
		return usagef("--addr %q is reachable from other machines: give an access token (--token or $%s), or listen on 127.0.0.1", *addr, envToken)
	}
	f, err := a.open(pos[0], fs, !*readOnly)
	if err != nil {
		return err
	}
	defer f.Close()
	collector := prometheus.NewCollector(nil)
	collector.SetQueue(f.q)
	host, _, _ := net.SplitHostPort(*addr)
	h := web.Handler(f.q, &web.Options{ReadOnly: *readOnly, Token: *token, Metrics: collector.Handler(),
		AllowedHosts: []string{host}, SignInHint: "The token was set with --token (or $" + envToken + ") when lqinspect serve was started."})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	// Cancelling base ends the live-refresh streams, which never end on
	// their own, so that Shutdown can finish.
	base, stopStreams := context.WithCancel(context.Background())
	defer stopStreams()
	srv := web.NewServer(h, nil)
	srv.BaseContext = func(net.Listener) context.Context { return base }
	scheme, serve := "http", func() error { return srv.Serve(ln) }
	if tlsConfig != nil {
		srv.TLSConfig = tlsConfig
		scheme, serve = "https", func() error { return srv.ServeTLS(ln, "", "") }
	}
	mode := ""
	if *readOnly {
		mode = " (read-only)"
	}
	fmt.Fprintf(a.stderr, "lqinspect: serving %s%s at %s://%s/ ; Ctrl-C stops\n", safeAddr(f.path), mode, scheme, ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- serve() }()
	select {
	case err := <-errc:
		return err
	case <-a.ctx.Done():
	}
	stopStreams()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// isLoopback reports whether addr (host:port) listens on a loopback
// interface only. An empty host means every interface.
func isLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	switch host {
	case "":
		return false, nil
	case "localhost":
		return true, nil
	}
	ip := net.ParseIP(host)
	if ip == nil {
		ips, err := net.LookupIP(host)
		if err != nil || len(ips) == 0 {
			return false, fmt.Errorf("cannot resolve host %q", host)
		}
		for _, ip := range ips {
			if !ip.IsLoopback() {
				return false, nil
			}
		}
		return true, nil
	}
	return ip.IsLoopback(), nil
}
