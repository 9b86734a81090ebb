package web_test

import (
	"context"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/web"
)

// Two schedules: a cron schedule in Berlin time whose name holds a slash, a
// space and a question mark, and an hourly interval.
const (
	nightly = "reports/nightly ?all"
	hourly  = "hourly-sync"
)

func registerSchedules(t *testing.T, q *litequeue.Queue) {
	t.Helper()
	ctx := context.Background()
	_, err := q.RegisterSchedule(ctx, litequeue.Schedule{Name: nightly, Cron: "0 3 * * *", TimeZone: "Europe/Berlin",
		Job: Email{To: "boss@example.com"}, Overlap: litequeue.OverlapSkip})
	require.NoError(t, err)
	_, err = q.RegisterSchedule(ctx, litequeue.Schedule{Name: hourly, Every: time.Hour, Job: Resize{Image: "feed.png"}})
	require.NoError(t, err)
}

func schedule(t *testing.T, q *litequeue.Queue, name string) (litequeue.ScheduleInfo, bool) {
	t.Helper()
	all, err := q.Schedules(context.Background())
	require.NoError(t, err)
	for _, s := range all {
		if s.Name == name {
			return s, true
		}
	}
	return litequeue.ScheduleInfo{}, false
}

// scheduleRowOf returns the row of the schedules list for name.
func scheduleRowOf(t *testing.T, body, name string) string {
	t.Helper()
	for _, row := range strings.Split(body, "<tr>") {
		if strings.Contains(row, `<th scope="row"><a href="/schedules/`+url.PathEscape(name)+`">`) {
			row, _, _ = strings.Cut(row, "</tr>")
			return row
		}
	}
	t.Fatalf("no row of schedule %q in\n%s", name, body)
	return ""
}

func TestSchedulesPageListsTimingStateAndNextRun(t *testing.T) {
	f := newFixture(t, nil) // the clock says 2026-03-01 12:00 UTC
	registerSchedules(t, f.q)
	srv := httptest.NewServer(web.Handler(f.q, nil))
	defer closeServer(srv)
	c := client(t)

	code, body, _ := get(t, c, srv.URL+"/schedules")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `href="/schedules" aria-current="page"`, "Schedules is in the nav")
	n := scheduleRowOf(t, body, nightly)
	require.Contains(t, n, "<code>cron 0 3 * * *</code>")
	require.Contains(t, n, "Europe/Berlin")
	require.Contains(t, n, `email<br><span class="hint">on <a href="/jobs?queue=default">default</a>`)
	require.Contains(t, n, `<span class="state active">active</span>`)
	// 03:00 in Berlin (CET, UTC+1) is 02:00 UTC, the next morning.
	require.Contains(t, n, "2026-03-02 02:00:00.000 UTC")
	require.Contains(t, n, "in 14h0m0s")
	require.Contains(t, n, `action="/schedules/trigger"`)
	require.Contains(t, n, `action="/schedules/pause"`)
	h := scheduleRowOf(t, body, hourly)
	require.Contains(t, h, "<code>every 1h0m0s</code>")
	require.Contains(t, h, "2026-03-01 13:00:00.000 UTC", "an hour after registration, on the queue's clock")
	require.Contains(t, h, "on <a href=\"/jobs?queue=media\">media</a>")

	// The clock passes the next run with no process running the schedule.
	f.clock.Add(2 * time.Hour)
	_, body, _ = get(t, c, srv.URL+"/schedules")
	h = scheduleRowOf(t, body, hourly)
	require.Contains(t, h, `<span class="state overdue">overdue</span>`)
	require.Contains(t, h, "2026-03-01 13:00:00.000 UTC", "the stored next run first, though past")
	require.Contains(t, h, "1h0m0s ago")
}

