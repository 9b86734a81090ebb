package web

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
)

// The DNS-rebinding guard of a dashboard without a token: a page of another
// site whose name its owner points at 127.0.0.1 is, to the browser, the
// same origin as the dashboard it then reaches, and the browser sends that
// name as the Host header. Without a token the dashboard answers only the
// names it knows to be its own.

// hostAllowed reports whether host, a Host header or the host[:port] of an
// Origin, names the dashboard: an IP address (a browser sends one only for
// a page whose own address it is, so a rebound name never arrives as one),
// localhost or a name under .localhost (browsers resolve those to the
// loopback interface themselves), or one of allowed (a name, matched
// without its port, or a name:port, matched with it; "*" allows every
// host). An empty host (a client that is no browser) is allowed. Names are
// compared ignoring ASCII case and one trailing dot.
func hostAllowed(host string, allowed []string) bool {
	if host == "" || slices.Contains(allowed, "*") {
		return true
	}
	name := hostName(host)
	if name == "" {
		return false
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	full := strings.ToLower(strings.TrimSuffix(host, "."))
	for _, a := range allowed {
		a = strings.ToLower(strings.TrimSuffix(a, "."))
		if a == name || a == full {
			return true
		}
	}
	return false
}

// hostName returns host without its port and IPv6 brackets, lower case,
// without a trailing dot; "" when host is malformed.
func hostName(host string) string {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		name = host[1 : len(host)-1]
	} else if strings.ContainsAny(host, "[]") || strings.Count(host, ":") == 1 {
		return "" // "a:b:c" is an IPv6 address without brackets; "[x" or "x:" is malformed
	}
	return strings.ToLower(strings.TrimSuffix(name, "."))
}

// originHost returns the host[:port] of an Origin header ("" for none),
// and false when the header is malformed. "null" names none: browsers send
// it for the dashboard's own forms, whose pages send no referrer, and for
// pages of opaque origins, which the cross-origin check (Sec-Fetch-Site)
// refuses.
func originHost(origin string) (string, bool) {
	if origin == "" || origin == "null" {
		return "", true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return "", false
	}
	return u.Host, true
}

// isSafeMethod reports whether m changes nothing by the rules of HTTP.
func isSafeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// checkHost answers r and returns false when the dashboard has no token and
// r's Host, or on a request that may change something its Origin, is not
// one of the dashboard's own names (see hostAllowed): 421 Misdirected
// Request for the Host, 403 Forbidden for the Origin, as plain text,
// before anything else (no cookie is set).
func (s *server) checkHost(w http.ResponseWriter, r *http.Request) bool {
	if s.opts.Token != "" {
		return true
	}
	if !hostAllowed(r.Host, s.opts.AllowedHosts) {
		s.opts.Logger.Warn("litequeue/web: refused a request for another host", "host", r.Host, "remote", r.RemoteAddr)
		http.Error(w, fmt.Sprintf("This dashboard does not answer to the host name %q: without an access token it answers only "+
			"at an IP address, localhost, and the names in its AllowedHosts option (lqinspect serve: the host of --addr). "+
			"This guards against DNS rebinding; open it by one of those names, or give it an access token.", r.Host),
			http.StatusMisdirectedRequest)
		return false
	}
	if isSafeMethod(r.Method) {
		return true
	}
	if h, ok := originHost(r.Header.Get("Origin")); !ok || !hostAllowed(h, s.opts.AllowedHosts) {
		s.opts.Logger.Warn("litequeue/web: refused a request from another origin", "origin", r.Header.Get("Origin"), "remote", r.RemoteAddr)
		http.Error(w, fmt.Sprintf("This dashboard does not take requests from the origin %q: it is not one of its own names.", r.Header.Get("Origin")),
			http.StatusForbidden)
		return false
	}
	return true
}
