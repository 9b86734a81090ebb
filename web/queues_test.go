package web_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/web"
)

func pausedQueues(t *testing.T, q *litequeue.Queue) []string {
	t.Helper()
	stats, err := q.Stats(context.Background())
	require.NoError(t, err)
	var out []string
	for _, s := range stats {
		if s.Paused {
			out = append(out, s.Queue)
		}
	}
	return out
}

// rowOf returns the row of the queues page or the overview for queue.
func rowOf(t *testing.T, body, queue string) string {
	t.Helper()
	return rowLinking(t, body, "/jobs?queue="+url.QueryEscape(queue))
}

// rowLinking returns the table row of the page whose header cell links
// href.
func rowLinking(t *testing.T, body, href string) string {
	t.Helper()
	for _, row := range strings.Split(body, "<tr>") {
		if strings.Contains(row, `<th scope="row"><a href="`+href+`">`) {
			row, _, _ = strings.Cut(row, "</tr>")
			return row
		}
	}
	t.Fatalf("no row links %q in\n%s", href, body)
	return ""
}

func TestQueuesPageListsCountsAndPausedQueuesWithoutJobs(t *testing.T) {
	f := newFixture(t, map[string]string{"a": "boom"})
	ctx := context.Background()
	for range 2 {
		_, err := f.q.Enqueue(ctx, Resize{Image: "x.png"}, nil)
		require.NoError(t, err)
	}
	_, err := f.q.Enqueue(ctx, Email{To: "later"}, &litequeue.EnqueueOptions{Delay: time.Hour})
	require.NoError(t, err)
	require.NoError(t, f.q.Pause(ctx, "media"))
	require.NoError(t, f.q.Pause(ctx, "idle")) // no jobs at all
	d := serve(t, web.Handler(f.q, nil))

	body := d.open("/queues")
	require.Contains(t, body, `href="/queues" aria-current="page"`, "Queues is in the nav")
	def := rowOf(t, body, "default")
	require.Contains(t, def, `data-live="default/state" data-live-class="state">active<`)
	require.Regexp(t, `data-live="default/scheduled">1<`, def)
	require.Regexp(t, `data-live="default/dead">1<`, def)
	require.Contains(t, def, `action="/queues/pause"`)
	media := rowOf(t, body, "media")
	require.Contains(t, media, `>paused<`)
	require.Contains(t, media, `paused <time datetime="2026-03-01T12:00:00Z" title="2026-03-01 12:00:00.000 UTC">now</time>`, "paused at the queue's clock")
	require.Regexp(t, `data-live="media/ready">2<`, media)
	require.Contains(t, media, `action="/queues/resume"`)
	require.NotContains(t, media, `action="/queues/pause"`)
	idle := rowOf(t, body, "idle")
	require.Contains(t, idle, `>paused<`, "a paused queue without jobs is listed")
	require.Contains(t, idle, `action="/queues/resume"`)
	require.Less(t, strings.Index(body, "default"), strings.Index(body, `queue=idle`), "sorted by name")
	require.Less(t, strings.Index(body, `queue=idle`), strings.Index(body, `queue=media`), "sorted by name")

	_, body, _ = d.get("/")
	require.Regexp(t, `data-live="media/paused">paused</a>`, rowOf(t, body, "media"), "the overview marks a paused queue")
	require.Regexp(t, `data-live="default/paused"></a>`, rowOf(t, body, "default"), "and only a paused one")
	rowOf(t, body, "idle")
}

func TestPauseFromTheQueuesPageStopsClaimsUntilResume(t *testing.T) {
	lq := openFixture(t, nil)
	ctx := context.Background()
	litequeue.Register(lq.q, func(ctx context.Context, d *litequeue.Delivery[Email]) error { return nil })
	litequeue.Register(lq.q, func(ctx context.Context, d *litequeue.Delivery[Resize]) error { return nil })
	require.NoError(t, lq.q.Start(ctx))
	defer lq.q.Stop(ctx)
	d := serve(t, web.Handler(lq.q, nil))
	d.open("/queues")

	loc, body := d.act("/queues/pause", url.Values{"queue": {"default"}})
	require.True(t, strings.HasPrefix(loc, "/queues?done="), loc)
	require.Contains(t, body, `Queue &#34;default&#34; paused: no process starts its jobs`, "the flash states the effect")
	require.Contains(t, rowOf(t, body, "default"), `action="/queues/resume"`)
	require.Equal(t, []string{"default"}, pausedQueues(t, lq.q), "Stats reports the pause")

	// The paused queue's job waits while another queue's job runs.
	held, err := lq.q.Enqueue(ctx, Email{To: "held"}, nil)
	require.NoError(t, err)
	other, err := lq.q.Enqueue(ctx, Resize{Image: "y.png"}, nil)
	require.NoError(t, err)
	lq.waitEvent(t, litequeue.EventSucceeded, other)
	j, err := lq.q.Job(ctx, held)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateReady, j.State, "a paused queue's job is not claimed")
	require.Zero(t, j.Attempt)

	d.act("/queues/resume", url.Values{"queue": {"default"}})
	lq.waitEvent(t, litequeue.EventSucceeded, held)
	require.Empty(t, pausedQueues(t, lq.q))

	// Pausing by name a queue that has no jobs yet.
	d.act("/queues/pause", url.Values{"queue": {"later"}})
	require.Equal(t, []string{"later"}, pausedQueues(t, lq.q))
	// A name the queue refuses is a bad request, and pauses nothing.
	code, body, _ := d.send("/queues/pause", url.Values{"queue": {""}})
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, "empty queue name")
	code, _, _ = d.send("/queues/stop", url.Values{"queue": {"default"}})
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, []string{"later"}, pausedQueues(t, lq.q))
}

