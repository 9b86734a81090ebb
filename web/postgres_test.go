package web_test

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net/url"
	"regexp"
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
	lq := openFixtureOn(t, &litequeue.Options{CompletedRetention: time.Hour}, func(opts *litequeue.Options) (*litequeue.Queue, error) {
		return postgres.Open(ctx, u, opts)
	})
	litequeue.Register(lq.q, func(ctx context.Context, d *litequeue.Delivery[Email]) error { return nil })
	litequeue.Register(lq.q, func(ctx context.Context, d *litequeue.Delivery[Resize]) error { return nil })
	steps, acks := startReporter(t, lq)
	registerSchedules(t, lq.q)
	d := serve(t, web.Handler(lq.q, nil))
	d.open("/queues")

	// Pause from the queues page: the queue's jobs wait, another's run.
	require.NoError(t, lq.q.Pause(ctx, "idle"))
	d.act("/queues/pause", url.Values{"queue": {"default"}})
	require.Equal(t, []string{"default", "idle"}, pausedQueues(t, lq.q))
	held, err := lq.q.Enqueue(ctx, Email{To: "held"}, nil)
	require.NoError(t, err)
	other, err := lq.q.Enqueue(ctx, Resize{Image: "z.png"}, nil)
	require.NoError(t, err)
	lq.waitEvent(t, litequeue.EventSucceeded, other)
	_, body, _ := d.get("/queues")
	require.Contains(t, rowOf(t, body, "default"), `>paused<`)
	require.Regexp(t, `data-live="default/ready">1<`, rowOf(t, body, "default"))
	require.Contains(t, rowOf(t, body, "idle"), `>paused<`, "a paused queue without jobs is listed")
	require.Contains(t, rowOf(t, body, "media"), `>active<`)
	_, body, _ = d.get("/")
	require.Contains(t, rowOf(t, body, "default"), `data-live="default/paused">paused</a>`)

	// Schedules: list, detail, trigger (its job waits in the paused queue).
	_, body, _ = d.get("/schedules")
	require.Contains(t, scheduleRowOf(t, body, nightly), "2026-03-02 02:00:00.000 UTC")
	require.Contains(t, scheduleRowOf(t, body, hourly), "2026-03-01 13:00:00.000 UTC")
	loc, body := d.act("/schedules/trigger", named(nightly, "from", "detail"))
	lu, err := url.Parse(loc)
	require.NoError(t, err)
	id, err := strconv.ParseInt(lu.Query().Get("job"), 10, 64)
	require.NoError(t, err)
	j, err := lq.q.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateReady, j.State)
	require.Contains(t, body, `<span class="event triggered">triggered</span>`)
	require.Equal(t, 5, strings.Count(body, `<li><span class="t">`), "five next runs")
	d.act("/schedules/pause", named(hourly))
	s, _ := schedule(t, lq.q, hourly)
	require.True(t, s.Paused)

	d.act("/queues/resume", url.Values{"queue": {"default"}})
	lq.waitEvent(t, litequeue.EventSucceeded, held)
	require.Equal(t, []string{"idle"}, pausedQueues(t, lq.q))

	// Progress on the job page, then the output of the finished job.
	rep := startReport(t, lq, "pg")
	steps <- progressStep{0.6, "sixty"}
	<-acks
	lq.waitEvent(t, litequeue.EventProgress, rep)
	_, body, _ = d.get("/jobs/" + itoa(rep))
	require.Contains(t, body, `<progress max="1" value="0.6" aria-label="progress">60%</progress>`)
	require.Contains(t, body, `<p class="msg">sixty</p>`)
	close(steps)
	lq.waitEvent(t, litequeue.EventSucceeded, rep)
	_, body, _ = d.get("/jobs/" + itoa(rep))
	require.Contains(t, body, `&#34;rows&#34;: 7`)
}