func TestScheduleDetailShowsNextRunsAndHistory(t *testing.T) {
	f := newFixture(t, nil)
	registerSchedules(t, f.q)
	srv := httptest.NewServer(web.Handler(f.q, nil))
	defer closeServer(srv)
	c := client(t)

	_, list, _ := get(t, c, srv.URL+"/schedules")
	require.Contains(t, list, `href="/schedules/reports%2Fnightly%20%3Fall"`, "the name is one escaped path segment")
	code, body, _ := get(t, c, srv.URL+"/schedules/reports%2Fnightly%20%3Fall")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `<code class="name">reports/nightly ?all</code>`)
	require.Contains(t, body, "<dd><code>cron 0 3 * * *</code> in Europe/Berlin</dd>")
	require.Contains(t, body, "<dd>skip</dd>", "the overlap policy")
	for i, want := range []string{"2026-03-02 02:00:00.000 UTC", "2026-03-03 02:00:00.000 UTC", "2026-03-04 02:00:00.000 UTC",
		"2026-03-05 02:00:00.000 UTC", "2026-03-06 02:00:00.000 UTC"} {
		require.Contains(t, body, `<li><span class="t">`+want+`</span>`, "next run %d", i)
	}
	require.Equal(t, 5, strings.Count(body, `<li><span class="t">`), "five next runs")
	require.Contains(t, body, "2026-03-02 03:00 CET", "the run in the schedule's zone")
	require.Contains(t, body, `<span class="event registered">registered</span>`)
	require.Contains(t, body, `&#34;to&#34;: &#34;boss@example.com&#34;`, "the job's payload")

	code, _, _ = get(t, c, srv.URL+"/schedules/nope")
	require.Equal(t, http.StatusNotFound, code)
	code, _, hd := get(t, c, srv.URL+"/schedules/")
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "/schedules", hd.Get("Location"))
}

func TestScheduleActionsChangeTheDatabase(t *testing.T) {
	f := newFixture(t, nil)
	registerSchedules(t, f.q)
	ctx := context.Background()
	srv := httptest.NewServer(web.Handler(f.q, nil))
	defer closeServer(srv)
	c := client(t)
	_, body, _ := get(t, c, srv.URL+"/schedules")
	tok := csrfOf(t, body)
	act := func(action, name string, extra ...string) (int, string, http.Header) {
		form := url.Values{"csrf": {tok}, "name": {name}}
		for i := 0; i+1 < len(extra); i += 2 {
			form.Set(extra[i], extra[i+1])
		}
		return post(t, c, srv.URL+"/schedules/"+action, form, "")
	}

	// Trigger now enqueues a job of the schedule, and the pages link it.
	f.clock.Add(time.Minute)
	code, _, h := act("trigger", nightly)
	require.Equal(t, http.StatusSeeOther, code)
	loc, err := url.Parse(h.Get("Location"))
	require.NoError(t, err)
	require.Equal(t, "/schedules", loc.Path)
	id, err := strconv.ParseInt(loc.Query().Get("job"), 10, 64)
	require.NoError(t, err)
	j, err := f.q.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "email", j.Kind)
	require.Equal(t, litequeue.StateReady, j.State)
	require.JSONEq(t, `{"to":"boss@example.com"}`, string(j.Payload))
	s, _ := schedule(t, f.q, nightly)
	require.Equal(t, id, s.LastJobID)
	require.Equal(t, "2026-03-02 02:00:00 +0000 UTC", s.NextRun.UTC().String(), "the next run stays")
	_, body, _ = get(t, c, srv.URL+loc.String())
	require.Contains(t, body, "Schedule &#34;reports/nightly ?all&#34; triggered: enqueued job "+itoa(id))
	require.Contains(t, body, `<a href="/jobs/`+itoa(id)+`">Open job `+itoa(id)+`</a>`)
	require.Contains(t, scheduleRowOf(t, body, nightly), `<a href="/jobs/`+itoa(id)+`">job `+itoa(id)+`</a> pending`)
	_, body, _ = get(t, c, srv.URL+"/schedules/"+url.PathEscape(nightly))
	require.Contains(t, body, `<span class="event triggered">triggered</span>`)
	require.Contains(t, body, `<td data-label="Job"><a href="/jobs/`+itoa(id)+`">`+itoa(id)+`</a></td>`, "the history links the job")

	// Pause and resume, from the schedule's page: back to it.
	code, _, h = act("pause", nightly, "from", "detail")
	require.Equal(t, http.StatusSeeOther, code)
	require.True(t, strings.HasPrefix(h.Get("Location"), "/schedules/reports%2Fnightly%20%3Fall?done="), h.Get("Location"))
	s, _ = schedule(t, f.q, nightly)
	require.True(t, s.Paused)
	_, body, _ = get(t, c, srv.URL+h.Get("Location"))
	require.Contains(t, body, `<span class="state paused">paused</span>`)
	require.Contains(t, body, "None while the schedule is paused")
	require.Contains(t, body, `action="/schedules/resume"`)
	require.Contains(t, body, `<span class="event paused">paused</span>`)
	f.clock.Add(3 * 24 * time.Hour)
	code, _, _ = act("resume", nightly)
	require.Equal(t, http.StatusSeeOther, code)
	s, _ = schedule(t, f.q, nightly)
	require.False(t, s.Paused)
	require.Equal(t, "2026-03-05 02:00:00 +0000 UTC", s.NextRun.UTC().String(), "resumed from the next run after now")

	// Remove asks first, then removes.
	code, body, _ = act("remove", hourly)
	require.Equal(t, 200, code)
	require.Contains(t, body, "Remove schedule <code class=\"name\">hourly-sync</code>?")
	require.Contains(t, body, `name="confirm" value="yes"`)
	_, ok := schedule(t, f.q, hourly)
	require.True(t, ok, "asking removes nothing")
	code, _, h = act("remove", hourly, "confirm", "yes")
	require.Equal(t, http.StatusSeeOther, code)
	require.True(t, strings.HasPrefix(h.Get("Location"), "/schedules?done="))
	_, ok = schedule(t, f.q, hourly)
	require.False(t, ok)
	code, _, _ = get(t, c, srv.URL+"/schedules/"+hourly)
	require.Equal(t, http.StatusNotFound, code)

	// Unknown schedules and actions.
	for _, a := range []string{"trigger", "pause", "resume", "remove"} {
		code, body, _ = act(a, "nope", "confirm", "yes")
		require.Equal(t, http.StatusNotFound, code, a)
		require.Contains(t, body, "nope", a)
	}
	code, _, _ = act("explode", nightly)
	require.Equal(t, http.StatusNotFound, code)
	code, _, _ = act("trigger", "")
	require.Equal(t, http.StatusBadRequest, code)
	n, err := f.q.CountJobs(ctx, litequeue.JobQuery{}, 0)
	require.NoError(t, err)
	require.Equal(t, 1, n, "only the one trigger enqueued a job")
}

