package web

import (
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// ServerOptions configures NewServer. A nil *ServerOptions, and every zero
// field, means the documented default; a negative duration or MaxConns
// means none.
type ServerOptions struct {
	// ReadHeaderTimeout bounds the reading of a request's headers.
	// Default 10s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds the reading of a whole request, body included: a
	// client that sends its body slowly is cut off. Default 30s. The live
	// streams lift it once their request is read.
	ReadTimeout time.Duration
	// WriteTimeout bounds the writing of a response. Default 60s. The live
	// streams give each of their writes its own 30s instead.
	WriteTimeout time.Duration
	// IdleTimeout is how long a kept-alive connection may wait for its next
	// request. Default 60s.
	IdleTimeout time.Duration
	// MaxConns bounds the connections open at once: one over it is closed
	// as soon as it is accepted. Default 256 (each open page holds one for
	// its live stream).
	MaxConns int
}

// Defaults of ServerOptions.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 60 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultMaxConns          = 256
)

// NewServer returns an http.Server for the dashboard h (or any handler)
// with every timeout and a connection cap set, as lqinspect serve runs it:
// slow or idle clients cannot hold connections, and with them file
// descriptors, for ever. Set its Addr, BaseContext or TLSConfig as needed
// before serving.
func NewServer(h http.Handler, opts *ServerOptions) *http.Server {
	var o ServerOptions
	if opts != nil {
		o = *opts
	}
	dur := func(d, def time.Duration) time.Duration {
		if d == 0 {
			return def
		}
		return d // negative: none, for each of http.Server's timeouts
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: dur(o.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		ReadTimeout:       dur(o.ReadTimeout, DefaultReadTimeout),
		WriteTimeout:      dur(o.WriteTimeout, DefaultWriteTimeout),
		IdleTimeout:       dur(o.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes:    64 << 10,
	}
	max := o.MaxConns
	if max == 0 {
		max = DefaultMaxConns
	}
	if max > 0 {
		var open atomic.Int64
		srv.ConnState = func(c net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				if open.Add(1) > int64(max) {
					c.Close()
				}
			case http.StateClosed, http.StateHijacked:
				open.Add(-1)
			}
		}
	}
	return srv
}
