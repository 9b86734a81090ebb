package web_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/web"
)

// The server of NewServer against slow and idle clients, through a real
// listener. Its timeouts are real time (connection deadlines): the tests
// set them short (300 ms) and wait at most a few seconds.

const shortTimeout = 300 * time.Millisecond

// listen serves h with NewServer(opts) on a loopback port for the test and
// returns the address.
func listen(t *testing.T, h http.Handler, opts *web.ServerOptions) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base, cancel := context.WithCancel(context.Background())
	srv := web.NewServer(h, opts)
	srv.BaseContext = func(net.Listener) context.Context { return base }
	go srv.Serve(ln)
	t.Cleanup(func() {
		cancel()
		srv.Close()
	})
	return ln.Addr().String()
}

// closedWithin requires the server to close c within d: a read returns EOF
// (or a reset) before d is up.
func closedWithin(t *testing.T, c net.Conn, d time.Duration, what string) {
	t.Helper()
	start := time.Now()
	require.NoError(t, c.SetReadDeadline(start.Add(d)))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: the connection was still open after %s", what, d)
	}
	t.Logf("%s: closed after %s", what, time.Since(start).Round(time.Millisecond))
}

func TestSlowAndIdleClientsAreCutOff(t *testing.T) {
	f := newFixture(t, nil)
	addr := listen(t, web.Handler(f.q, nil), &web.ServerOptions{ReadHeaderTimeout: shortTimeout, ReadTimeout: shortTimeout,
		WriteTimeout: shortTimeout, IdleTimeout: shortTimeout})

	// A body that never ends.
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "POST /login HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\ntoken=abc")
	require.NoError(t, err)
	closedWithin(t, c, 5*time.Second, "a slow body")

	// Headers that never end.
	c2, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c2.Close()
	_, err = io.WriteString(c2, "GET / HTTP/1.1\r\nHost: "+addr+"\r\n")
	require.NoError(t, err)
	closedWithin(t, c2, 5*time.Second, "slow headers")

	// A connection kept alive after one request, then idle.
	c3, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c3.Close()
	_, err = io.WriteString(c3, "GET /static/app.css HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
	require.NoError(t, err)
	r := bufio.NewReader(c3)
	resp, err := http.ReadResponse(r, nil)
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.False(t, resp.Close, "kept alive")
	closedWithin(t, c3, 5*time.Second, "an idle keep-alive")
}

// Over MaxConns, a new connection is closed as soon as it is accepted; one
// that ends makes room.
func TestConnectionsAreCapped(t *testing.T) {
	f := newFixture(t, nil)
	addr := listen(t, web.Handler(f.q, nil), &web.ServerOptions{MaxConns: 2})
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		held = append(held, c)
	}
	// The two are served.
	for _, c := range held {
		_, err := io.WriteString(c, "GET /static/app.css HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	third, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer third.Close()
	closedWithin(t, third, 5*time.Second, "a third connection")

	held[0].Close()
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/static/app.css")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 5*time.Second, 20*time.Millisecond, "room again after one closed")
}

// A live stream outlives the server's read and write timeouts: it lifts
// the first and gives each of its writes a deadline of its own.
func TestALiveStreamOutlivesTheServerTimeouts(t *testing.T) {
	f := newFixture(t, nil)
	addr := listen(t, web.Handler(f.q, &web.Options{RefreshInterval: 20 * time.Millisecond}),
		&web.ServerOptions{ReadTimeout: shortTimeout, WriteTimeout: shortTimeout, IdleTimeout: shortTimeout})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/events", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	evs := readEvents(bufio.NewReader(resp.Body))
	require.Equal(t, "summary", next(t, evs).name)
	// Wait past both timeouts (real time: they are connection deadlines),
	// then make the counts change.
	time.Sleep(3 * shortTimeout)
	_, err = f.q.Enqueue(context.Background(), Email{To: "late"}, &litequeue.EnqueueOptions{Queue: "late"})
	require.NoError(t, err)
	for {
		ev := next(t, evs)
		if ev.data["late/ready"] == "1" {
			break
		}
		require.Equal(t, "summary", ev.name)
	}
}