func TestQueueActionsAreRefusedReadOnlyAndWithoutCSRF(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	_, err := f.q.Enqueue(ctx, Email{To: "a"}, nil)
	require.NoError(t, err)
	require.NoError(t, f.q.Pause(ctx, "paused"))

	ro := serve(t, web.Handler(f.q, &web.Options{ReadOnly: true}))
	ro.requireReadOnly("/queues", "/")
	_, body, _ := ro.get("/queues")
	require.Contains(t, rowOf(t, body, "paused"), ">paused<", "read-only still shows the state")
	for _, a := range []string{"pause", "resume"} {
		code, _, _ := ro.post("/queues/"+a, url.Values{"queue": {"default"}, "csrf": {strings.Repeat("0", 64)}}, "")
		require.Equal(t, http.StatusForbidden, code, a)
		code, _, _ = ro.post("/queues/"+a, url.Values{"queue": {"paused"}}, "")
		require.Equal(t, http.StatusForbidden, code, a)
	}
	require.Equal(t, []string{"paused"}, pausedQueues(t, f.q), "read-only changed nothing")

	rw := serve(t, web.Handler(f.q, nil))
	rw.open("/queues")
	rw.requireForgeriesRefused("/queues/pause", url.Values{"queue": {"default"}})
	rw.requireForgeriesRefused("/queues/resume", url.Values{"queue": {"paused"}})
	code, _, _ := rw.get("/queues/pause?queue=default")
	require.Equal(t, http.StatusMethodNotAllowed, code, "no action on GET")
	require.Equal(t, []string{"paused"}, pausedQueues(t, f.q), "refused requests changed nothing")
}

func TestQueueNamesAreEscaped(t *testing.T) {
	const evil = `<script>alert("q")</script>`
	f := newFixture(t, nil)
	ctx := context.Background()
	require.NoError(t, f.q.Pause(ctx, evil))
	d := serve(t, web.Handler(f.q, nil))
	for _, p := range []string{"/queues", "/"} {
		_, body, _ := d.get(p)
		require.NotContains(t, body, "<script>alert", p)
		require.Contains(t, body, "&lt;script&gt;alert", p)
	}
	d.open("/queues")
	_, body := d.act("/queues/resume", url.Values{"queue": {evil}})
	require.Empty(t, pausedQueues(t, f.q))
	require.NotContains(t, body, "<script>alert", "the flash")
	require.Regexp(t, regexp.MustCompile(`Queue &#34;&lt;script&gt;alert\(\\&#34;q\\&#34;\)&lt;/script&gt;&#34; resumed`), body)
}

func TestLiveRefreshCarriesThePausedState(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	_, err := f.q.Enqueue(ctx, Email{To: "a"}, nil)
	require.NoError(t, err)
	d := serve(t, web.Handler(f.q, &web.Options{RefreshInterval: 20 * time.Millisecond}))
	evs := d.events("/events")

	ev := next(t, evs)
	require.Equal(t, "summary", ev.name)
	require.Equal(t, "", ev.data["default/paused"])
	require.Equal(t, "active", ev.data["default/state"])
	require.NoError(t, f.q.Pause(ctx, "default"))
	require.NoError(t, f.q.Pause(ctx, "idle"))
	ev = next(t, evs) // sent only when something changed
	if ev.data["idle/state"] != "paused" {
		// A refresh fell between the two Pauses: it shows the first alone.
		require.Equal(t, "paused", ev.data["default/paused"])
		ev = next(t, evs)
	}
	require.Equal(t, "paused", ev.data["default/paused"])
	require.Equal(t, "paused", ev.data["default/state"])
	require.Equal(t, "paused", ev.data["idle/state"], "a paused queue without jobs")
	require.Equal(t, "1", ev.data["default/ready"])
}
