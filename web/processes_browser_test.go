package web_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/web"
)

// Thumb is a job of queue media that the Resize handlers do not take.
type Thumb struct{}

func (Thumb) Kind() string      { return "thumb" }
func (Thumb) QueueName() string { return "media" }

// startHolder starts another queue on f's file, with its own mock clock at
// at, whose Resize handler holds each job until the test ends; it returns
// the queue, its clock and the ids of the jobs its handler took. With
// thumbs it handles Thumb instead, and takes no Resize job.
func startHolder(t *testing.T, f *fixture, at time.Time, thumbs bool) (*litequeue.Queue, *clock.Mock, chan int64) {
	t.Helper()
	mock := clock.NewMock()
	mock.Set(at)
	q, err := litequeue.Open(f.path, &litequeue.Options{Clock: mock, PollInterval: -1,
		Queues: []litequeue.QueueConfig{litequeue.NewQueueConfig("media")}})
	require.NoError(t, err)
	release := make(chan struct{})
	took := make(chan int64, 10)
	if thumbs {
		litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[Thumb]) error { return nil })
	} else {
		litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[Resize]) error {
			took <- d.ID
			<-release
			return nil
		})
	}
	require.NoError(t, q.Start(context.Background()))
	t.Cleanup(func() {
		close(release)
		q.Close()
	})
	return q, mock, took
}

// TestProcessesPageInABrowser shows a dead process with the job it held, a
// live one, the running job's holder and who ran each failed attempt.
func TestProcessesPageInABrowser(t *testing.T) {
	ctx := browser(t)
	shots := t.TempDir()
	f := openFixture(t, configured())
	dead := makeDead(t, f, "smtp: 550 mailbox unavailable")
	bg := context.Background()
	start := f.clock.Now()

	// One process takes a job, beats once with it, then beats no more.
	gone, goneClock, took := startHolder(t, f, start, false)
	held, err := gone.Enqueue(bg, Resize{Image: "held.png"}, nil)
	require.NoError(t, err)
	require.Equal(t, held, <-took)
	goneClock.Add(litequeue.DefaultHeartbeatInterval)
	deadline := time.Now().Add(15 * time.Second)
	for {
		ps, err := f.q.Processes(bg)
		require.NoError(t, err)
		if len(ps) == 1 && ps[0].Running == 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the heartbeat with the held job was not written")
		time.Sleep(time.Millisecond) // a bounded poll of the file for the other queue's heartbeat
	}
	// Another starts two minutes later, when the first has missed its
	// heartbeats (its kind is another, so the held job stays as it was).
	live, _, _ := startHolder(t, f, start.Add(2*time.Minute), true)
	f.clock.Set(start.Add(2 * time.Minute))

	srv := serve(t, web.Handler(f.q, &web.Options{RefreshInterval: -1}))
	text := func(sel string) string { return run(t, ctx, chromedp.Text(chromedp.CSS(sel))) }
	step(t, ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("nav")))
	clickAndLoad(t, ctx, `nav a[href="/processes"]`)
	goneRow := fmt.Sprintf(`tr[data-process="%d"]`, gone.ProcessID())
	liveRow := fmt.Sprintf(`tr[data-process="%d"]`, live.ProcessID())
	host, _ := os.Hostname()
	require.Contains(t, text(goneRow+` th`), host)
	require.Equal(t, strconv.Itoa(os.Getpid()), text(goneRow+` td[data-label="PID"]`))
	require.Equal(t, "dead", text(goneRow+` td[data-label="Status"]`))
	require.Equal(t, "1", text(goneRow+` td[data-label="Running"]`))
	require.Contains(t, text(goneRow+` td[data-label="Queues"]`), "media")
	require.Contains(t, text(goneRow+` td[data-label="Queues"]`), "resize")
	require.Equal(t, "alive", text(liveRow+` td[data-label="Status"]`))
	require.Equal(t, "0", text(liveRow+` td[data-label="Running"]`))
	shoot(t, ctx, shots, "processes.png")

	// The dead process's job links to the job page, which names its holder.
	clickAndLoad(t, ctx, goneRow+fmt.Sprintf(` td[data-label="Jobs held"] a[href="/jobs/%d"]`, held))
	require.Equal(t, fmt.Sprintf("process %d", gone.ProcessID()), text(`[data-held-by]`))

	// A failed attempt says which host and process ran it.
	step(t, ctx, chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, dead[0])), chromedp.WaitVisible(chromedp.CSS("table.attempts")))
	require.Contains(t, text(`table.attempts [data-attempted-by]`), host+":"+strconv.Itoa(os.Getpid()))
	shoot(t, ctx, shots, "job-attempted-by.png")
}

// TestProcessesPageWithNoneSaysSo renders the empty registry.
func TestProcessesPageWithNoneSaysSo(t *testing.T) {
	f := openFixture(t, nil)
	d := serve(t, web.Handler(f.q, &web.Options{RefreshInterval: -1}))
	code, body, _ := d.get("/processes")
	require.Equal(t, 200, code)
	require.Contains(t, body, "No processes")
}
