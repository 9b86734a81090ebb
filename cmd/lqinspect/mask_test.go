package main

import (
	"context"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue/internal/pgtest"
	"github.com/litequeue/litequeue/postgres"
)

// A PostgreSQL password given in the URL, as user information or as the
// password parameter, is never printed: not by the serve banner, the stats
// --watch header, nor an error that names the queue.
func TestPasswordsInURLsAreNeverPrinted(t *testing.T) {
	u, _ := pgtest.FreshSchema(t)
	q, err := postgres.Open(context.Background(), u, nil) // creates the tables
	require.NoError(t, err)
	require.NoError(t, q.Close())
	const secret = "s3cret-pw"
	pu, err := url.Parse(u)
	require.NoError(t, err)
	pu.User = url.UserPassword(pu.User.Username(), secret) // trust auth: the server does not ask
	withUser := pu.String()
	pu.User = url.User(pu.User.Username())
	params := pu.Query()
	params.Set("password", secret)
	pu.RawQuery = params.Encode()
	withParam := pu.String()

	for _, addr := range []string{withUser, withParam} {
		r := lq(t, "", "show", addr, "999")
		require.Equal(t, exitError, r.code, r.stderr)
		require.Contains(t, r.stderr, "no job with id 999 in")
		require.NotContains(t, r.stderr, secret)
		require.Contains(t, r.stderr, "xxxxx")

		r, _, _ = watch(t, 1, nil, addr)
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, "Every 1s: lqinspect stats postgres://")
		require.NotContains(t, r.stdout+r.stderr, secret)

		ctx, cancel := context.WithCancel(context.Background())
		var stderr lockedBuffer
		done := make(chan int, 1)
		go func() {
			a := &app{ctx: ctx, stdin: strings.NewReader(""), stdout: io.Discard, stderr: &stderr,
				getenv: func(string) string { return "" }, isTerminal: func(io.Reader) bool { return false }, newTicker: realTicker}
			done <- a.run([]string{"serve", addr, "--read-only", "--addr", "127.0.0.1:0"})
		}()
		for deadline := time.Now().Add(waitLimit); !strings.Contains(stderr.String(), "serving") && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		}
		cancel()
		require.Equal(t, exitOK, <-done, stderr.String())
		require.Contains(t, stderr.String(), "serving postgres://")
		require.NotContains(t, stderr.String(), secret)
	}
}
