package web_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/web"
)

// liveQueue is a queue in t.TempDir() on a mock clock whose events go to
// a channel, for tests that run handlers.
type liveQueue struct {
	q     *litequeue.Queue
	clock *clock.Mock
	evs   chan litequeue.Event
}

func openLive(t *testing.T, opts *litequeue.Options) *liveQueue {
	t.Helper()
	return openLiveWith(t, opts, func(opts *litequeue.Options) (*litequeue.Queue, error) {
		return litequeue.Open(filepath.Join(t.TempDir(), "q.db"), opts)
	})
}

// openLiveWith makes a liveQueue with open, which opens the queue on
// either backend with the options given.
func openLiveWith(t *testing.T, opts *litequeue.Options, open func(*litequeue.Options) (*litequeue.Queue, error)) *liveQueue {
	t.Helper()
	lq := &liveQueue{clock: clock.NewMock(), evs: make(chan litequeue.Event, 1000)}
	lq.clock.Set(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	if opts == nil {
		opts = &litequeue.Options{}
	}
	opts.Clock, opts.PollInterval = lq.clock, -1
	opts.OnEvent = func(e litequeue.Event) { lq.evs <- e }
	q, err := open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { q.Close() })
	lq.q = q
	return lq
}

// waitEvent waits (at most 10s of real time) for an event of type typ about
// job id (any job when id is 0), skipping others.
func (lq *liveQueue) waitEvent(t *testing.T, typ litequeue.EventType, id int64) litequeue.Event {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-lq.evs:
			if e.Type == typ && (id == 0 || e.JobID == id) {
				return e
			}
		case <-timeout:
			t.Fatalf("no %s event for job %d within 10s", typ, id)
		}
	}
}

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

// rowOf returns the table row of the page whose header cell links name.
func rowOf(t *testing.T, body, name string) string {
	t.Helper()
	for _, row := range strings.Split(body, "<tr>") {
		if strings.Contains(row, `<th scope="row"><a href="/jobs?queue=`+url.QueryEscape(name)+`">`) {
			row, _, _ = strings.Cut(row, "</tr>")
			return row
		}
	}
	t.Fatalf("no row of queue %q in\n%s", name, body)
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
	srv := httptest.NewServer(web.Handler(f.q, nil))
	defer closeServer(srv)
	c := client(t)

	code, body, _ := get(t, c, srv.URL+"/queues")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `href="/queues" aria-current="page"`, "Queues is in the nav")
	def := rowOf(t, body, "default")
	require.Contains(t, def, `data-live="default/state" data-live-class="state">active<`)
	require.Regexp(t, `data-live="default/scheduled">1<`, def)
	require.Regexp(t, `data-live="default/dead">1<`, def)
	require.Contains(t, def, `action="/queues/pause"`)
	media := rowOf(t, body, "media")
	require.Contains(t, media, `>paused<`)
	require.Contains(t, media, "since 2026-03-01 12:00:00.000 UTC", "paused at the queue's clock")
	require.Regexp(t, `data-live="media/ready">2<`, media)
	require.Contains(t, media, `action="/queues/resume"`)
	require.NotContains(t, media, `action="/queues/pause"`)
	idle := rowOf(t, body, "idle")
	require.Contains(t, idle, `>paused<`, "a paused queue without jobs is listed")
	require.Contains(t, idle, `action="/queues/resume"`)
	require.Less(t, strings.Index(body, "default"), strings.Index(body, `queue=idle`), "sorted by name")
	require.Less(t, strings.Index(body, `queue=idle`), strings.Index(body, `queue=media`), "sorted by name")

	_, body, _ = get(t, c, srv.URL+"/")
	require.Regexp(t, `data-live="media/paused">paused</a>`, rowOf(t, body, "media"), "the overview marks a paused queue")
	require.Regexp(t, `data-live="default/paused"></a>`, rowOf(t, body, "default"), "and only a paused one")
	rowOf(t, body, "idle")
}

func TestPauseFromTheQueuesPageStopsClaimsUntilResume(t *testing.T) {
	lq := openLive(t, nil)
	ctx := context.Background()
	litequeue.Register(lq.q, func(ctx context.Context, d *litequeue.Delivery[Email]) error { return nil })
	litequeue.Register(lq.q, func(ctx context.Context, d *litequeue.Delivery[Resize]) error { return nil })
	require.NoError(t, lq.q.Start(ctx))
	defer lq.q.Stop(ctx)
	srv := httptest.NewServer(web.Handler(lq.q, nil))
	defer closeServer(srv)
	c := client(t)
	_, body, _ := get(t, c, srv.URL+"/queues")
	tok := csrfOf(t, body)

	code, _, h := post(t, c, srv.URL+"/queues/pause", url.Values{"csrf": {tok}, "queue": {"default"}}, "")
	require.Equal(t, http.StatusSeeOther, code)
	require.True(t, strings.HasPrefix(h.Get("Location"), "/queues?done="), h.Get("Location"))
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

	_, body, _ = get(t, c, srv.URL+h.Get("Location"))
	require.Contains(t, body, `Queue &#34;default&#34; paused: no process starts its jobs`, "the flash states the effect")
	require.Contains(t, rowOf(t, body, "default"), `action="/queues/resume"`)

	code, _, _ = post(t, c, srv.URL+"/queues/resume", url.Values{"csrf": {tok}, "queue": {"default"}}, "")
	require.Equal(t, http.StatusSeeOther, code)
	lq.waitEvent(t, litequeue.EventSucceeded, held)
	require.Empty(t, pausedQueues(t, lq.q))

	// Pausing by name a queue that has no jobs yet.
	code, _, _ = post(t, c, srv.URL+"/queues/pause", url.Values{"csrf": {tok}, "queue": {"later"}}, "")
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, []string{"later"}, pausedQueues(t, lq.q))
	// A name the queue refuses is a bad request, and pauses nothing.
	code, body, _ = post(t, c, srv.URL+"/queues/pause", url.Values{"csrf": {tok}, "queue": {""}}, "")
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, "empty queue name")
	code, _, _ = post(t, c, srv.URL+"/queues/stop", url.Values{"csrf": {tok}, "queue": {"default"}}, "")
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, []string{"later"}, pausedQueues(t, lq.q))
}

