package web_test

import (
	"context"
	"html"
	"net/http"
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
	return rowLinking(t, body, "/schedules/"+url.PathEscape(name))
}

func TestSchedulesPageListsTimingStateAndNextRun(t *testing.T) {
	f := newFixture(t, nil) // the clock says 2026-03-01 12:00 UTC
	registerSchedules(t, f.q)
	d := serve(t, web.Handler(f.q, nil))

	body := d.open("/schedules")
	require.Contains(t, body, `href="/schedules" aria-current="page"`, "Schedules is in the nav")
	n := scheduleRowOf(t, body, nightly)
	require.Contains(t, n, "<code>cron 0 3 * * *</code>")
	require.Contains(t, n, "Europe/Berlin")
	require.Contains(t, n, `email<br><span class="hint">on <a href="/jobs?queue=default">default</a>`)
	require.Contains(t, n, `<span class="state active">active</span>`)
	// 03:00 in Berlin (CET, UTC+1) is 02:00 UTC, the next morning.
	require.Contains(t, n, "2026-03-02 02:00:00.000 UTC")
	require.Contains(t, n, "in 14h")
	require.Contains(t, n, `action="/schedules/trigger"`)
	require.Contains(t, n, `action="/schedules/pause"`)
	h := scheduleRowOf(t, body, hourly)
	require.Contains(t, h, "<code>every 1h0m0s</code>")
	require.Contains(t, h, "2026-03-01 13:00:00.000 UTC", "an hour after registration, on the queue's clock")
	require.Contains(t, h, "on <a href=\"/jobs?queue=media\">media</a>")

	// The clock passes the next run with no process running the schedule.
	f.clock.Add(2 * time.Hour)
	_, body, _ = d.get("/schedules")
	h = scheduleRowOf(t, body, hourly)
	require.Contains(t, h, `<span class="state overdue">overdue</span>`)
	require.Contains(t, h, "2026-03-01 13:00:00.000 UTC", "the stored next run first, though past")
	require.Contains(t, h, "1h ago")
}

func TestScheduleDetailShowsNextRunsAndHistory(t *testing.T) {
	f := newFixture(t, nil)
	registerSchedules(t, f.q)
	d := serve(t, web.Handler(f.q, nil))

	_, list, _ := d.get("/schedules")
	require.Contains(t, list, `href="/schedules/reports%2Fnightly%20%3Fall"`, "the name is one escaped path segment")
	code, body, _ := d.get("/schedules/reports%2Fnightly%20%3Fall")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `<code class="name">reports/nightly ?all</code>`)
	require.Contains(t, body, "<dd><code>cron 0 3 * * *</code> in Europe/Berlin</dd>")
	require.Contains(t, body, "<dd>skip</dd>", "the overlap policy")
	for i, want := range []string{"2026-03-02 02:00:00.000 UTC\">in 14h<", "2026-03-03 02:00:00.000 UTC\">in 1d14h<", "2026-03-04 02:00:00.000 UTC\">in 2d14h<",
		"2026-03-05 02:00:00.000 UTC\">in 3d14h<", "2026-03-06 02:00:00.000 UTC\">in 4d14h<"} {
		require.Contains(t, body, `title="`+want, "next run %d: relative, the absolute time on hover", i)
	}
	require.Equal(t, 5, strings.Count(body, `<li><span class="t">`), "five next runs")
	require.Contains(t, body, "2026-03-02 03:00 CET", "the run in the schedule's zone")
	require.Contains(t, body, `<span class="event registered">registered</span>`)
	require.Contains(t, body, `&#34;to&#34;: &#34;boss@example.com&#34;`, "the job's payload")

	code, _, _ = d.get("/schedules/nope")
	require.Equal(t, http.StatusNotFound, code)
	code, _, hd := d.get("/schedules/")
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "/schedules", hd.Get("Location"))
}

// named is the form of a schedule action on name, with extra keys and
// values.
func named(name string, extra ...string) url.Values {
	form := url.Values{"name": {name}}
	for i := 0; i+1 < len(extra); i += 2 {
		form.Set(extra[i], extra[i+1])
	}
	return form
}

