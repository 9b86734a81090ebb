//go:build unix

package web_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/litequeue/litequeue/web"
)

// ordinarySQL writes ?2 jobs in three queues of three priorities each:
// 60% scheduled, 10% ready, 10% running, 10% completed, 10% dead.
const ordinarySQL = `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?2)
INSERT INTO lq_jobs (queue, kind, state, priority, visible_at, attempt, payload, lease, created_at, run_at, finished_at, last_error)
SELECT CASE x % 3 WHEN 0 THEN 'default' WHEN 1 THEN 'media' ELSE 'mail' END, 'send_email',
	CASE WHEN x % 10 < 7 THEN 0 WHEN x % 10 = 7 THEN 1 WHEN x % 10 = 8 THEN 2 ELSE 3 END,
	x % 3,
	CASE WHEN x % 10 < 6 THEN ?1 + 3600000000000 + x ELSE ?1 - 1000000000 - x END,
	CASE WHEN x % 10 >= 7 THEN 1 ELSE 0 END,
	CAST('{"n":' || x || '}' AS BLOB),
	CASE WHEN x % 10 = 7 THEN x END,
	?1 - x, ?1 - x,
	CASE WHEN x % 10 >= 8 THEN ?1 - x END,
	CASE WHEN x % 10 = 9 THEN 'timeout after ' || (x % 997) || 'ms' END
FROM c`

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLiveStreams holds open live-refresh streams (the /events of an
// open page, refreshed every 2 s) for 10 s and reports the CPU time the
// process used per second: one stream on a file of 100,000 ready jobs of
// distinct priorities, and 40 on an ordinary file of 200,000 jobs. Run it
// with -benchtime 1x.
func BenchmarkLiveStreams(b *testing.B) {
	for _, tc := range []struct {
		name    string
		fill    string
		n       int
		streams int
	}{
		{"1_stream_100k_priorities", distinctPrioritiesSQL, 100_000, 1},
		{"40_streams_200k_jobs", ordinarySQL, 200_000, 40},
	} {
		b.Run(tc.name, func(b *testing.B) {
			q := hostileFileN(b, tc.fill, tc.n)
			srv := httptest.NewServer(web.Handler(q, &web.Options{ReadOnly: true, RefreshInterval: 2 * time.Second}))
			defer func() {
				srv.CloseClientConnections()
				srv.Close()
			}()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			first := make(chan struct{}, tc.streams)
			for range tc.streams {
				req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/events", nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				go func() {
					defer resp.Body.Close()
					r := bufio.NewReader(resp.Body)
					sent := false
					for {
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
			for range tc.streams {
				<-first
			}
			for b.Loop() {
				const window = 10 * time.Second
				c0, t0 := cpuTime(b), time.Now()
				// The measurement window: CPU seconds per real second
				// of open streams is what this benchmark reports.
				time.Sleep(window)
				b.ReportMetric((cpuTime(b)-c0).Seconds()/time.Since(t0).Seconds(), "cpu-s/s")
			}
		})
	}
}
