package web

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// However many pages are open, the live counters are read once per refresh
// interval, for all of them.
func TestOpenPagesShareOneReadOfTheCounts(t *testing.T) {
	q, err := litequeue.Open(filepath.Join(t.TempDir(), "q.db"), &litequeue.Options{PollInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	const interval = 50 * time.Millisecond
	h := Handler(q, &Options{RefreshInterval: interval}).(*server)
	var reads atomic.Int64
	h.live.read = func(ctx context.Context) ([]queueRow, error) {
		reads.Add(1)
		return h.queueRows(ctx)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const pages = 20
	first := make(chan struct{}, pages)
	for range pages {
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/events", nil)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		go func() {
			defer resp.Body.Close()
			r := bufio.NewReader(resp.Body)
			sent := false
			for { // read on: the page stays open
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if !sent && strings.HasPrefix(line, "data: ") {
					first <- struct{}{}
					sent = true
				}
			}
		}()
	}
	for range pages {
		select {
		case <-first:
		case <-time.After(10 * time.Second):
			t.Fatal("a stream got no summary")
		}
	}
	// Real time: the refresh runs on a ticker.
	start, before := time.Now(), reads.Load()
	time.Sleep(10 * interval)
	n, ticks := reads.Load()-before, int64(time.Since(start)/interval)+1
	require.LessOrEqual(t, n, ticks, "%d reads in %d intervals for %d open pages", n, ticks, pages)
	require.Positive(t, n, "the counts are still refreshed")
}