func TestScheduleActionsAreRefusedReadOnlyAndWithoutCSRF(t *testing.T) {
	f := newFixture(t, nil)
	registerSchedules(t, f.q)
	ctx := context.Background()
	unchanged := func() {
		t.Helper()
		n, err := f.q.CountJobs(ctx, litequeue.JobQuery{}, 0)
		require.NoError(t, err)
		require.Zero(t, n, "no job was triggered")
		s, ok := schedule(t, f.q, nightly)
		require.True(t, ok, "not removed")
		require.False(t, s.Paused, "not paused")
	}

	ro := httptest.NewServer(web.Handler(f.q, &web.Options{ReadOnly: true}))
	defer closeServer(ro)
	c := client(t)
	for _, p := range []string{"/schedules", "/schedules/" + url.PathEscape(nightly)} {
		code, body, _ := get(t, c, ro.URL+p)
		require.Equal(t, 200, code, p)
		require.NotContains(t, body, `method="post"`, p)
		require.NotContains(t, body, "<button", p)
	}
	for _, a := range []string{"trigger", "pause", "remove"} {
		code, _, _ := post(t, c, ro.URL+"/schedules/"+a, url.Values{"name": {nightly}, "confirm": {"yes"}}, "")
		require.Equal(t, http.StatusForbidden, code, a)
	}
	unchanged()

	rw := httptest.NewServer(web.Handler(f.q, nil))
	defer closeServer(rw)
	c = client(t)
	_, body, _ := get(t, c, rw.URL+"/schedules")
	tok := csrfOf(t, body)
	for _, a := range []string{"trigger", "pause", "remove"} {
		code, _, _ := post(t, c, rw.URL+"/schedules/"+a, url.Values{"name": {nightly}, "confirm": {"yes"}}, "")
		require.Equal(t, http.StatusForbidden, code, "%s without a token", a)
		code, _, _ = post(t, c, rw.URL+"/schedules/"+a, url.Values{"name": {nightly}, "confirm": {"yes"}, "csrf": {strings.Repeat("0", 64)}}, "")
		require.Equal(t, http.StatusForbidden, code, "%s with a wrong token", a)
		code, _, _ = post(t, c, rw.URL+"/schedules/"+a, url.Values{"name": {nightly}, "confirm": {"yes"}, "csrf": {tok}}, "https://evil.example")
		require.Equal(t, http.StatusForbidden, code, "%s cross-origin", a)
	}
	unchanged()
}

