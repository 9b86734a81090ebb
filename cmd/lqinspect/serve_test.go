package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestServeRefusesAReachableAddressWithoutAToken(t *testing.T) {
	fx := newFixture(t)
	for _, addr := range []string{"0.0.0.0:0", ":0"} {
		r := lq(t, "", "serve", fx.path, "--addr", addr)
		require.Equal(t, exitUsage, r.code, addr)
		require.Contains(t, r.stderr, "reachable from other machines", addr)
	}
	r := lq(t, "", "serve", "--addr", "127.0.0.1:0")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "missing FILE")
}

// lockedBuffer is a bytes.Buffer safe for the server goroutine and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestServeServesTheDashboardAndMetricsUntilInterrupted(t *testing.T) {
	fx := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	var stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		a := &app{ctx: ctx, stdin: strings.NewReader(""), stdout: io.Discard, stderr: &stderr,
			getenv: func(k string) string {
				if k == envToken {
					return "tok"
				}
				return ""
			},
			isTerminal: func(io.Reader) bool { return false }, newTicker: realTicker}
		done <- a.run([]string{"serve", fx.path, "--read-only", "--addr", "127.0.0.1:0"})
	}()
	re := regexp.MustCompile(`http://(127\.0\.0\.1:\d+)/`)
	var base string
	for deadline := time.Now().Add(waitLimit); base == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			base = "http://" + m[1]
		}
	}
	require.NotEmpty(t, base, "serve did not say where it listens: %s", stderr.String())

	resp, err := http.Get(base + "/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the token from the environment is required")

	for path, want := range map[string]string{"/dead": "bad csv header", "/metrics": `litequeue_jobs{queue="imports",state="dead"} 3`,
		"/queues": `data-live="imports/state" data-live-class="state">active<`, "/schedules": "No schedules"} {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode, path)
		require.Contains(t, string(b), want, path)
	}
	cancel()
	select {
	case code := <-done:
		require.Equal(t, exitOK, code, stderr.String())
	case <-time.After(waitLimit):
		t.Fatal("serve did not stop when interrupted")
	}
}
