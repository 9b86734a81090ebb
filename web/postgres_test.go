package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/pgtest"
	"github.com/litequeue/litequeue/postgres"
	"github.com/litequeue/litequeue/web"
)

// The queues, schedules and progress views on a PostgreSQL queue (a fresh
// schema of the test server; skipped when none answers, unless
// LITEQUEUE_REQUIRE_PG=1).
func TestQueuesSchedulesAndProgressOnPostgreSQL(t *testing.T) {
	u, _ := pgtest.FreshSchema(t)
	ctx := context.Background()
	lq := openLiveWith(t, &litequeue.Options{CompletedRetention: time.Hour}, func(opts *litequeue.Options) (*litequeue.Queue, error) {
		return postgres.Open(ctx, u, opts)
	})
	litequeue.Register(lq.q, func(ctx context.Context, d *litequeue.Delivery[Email]) error { return nil })
	litequeue.Register(lq.q, func(ctx context.Context, d *litequeue.Delivery[Resize]) error { return nil })
	steps, acks := startReporter(t, lq)
	registerSchedules(t, lq.q)
	srv := httptest.NewServer(web.Handler(lq.q, nil))
	defer closeServer(srv)
	c := client(t)
	_, body, _ := get(t, c, srv.URL+"/queues")
	tok := csrfOf(t, body)

	// Pause from the queues page: the queue's jobs wait, another's run.
	require.NoError(t, lq.q.Pause(ctx, "idle"))
	code, _, _ := post(t, c, srv.URL+"/queues/pause", url.Values{"csrf": {tok}, "queue": {"default"}}, "")
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, []string{"default", "idle"}, pausedQueues(t, lq.q))
	held, err := lq.q.Enqueue(ctx, Email{To: "held"}, nil)
	require.NoError(t, err)
	other, err := lq.q.Enqueue(ctx, Resize{Image: "z.png"}, nil)
	require.NoError(t, err)
	lq.waitEvent(t, litequeue.EventSucceeded, other)
	_, body, _ = get(t, c, srv.URL+"/queues")
	require.Contains(t, rowOf(t, body, "default"), `>paused<`)
	require.Regexp(t, `data-live="default/ready">1<`, rowOf(t, body, "default"))
	require.Contains(t, rowOf(t, body, "idle"), `>paused<`, "a paused queue without jobs is listed")
	require.Contains(t, rowOf(t, body, "media"), `>active<`)
	_, body, _ = get(t, c, srv.URL+"/")
	require.Contains(t, rowOf(t, body, "default"), `data-live="default/paused">paused</a>`)

	// Schedules: list, detail, trigger (its job waits in the paused queue).
	_, body, _ = get(t, c, srv.URL+"/schedules")
	require.Contains(t, scheduleRowOf(t, body, nightly), "2026-03-02 02:00:00.000 UTC")
	require.Contains(t, scheduleRowOf(t, body, hourly), "2026-03-01 13:00:00.000 UTC")
	code, _, h := post(t, c, srv.URL+"/schedules/trigger", url.Values{"csrf": {tok}, "name": {nightly}, "from": {"detail"}}, "")
	require.Equal(t, http.StatusSeeOther, code)
	loc, err := url.Parse(h.Get("Location"))
	require.NoError(t, err)
	id, err := strconv.ParseInt(loc.Query().Get("job"), 10, 64)
	require.NoError(t, err)
	j, err := lq.q.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateReady, j.State)
	_, body, _ = get(t, c, srv.URL+loc.String())
	require.Contains(t, body, `<span class="event triggered">triggered</span>`)
	require.Equal(t, 5, strings.Count(body, `<li><span class="t">`), "five next runs")
	code, _, _ = post(t, c, srv.URL+"/schedules/pause", url.Values{"csrf": {tok}, "name": {hourly}}, "")
	require.Equal(t, http.StatusSeeOther, code)
	s, _ := schedule(t, lq.q, hourly)
	require.True(t, s.Paused)

	code, _, _ = post(t, c, srv.URL+"/queues/resume", url.Values{"csrf": {tok}, "queue": {"default"}}, "")
	require.Equal(t, http.StatusSeeOther, code)
	lq.waitEvent(t, litequeue.EventSucceeded, held)
	require.Equal(t, []string{"idle"}, pausedQueues(t, lq.q))

	// Progress on the job page, then the output of the finished job.
	rep, err := lq.q.Enqueue(ctx, Report{Name: "pg"}, nil)
	require.NoError(t, err)
	lq.waitEvent(t, litequeue.EventStarted, rep)
	steps <- progressStep{0.6, "sixty"}
	<-acks
	lq.waitEvent(t, litequeue.EventProgress, rep)
	_, body, _ = get(t, c, srv.URL+"/jobs/"+itoa(rep))
	require.Contains(t, body, `<progress max="1" value="0.6" aria-label="progress">60%</progress>`)
	require.Contains(t, body, `<p class="msg">sixty</p>`)
	close(steps)
	lq.waitEvent(t, litequeue.EventSucceeded, rep)
	_, body, _ = get(t, c, srv.URL+"/jobs/"+itoa(rep))
	require.Contains(t, body, `&#34;rows&#34;: 7`)
}