func TestScheduleNamesAreEscaped(t *testing.T) {
	const evil = `<script>alert("s")</script>`
	f := newFixture(t, nil)
	_, err := f.q.RegisterSchedule(context.Background(), litequeue.Schedule{Name: evil, Every: time.Hour, Job: Email{To: evil}})
	require.NoError(t, err)
	srv := httptest.NewServer(web.Handler(f.q, nil))
	defer closeServer(srv)
	c := client(t)
	_, body, _ := get(t, c, srv.URL+"/schedules")
	tok := csrfOf(t, body)
	pages := []string{"/schedules", "/schedules/" + url.PathEscape(evil)}
	for _, p := range pages {
		code, body, _ := get(t, c, srv.URL+p)
		require.Equal(t, 200, code, p)
		require.NotContains(t, body, "<script>alert", p)
		require.Contains(t, body, "&lt;script&gt;alert", p)
	}
	code, body, _ := post(t, c, srv.URL+"/schedules/remove", url.Values{"csrf": {tok}, "name": {evil}}, "")
	require.Equal(t, 200, code)
	require.NotContains(t, body, "<script>alert", "the confirmation")
	require.Contains(t, body, "&lt;script&gt;alert")
	code, _, h := post(t, c, srv.URL+"/schedules/trigger", url.Values{"csrf": {tok}, "name": {evil}}, "")
	require.Equal(t, http.StatusSeeOther, code)
	_, body, _ = get(t, c, srv.URL+h.Get("Location"))
	require.NotContains(t, body, "<script>alert", "the flash")
	require.Contains(t, body, "&lt;script&gt;alert")
}

// A schedule's name may hold slashes, dot segments and URL syntax: every
// schedule's link from the list opens its own page, and an action on the
// page comes back to it.
func TestSchedulePagesTakeAnyName(t *testing.T) {
	f := newFixture(t, nil)
	names := []string{"a//b", "x/./y", "../up", "/lead", "trail/", "%41", "q?#&", ".", ".."}
	for _, n := range names {
		_, err := f.q.RegisterSchedule(context.Background(), litequeue.Schedule{Name: n, Every: time.Hour, Job: Email{To: "x"}})
		require.NoError(t, err)
	}
	srv := httptest.NewServer(web.Handler(f.q, nil))
	defer closeServer(srv)
	c := client(t)
	_, body, _ := get(t, c, srv.URL+"/schedules")
	tok := csrfOf(t, body)
	links := regexp.MustCompile(`<th scope="row"><a href="([^"]+)">`).FindAllStringSubmatch(body, -1)
	require.Len(t, links, len(names))
	seen := map[string]bool{}
	for _, m := range links {
		href := html.UnescapeString(m[1])
		code, page, _ := get(t, c, srv.URL+href)
		require.Equal(t, 200, code, href)
		name := html.UnescapeString(regexp.MustCompile(`<code class="name">([^<]*)</code>`).FindStringSubmatch(page)[1])
		seen[name] = true
		code, _, h := post(t, c, srv.URL+"/schedules/pause", url.Values{"csrf": {tok}, "name": {name}, "from": {"detail"}}, "")
		require.Equal(t, http.StatusSeeOther, code)
		back, err := url.Parse(h.Get("Location"))
		require.NoError(t, err)
		require.NotEmpty(t, back.Query().Get("done"))
		code, page, _ = get(t, c, srv.URL+back.String())
		require.Equal(t, 200, code, back)
		require.Contains(t, page, `<code class="name">`+html.EscapeString(name)+`</code> <span class="state paused">`, "back on %q's page, paused", name)
	}
	for _, n := range names {
		require.True(t, seen[n], "%q has a page", n)
	}
}