// Paging a filtered list, the dead-letter groups and a text search on a
// PostgreSQL queue.
func TestPagingDeadLettersAndSearchOnPostgreSQL(t *testing.T) {
	u, _ := pgtest.FreshSchema(t)
	ctx := context.Background()
	lq := openFixtureOn(t, &litequeue.Options{Queues: []litequeue.QueueConfig{{Name: litequeue.DefaultQueue, Retry: litequeue.NoRetry()}}},
		func(opts *litequeue.Options) (*litequeue.Queue, error) { return postgres.Open(ctx, u, opts) })
	litequeue.Register(lq.q, func(ctx context.Context, d *litequeue.Delivery[Email]) error { return errors.New(d.Job.Fail) })
	require.NoError(t, lq.q.Start(ctx))
	var dead []int64
	for i := range 3 { // one at a time: polling is off, each enqueue wakes the worker
		id, err := lq.q.Enqueue(ctx, Email{To: fmt.Sprint(i), Fail: fmt.Sprintf("smtp %d refused", 500+i)}, nil)
		require.NoError(t, err)
		lq.waitEvent(t, litequeue.EventDead, id)
		dead = append(dead, id)
	}
	require.NoError(t, lq.q.Stop(ctx))
	items := make([]litequeue.BatchItem, 120)
	for i := range items {
		items[i] = litequeue.BatchItem{Job: Resize{Image: fmt.Sprintf("%d.png", i)}, Options: &litequeue.EnqueueOptions{Delay: time.Hour}}
		if i%2 == 0 {
			items[i].Options.Group = "even"
		}
	}
	ids, err := lq.q.EnqueueBatch(ctx, items)
	require.NoError(t, err)
	d := serve(t, web.Handler(lq.q, nil))

	body := d.open("/jobs?queue=media&state=scheduled")
	older := regexp.MustCompile(`href="([^"]*)">Older →`).FindStringSubmatch(body)
	require.NotNil(t, older)
	next, err := url.Parse(html.UnescapeString(older[1]))
	require.NoError(t, err)
	require.Equal(t, url.Values{"queue": {"media"}, "state": {"scheduled"}, "before": {itoa(ids[70])}}, next.Query())
	body = d.open(next.String())
	require.Contains(t, body, `href="/jobs/`+itoa(ids[69])+`"`, "the next page starts below the cursor")
	require.NotContains(t, body, `href="/jobs/`+itoa(ids[70])+`"`)

	// A job group's list, linked from the queue page, pages within the
	// group: 60 jobs, 50 a page.
	require.Contains(t, d.open("/queue?name=media"), `<a href="/jobs?jobgroup=even&amp;queue=media"><code>even</code></a>`)
	body = d.open("/jobs?jobgroup=even&queue=media")
	require.Contains(t, body, `href="/jobs/`+itoa(ids[118])+`"`)
	require.NotContains(t, body, `href="/jobs/`+itoa(ids[119])+`"`, "a job of no group")
	older = regexp.MustCompile(`href="([^"]*)">Older →`).FindStringSubmatch(body)
	require.NotNil(t, older)
	next, err = url.Parse(html.UnescapeString(older[1]))
	require.NoError(t, err)
	require.Equal(t, url.Values{"queue": {"media"}, "jobgroup": {"even"}, "before": {itoa(ids[20])}}, next.Query())
	body = d.open(next.String())
	require.Equal(t, 10, strings.Count(body, `<td class="n"><a href="/jobs/`), "the group's last 10 jobs")
	require.Contains(t, body, `href="/jobs/`+itoa(ids[0])+`"`)
	require.NotContains(t, body, `href="/jobs/`+itoa(ids[19])+`"`)
	require.NotContains(t, body, "Older →")

	body = d.open("/dead")
	require.Contains(t, body, `<code class="key">smtp &lt;n&gt; refused</code>`)
	require.Regexp(t, `<td class="n">3</td>`, body)
	body = d.open("/jobs?q=SMTP+501")
	require.Contains(t, body, `href="/jobs/`+itoa(dead[1])+`"`)
	require.NotContains(t, body, `href="/jobs/`+itoa(dead[0])+`"`)
}