func TestScheduleActionsChangeTheDatabase(t *testing.T) {
	f := newFixture(t, nil)
	registerSchedules(t, f.q)
	ctx := context.Background()
	d := serve(t, web.Handler(f.q, nil))
	d.open("/schedules")

	// Trigger now enqueues a job of the schedule, and the pages link it.
	f.clock.Add(time.Minute)
	loc, body := d.act("/schedules/trigger", named(nightly))
	u, err := url.Parse(loc)
	require.NoError(t, err)
	require.Equal(t, "/schedules", u.Path)
	id, err := strconv.ParseInt(u.Query().Get("job"), 10, 64)
	require.NoError(t, err)
	j, err := f.q.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "email", j.Kind)
	require.Equal(t, litequeue.StateReady, j.State)
	require.JSONEq(t, `{"to":"boss@example.com"}`, string(j.Payload))
	s, _ := schedule(t, f.q, nightly)
	require.Equal(t, id, s.LastJobID)
	require.Equal(t, "2026-03-02 02:00:00 +0000 UTC", s.NextRun.UTC().String(), "the next run stays")
	require.Contains(t, body, "Schedule &#34;reports/nightly ?all&#34; triggered: enqueued job "+itoa(id))
	require.Contains(t, body, `<a href="/jobs/`+itoa(id)+`">Open job `+itoa(id)+`</a>`)
	require.Contains(t, scheduleRowOf(t, body, nightly), `<a href="/jobs/`+itoa(id)+`">job `+itoa(id)+`</a> pending`)
	_, body, _ = d.get("/schedules/" + url.PathEscape(nightly))
	require.Contains(t, body, `<span class="event triggered">triggered</span>`)
	require.Contains(t, body, `<td data-label="Job"><a href="/jobs/`+itoa(id)+`">`+itoa(id)+`</a></td>`, "the history links the job")

	// Pause and resume, from the schedule's page: back to it.
	loc, body = d.act("/schedules/pause", named(nightly, "from", "detail"))
	require.True(t, strings.HasPrefix(loc, "/schedules/reports%2Fnightly%20%3Fall?done="), loc)
	s, _ = schedule(t, f.q, nightly)
	require.True(t, s.Paused)
	require.Contains(t, body, `<span class="state paused">paused</span>`)
	require.Contains(t, body, "None while the schedule is paused")
	require.Contains(t, body, `action="/schedules/resume"`)
	require.Contains(t, body, `<span class="event paused">paused</span>`)
	f.clock.Add(3 * 24 * time.Hour)
	d.act("/schedules/resume", named(nightly))
	s, _ = schedule(t, f.q, nightly)
	require.False(t, s.Paused)
	require.Equal(t, "2026-03-05 02:00:00 +0000 UTC", s.NextRun.UTC().String(), "resumed from the next run after now")

	// Remove asks first, then removes.
	code, body, _ := d.send("/schedules/remove", named(hourly))
	require.Equal(t, 200, code)
	require.Contains(t, body, "Remove schedule <code class=\"name\">hourly-sync</code>?")
	require.Contains(t, body, `name="confirm" value="yes"`)
	_, ok := schedule(t, f.q, hourly)
	require.True(t, ok, "asking removes nothing")
	loc, _ = d.act("/schedules/remove", named(hourly, "confirm", "yes"))
	require.True(t, strings.HasPrefix(loc, "/schedules?done="))
	_, ok = schedule(t, f.q, hourly)
	require.False(t, ok)
	code, _, _ = d.get("/schedules/" + hourly)
	require.Equal(t, http.StatusNotFound, code)

	// Unknown schedules and actions.
	for _, a := range []string{"trigger", "pause", "resume", "remove"} {
		code, body, _ = d.send("/schedules/"+a, named("nope", "confirm", "yes"))
		require.Equal(t, http.StatusNotFound, code, a)
		require.Contains(t, body, "nope", a)
	}
	code, _, _ = d.send("/schedules/explode", named(nightly))
	require.Equal(t, http.StatusNotFound, code)
	code, _, _ = d.send("/schedules/trigger", named(""))
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

	ro := serve(t, web.Handler(f.q, &web.Options{ReadOnly: true}))
	ro.requireReadOnly("/schedules", "/schedules/"+url.PathEscape(nightly))
	for _, a := range []string{"trigger", "pause", "remove"} {
		code, _, _ := ro.post("/schedules/"+a, named(nightly, "confirm", "yes"), "")
		require.Equal(t, http.StatusForbidden, code, a)
	}
	unchanged()

	rw := serve(t, web.Handler(f.q, nil))
	rw.open("/schedules")
	for _, a := range []string{"trigger", "pause", "remove"} {
		rw.requireForgeriesRefused("/schedules/"+a, named(nightly, "confirm", "yes"))
	}
	unchanged()
}

func TestScheduleNamesAreEscaped(t *testing.T) {
	const evil = `<script>alert("s")</script>`
	f := newFixture(t, nil)
	_, err := f.q.RegisterSchedule(context.Background(), litequeue.Schedule{Name: evil, Every: time.Hour, Job: Email{To: evil}})
	require.NoError(t, err)
	d := serve(t, web.Handler(f.q, nil))
	d.open("/schedules")
	for _, p := range []string{"/schedules", "/schedules/" + url.PathEscape(evil)} {
		code, body, _ := d.get(p)
		require.Equal(t, 200, code, p)
		require.NotContains(t, body, "<script>alert", p)
		require.Contains(t, body, "&lt;script&gt;alert", p)
	}
	code, body, _ := d.send("/schedules/remove", named(evil))
	require.Equal(t, 200, code)
	require.NotContains(t, body, "<script>alert", "the confirmation")
	require.Contains(t, body, "&lt;script&gt;alert")
	_, body = d.act("/schedules/trigger", named(evil))
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
	d := serve(t, web.Handler(f.q, nil))
	body := d.open("/schedules")
	links := regexp.MustCompile(`<th scope="row"><a href="([^"]+)">`).FindAllStringSubmatch(body, -1)
	require.Len(t, links, len(names))
	seen := map[string]bool{}
	for _, m := range links {
		href := html.UnescapeString(m[1])
		code, page, _ := d.get(href)
		require.Equal(t, 200, code, href)
		name := html.UnescapeString(regexp.MustCompile(`<code class="name">([^<]*)</code>`).FindStringSubmatch(page)[1])
		seen[name] = true
		_, page = d.act("/schedules/pause", named(name, "from", "detail"))
		require.Contains(t, page, `<code class="name">`+html.EscapeString(name)+`</code> <span class="state paused">`, "back on %q's page, paused", name)
	}
	for _, n := range names {
		require.True(t, seen[n], "%q has a page", n)
	}
}