func TestQueueActionsAreRefusedReadOnlyAndWithoutCSRF(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	_, err := f.q.Enqueue(ctx, Email{To: "a"}, nil)
	require.NoError(t, err)
	require.NoError(t, f.q.Pause(ctx, "paused"))

	ro := httptest.NewServer(web.Handler(f.q, &web.Options{ReadOnly: true}))
	defer closeServer(ro)
	c := client(t)
	for _, p := range []string{"/queues", "/"} {
		code, body, _ := get(t, c, ro.URL+p)
		require.Equal(t, 200, code)
		require.NotContains(t, body, `method="post"`, p)
		require.NotContains(t, body, "<button", p)
	}
	_, body, _ := get(t, c, ro.URL+"/queues")
	require.Contains(t, rowOf(t, body, "paused"), ">paused<", "read-only still shows the state")
	for _, a := range []string{"pause", "resume"} {
		code, _, _ := post(t, c, ro.URL+"/queues/"+a, url.Values{"queue": {"default"}, "csrf": {strings.Repeat("0", 64)}}, "")
		require.Equal(t, http.StatusForbidden, code, a)
		code, _, _ = post(t, c, ro.URL+"/queues/"+a, url.Values{"queue": {"paused"}}, "")
		require.Equal(t, http.StatusForbidden, code, a)
	}
	require.Equal(t, []string{"paused"}, pausedQueues(t, f.q), "read-only changed nothing")

	rw := httptest.NewServer(web.Handler(f.q, nil))
	defer closeServer(rw)
	c = client(t)
	_, body, _ = get(t, c, rw.URL+"/queues")
	tok := csrfOf(t, body)
	code, _, _ := post(t, c, rw.URL+"/queues/pause", url.Values{"queue": {"default"}}, "")
	require.Equal(t, http.StatusForbidden, code, "no CSRF token")
	code, _, _ = post(t, c, rw.URL+"/queues/pause", url.Values{"queue": {"default"}, "csrf": {strings.Repeat("0", 64)}}, "")
	require.Equal(t, http.StatusForbidden, code, "wrong CSRF token")
	code, _, _ = post(t, c, rw.URL+"/queues/pause", url.Values{"queue": {"default"}, "csrf": {tok}}, "https://evil.example")
	require.Equal(t, http.StatusForbidden, code, "cross-origin")
	code, _, _ = post(t, client(t), rw.URL+"/queues/resume", url.Values{"queue": {"paused"}, "csrf": {tok}}, "")
	require.Equal(t, http.StatusForbidden, code, "a token without its cookie")
	code, _, _ = get(t, c, rw.URL+"/queues/pause?queue=default")
	require.Equal(t, http.StatusMethodNotAllowed, code, "no action on GET")
	require.Equal(t, []string{"paused"}, pausedQueues(t, f.q), "refused requests changed nothing")
}

func TestQueueNamesAreEscaped(t *testing.T) {
	const evil = `<script>alert("q")</script>`
	f := newFixture(t, nil)
	ctx := context.Background()
	require.NoError(t, f.q.Pause(ctx, evil))
	srv := httptest.NewServer(web.Handler(f.q, nil))
	defer closeServer(srv)
	c := client(t)
	for _, p := range []string{"/queues", "/"} {
		_, body, _ := get(t, c, srv.URL+p)
		require.NotContains(t, body, "<script>alert", p)
		require.Contains(t, body, "&lt;script&gt;alert", p)
	}
	_, body, _ := get(t, c, srv.URL+"/queues")
	code, _, h := post(t, c, srv.URL+"/queues/resume", url.Values{"queue": {evil}, "csrf": {csrfOf(t, body)}}, "")
	require.Equal(t, http.StatusSeeOther, code)
	require.Empty(t, pausedQueues(t, f.q))
	_, body, _ = get(t, c, srv.URL+h.Get("Location"))
	require.NotContains(t, body, "<script>alert", "the flash")
	require.Regexp(t, regexp.MustCompile(`Queue &#34;&lt;script&gt;alert\(\\&#34;q\\&#34;\)&lt;/script&gt;&#34; resumed`), body)
}

func TestLiveRefreshCarriesThePausedState(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	_, err := f.q.Enqueue(ctx, Email{To: "a"}, nil)
	require.NoError(t, err)
	srv := httptest.NewServer(web.Handler(f.q, &web.Options{RefreshInterval: 20 * time.Millisecond}))
	defer closeServer(srv)
	reqCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(reqCtx, "GET", srv.URL+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	evs := readEvents(bufio.NewReader(resp.Body))

	ev := next(t, evs)
	require.Equal(t, "summary", ev.name)
	require.Equal(t, "", ev.data["default/paused"])
	require.Equal(t, "active", ev.data["default/state"])
	require.NoError(t, f.q.Pause(ctx, "default"))
	require.NoError(t, f.q.Pause(ctx, "idle"))
	ev = next(t, evs) // sent only when something changed
	require.Equal(t, "paused", ev.data["default/paused"])
	require.Equal(t, "paused", ev.data["default/state"])
	require.Equal(t, "paused", ev.data["idle/state"], "a paused queue without jobs")
	require.Equal(t, "1", ev.data["default/ready"])
}
