package web_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/web"
	"github.com/stretchr/testify/require"
)

// envRequireBrowser makes the browser tests fail instead of skipping when
// Chromium is missing; .ci/run sets it.
const envRequireBrowser = "LITEQUEUE_REQUIRE_BROWSER"

// envScreenshots, when set, is a directory where the browser tests save
// their screenshots too (they always save them under the test's temp dir).
const envScreenshots = "LITEQUEUE_SCREENSHOTS"

// browser starts headless Chromium for t, or skips t (fails it when
// LITEQUEUE_REQUIRE_BROWSER=1) when Chromium is not installed.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if path, err = exec.LookPath("chromium-browser"); err != nil {
			msg := "the browser tests need Chromium: install the Debian package (apt-get install -y chromium)"
			if os.Getenv(envRequireBrowser) == "1" {
				t.Fatal(msg + "; " + envRequireBrowser + "=1 forbids skipping")
			}
			t.Skip(msg)
		}
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")), "start Chromium")
	return ctx
}

// step runs actions with a time limit.
func step(t *testing.T, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(c, actions...))
}

func run[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(c, a)
	require.NoError(t, err)
	return v
}

// clickAndLoad clicks sel and waits for the page it leads to.
func clickAndLoad(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	run(t, ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS(sel))))
}

// shoot saves a full-page PNG of the current page as name.
func shoot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png := run(t, ctx, chromedp.FullScreenshot(100))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
	if extra := os.Getenv(envScreenshots); extra != "" {
		require.NoError(t, os.MkdirAll(extra, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(extra, name), png, 0o644))
	}
}

const xss = `<script>window.__xss=1</script><img src=x onerror="window.__xss=2">`

func TestDashboardInABrowser(t *testing.T) {
	ctx := browser(t)
	shots := t.TempDir()
	f := newFixture(t, map[string]string{
		"ann@example.com": "timeout after 310ms", "bob@example.com": "timeout after 2500ms", "cy@example.com": "timeout after 75ms",
		"dee@example.com": "smtp: 550 mailbox unavailable",
		xss:               xss,
	})
	bg := context.Background()
	for i := range 4 {
		_, err := f.q.Enqueue(bg, Email{To: fmt.Sprintf("later%d@example.com", i)}, &litequeue.EnqueueOptions{Delay: time.Hour})
		require.NoError(t, err)
	}
	resize, err := f.q.Enqueue(bg, Resize{Image: "cat.png", Width: 640}, nil)
	require.NoError(t, err)
	srv := serve(t, web.Handler(f.q, &web.Options{RefreshInterval: 100 * time.Millisecond}))

	t.Run("overview", func(t *testing.T) {
		step(t, ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("table.counts")))
		text := run(t, ctx, chromedp.Text(chromedp.CSS("table.counts")))
		require.Contains(t, text, "default")
		require.Contains(t, text, "media")
		require.Equal(t, "5", run(t, ctx, chromedp.Text(chromedp.CSS(`[data-live="default/dead"]`))))
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.CSS(".chart-box h2"))), "5 attempts, 100.0% failed", "the history chart")
		require.Positive(t, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg.chart rect.fail").length`)))
		shoot(t, ctx, shots, "overview.png")
	})

	t.Run("live refresh moves a counter", func(t *testing.T) {
		step(t, ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("table.counts")))
		require.Equal(t, "1", run(t, ctx, chromedp.Text(chromedp.CSS(`[data-live="media/ready"]`))))
		for range 2 {
			_, err := f.q.Enqueue(bg, Resize{Image: "dog.png"}, nil)
			require.NoError(t, err)
		}
		got := run(t, ctx, chromedp.Poll[bool](`document.querySelector('[data-live="media/ready"]').textContent === "3"`,
			chromedp.WithPollingTimeout(10*time.Second)))
		require.True(t, got, "the counter did not move without a reload")
		require.Equal(t, "1", run(t, ctx, chromedp.Evaluate[string](`String(performance.getEntriesByType("navigation").length)`)), "no reload")
	})

	t.Run("filter jobs", func(t *testing.T) {
		step(t, ctx, chromedp.Navigate(srv.URL+"/jobs"), chromedp.WaitVisible(chromedp.CSS("table.jobs")),
			chromedp.SetValue(chromedp.CSS(`form.filter input[name=kind]`), "resize"))
		clickAndLoad(t, ctx, `form.filter button[type=submit]`)
		kinds := run(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("table.jobs tbody tr td:nth-child(4)")].map(td => td.textContent)`))
		require.Equal(t, []string{"resize", "resize", "resize"}, kinds)
		require.Contains(t, run(t, ctx, chromedp.Evaluate[string](`location.search`)), "kind=resize")
		shoot(t, ctx, shots, "jobs.png")

		step(t, ctx, chromedp.Navigate(srv.URL+"/jobs?q=mailbox"), chromedp.WaitVisible(chromedp.CSS("table.jobs")))
		errs := run(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("table.jobs tbody td.err")].map(td => td.textContent)`))
		require.Equal(t, []string{"smtp: 550 mailbox unavailable"}, errs, "text search finds the error")
	})

	t.Run("open a job", func(t *testing.T) {
		step(t, ctx, chromedp.Navigate(srv.URL+"/jobs?state=dead&q=ann"), chromedp.WaitVisible(chromedp.CSS("table.jobs")))
		clickAndLoad(t, ctx, `table.jobs tbody tr td:nth-child(2) a`)
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.CSS("h1"))), "dead")
		payload := run(t, ctx, chromedp.Text(chromedp.CSS("pre.payload")))
		require.Contains(t, payload, `"to": "ann@example.com"`, "formatted JSON")
		require.Equal(t, 1, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg.timeline rect.attempt").length`)))
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.CSS("table.attempts"))), "timeout after 310ms")
		shoot(t, ctx, shots, "job.png")

		step(t, ctx, chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, resize)), chromedp.WaitVisible(chromedp.CSS("pre.payload")))
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.CSS("pre.payload"))), `"image": "cat.png"`)
	})

	t.Run("an XSS payload renders as text", func(t *testing.T) {
		step(t, ctx, chromedp.Navigate(srv.URL+"/jobs?q="+strings.ReplaceAll("window.__xss", ".", "%2E")), chromedp.WaitVisible(chromedp.CSS("table.jobs")))
		clickAndLoad(t, ctx, `table.jobs tbody tr td:nth-child(2) a`)
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.CSS("pre.err"))), "<script>window.__xss=1</script>")
		// encoding/json stores < and > as \u003c and \u003e; the error keeps them.
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.CSS("pre.payload"))), `\u003cimg src=x onerror=`)
		require.Equal(t, "undefined", run(t, ctx, chromedp.Evaluate[string](`typeof window.__xss`)), "no injected script ran")
		require.Zero(t, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("main img, main script").length`)))
		step(t, ctx, chromedp.Navigate(srv.URL+"/dead"), chromedp.WaitVisible(chromedp.CSS("table.groups")))
		require.Equal(t, "undefined", run(t, ctx, chromedp.Evaluate[string](`typeof window.__xss`)))
		shoot(t, ctx, shots, "xss.png")
	})

	t.Run("requeue a dead-letter group", func(t *testing.T) {
		step(t, ctx, chromedp.Navigate(srv.URL+"/dead"), chromedp.WaitVisible(chromedp.CSS("table.groups")))
		shoot(t, ctx, shots, "dead.png")
		row := `//table[contains(@class,"groups")]//tr[.//code[text()="timeout after <n>ms"]]`
		require.Equal(t, "3", run(t, ctx, chromedp.Text(chromedp.Search(row+`/td[2]`))))
		run(t, ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.Search(row+`//button`))))
		require.Equal(t, "3", run(t, ctx, chromedp.Text(chromedp.CSS("strong.count"))), "the confirmation gives the count")
		shoot(t, ctx, shots, "confirm.png")
		dead := func() int {
			n, err := f.q.CountJobs(bg, litequeue.JobQuery{States: []litequeue.State{litequeue.StateDead}}, 0)
			require.NoError(t, err)
			return n
		}
		require.Equal(t, 5, dead(), "nothing changes before the confirmation")
		clickAndLoad(t, ctx, `form.confirm button[type=submit]`)
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.CSS("p.flash"))), "Requeued 3 dead letters")
		require.Equal(t, 2, dead())
		page, err := f.q.ListJobs(bg, litequeue.JobQuery{Text: "timeout after"}, litequeue.PageRequest{})
		require.NoError(t, err)
		require.Len(t, page.Jobs, 3)
		for _, j := range page.Jobs {
			require.Equal(t, litequeue.StateReady, j.State)
		}
	})

	t.Run("retry plan and phone and dark mode", func(t *testing.T) {
		step(t, ctx, chromedp.Navigate(srv.URL+"/plan"), chromedp.WaitVisible(chromedp.CSS("svg.chart")))
		require.Equal(t, 5, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg.chart rect.bar").length`)))
		shoot(t, ctx, shots, "plan.png")
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		require.NoError(t, err)
		step(t, ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("table.counts")))
		bgColor := run(t, ctx, chromedp.Evaluate[string](`getComputedStyle(document.body).backgroundColor`))
		require.Equal(t, "rgb(18, 21, 27)", bgColor, "dark mode follows prefers-color-scheme")
		shoot(t, ctx, shots, "overview-dark.png")
		step(t, ctx, chromedp.EmulateViewport(390, 844), chromedp.Navigate(srv.URL+"/jobs"), chromedp.WaitVisible(chromedp.CSS("table.jobs")))
		overflow := run(t, ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
		require.False(t, overflow, "the page fits a phone's width (wide tables scroll inside their box)")
		shoot(t, ctx, shots, "jobs-phone.png")
	})
	t.Logf("screenshots in %s", shots)
}

// Flaky always fails after 1.5s of the mock clock, four times, 30s apart.
type Flaky struct {
	Account string `json:"account"`
}

func (Flaky) Kind() string { return "flaky" }
func (Flaky) RetryPolicy() *litequeue.RetryPolicy {
	p := litequeue.FixedRetry(4, 30*time.Second)
	return &p
}

func TestJobTimelineInABrowser(t *testing.T) {
	ctx := browser(t)
	f := openFixture(t, nil)
	q, mock := f.q, f.clock
	// The handler's Add and the test's never overlap: clock.Mock.Add ends
	// by setting the time it aimed at, which would move the clock back over
	// the 1.5 s of a handler that a timer of the test's Add started.
	var adding sync.Mutex
	add := func(d time.Duration) {
		adding.Lock()
		defer adding.Unlock()
		mock.Add(d)
	}
	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[Flaky]) error {
		add(1500 * time.Millisecond)
		return fmt.Errorf("sync %s: 503 service unavailable (attempt %d)", d.Job.Account, d.Attempt)
	})
	bg := context.Background()
	require.NoError(t, q.Start(bg))
	id, err := q.Enqueue(bg, Flaky{Account: "acme"}, nil)
	require.NoError(t, err)
	for done := false; !done; {
		select {
		case e := <-f.evs:
			switch e.Type {
			case litequeue.EventRetrying:
				add(e.Delay)
			case litequeue.EventDead:
				done = true
			}
		case <-time.After(10 * time.Second):
			t.Fatal("timed out driving the retries")
		}
	}
	require.NoError(t, q.Stop(bg))
	srv := serve(t, web.Handler(q, nil))
	step(t, ctx, chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, id)), chromedp.WaitVisible(chromedp.CSS("svg.timeline")))
	require.Equal(t, 4, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg.timeline rect.attempt").length`)))
	require.Equal(t, 3, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg.timeline line.delay").length`)))
	table := run(t, ctx, chromedp.Text(chromedp.CSS("table.attempts")))
	require.Contains(t, table, "1.5s")
	require.Contains(t, table, "30s")
	require.Contains(t, table, "gave up", "the decision in words")
	shoot(t, ctx, t.TempDir(), "job-retries.png")
}

func TestReadOnlyDashboardInABrowserRefuses(t *testing.T) {
	ctx := browser(t)
	f := newFixture(t, map[string]string{"a@example.com": "boom"})
	srv := serve(t, web.Handler(f.q, &web.Options{ReadOnly: true}))
	step(t, ctx, chromedp.Navigate(srv.URL+"/dead"), chromedp.WaitVisible(chromedp.CSS("table.groups")))
	require.Zero(t, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("form[method=post], button").length - document.querySelectorAll("form.filter button").length`)),
		"no action is offered")
	status := run(t, ctx, chromedp.Evaluate[int](`fetch("/dead/requeue", {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"},
		body: "key=boom&confirm=yes"}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	require.Equal(t, 403, status)
	n, err := f.q.CountJobs(context.Background(), litequeue.JobQuery{States: []litequeue.State{litequeue.StateDead}}, 0)
	require.NoError(t, err)
	require.Equal(t, 1, n, "still dead")
}

// Resize is a second job type, in its own queue.
type Resize struct {
	Image string `json:"image"`
	Width int    `json:"width,omitempty"`
}

func (Resize) Kind() string      { return "resize" }
func (Resize) QueueName() string { return "media" }

func TestQueuesSchedulesAndProgressInABrowser(t *testing.T) {
	ctx := browser(t)
	shots := t.TempDir()
	lq := openFixture(t, &litequeue.Options{CompletedRetention: time.Hour})
	litequeue.Register(lq.q, func(ctx context.Context, d *litequeue.Delivery[Email]) error { return nil })
	litequeue.Register(lq.q, func(ctx context.Context, d *litequeue.Delivery[Resize]) error { return nil })
	steps, acks := startReporter(t, lq)
	registerSchedules(t, lq.q)
	bg := context.Background()
	for i := range 3 {
		_, err := lq.q.Enqueue(bg, Email{To: fmt.Sprintf("later%d@example.com", i)}, &litequeue.EnqueueOptions{Delay: time.Hour})
		require.NoError(t, err)
	}
	require.NoError(t, lq.q.Pause(bg, "nightly-batch")) // paused, no jobs
	srv := serve(t, web.Handler(lq.q, &web.Options{RefreshInterval: 100 * time.Millisecond}))
	defaultRow := `//table[contains(@class,"queues")]//tr[th/a[text()="default"]]`

	t.Run("pause a queue", func(t *testing.T) {
		step(t, ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("table.counts")))
		require.Equal(t, "", run(t, ctx, chromedp.Text(chromedp.CSS(`[data-live="default/paused"]`))))
		clickAndLoad(t, ctx, `nav a[href="/queues"]`)
		require.Equal(t, "active", run(t, ctx, chromedp.Text(chromedp.Search(defaultRow+`//span[contains(@class,"state")]`))))
		require.Equal(t, "paused", run(t, ctx, chromedp.Text(chromedp.Search(`//tr[th/a[text()="nightly-batch"]]//span[contains(@class,"state")]`))),
			"a paused queue without jobs is listed")
		run(t, ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.Search(defaultRow+`//button[text()="Pause"]`))))
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.CSS("p.flash"))), `Queue "default" paused: no process starts its jobs`)
		require.Equal(t, "paused", run(t, ctx, chromedp.Text(chromedp.Search(defaultRow+`//span[contains(@class,"state")]`))))
		require.Equal(t, "Resume", run(t, ctx, chromedp.Text(chromedp.Search(defaultRow+`//button`))))
		require.Equal(t, []string{"default", "nightly-batch"}, pausedQueues(t, lq.q), "the database has the pause")

		// A job enqueued now waits; the page shows it without a reload.
		id, err := lq.q.Enqueue(bg, Email{To: "held@example.com"}, nil)
		require.NoError(t, err)
		got := run(t, ctx, chromedp.Poll[bool](`document.querySelector('[data-live="default/ready"]').textContent === "1"`,
			chromedp.WithPollingTimeout(10*time.Second)))
		require.True(t, got, "the ready count did not move")
		j, err := lq.q.Job(bg, id)
		require.NoError(t, err)
		require.Equal(t, litequeue.StateReady, j.State, "not claimed while paused")
		shoot(t, ctx, shots, "queues.png")

		step(t, ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("table.counts")))
		require.Equal(t, "paused", run(t, ctx, chromedp.Text(chromedp.CSS(`[data-live="default/paused"]`))), "the overview marks it")
		shoot(t, ctx, shots, "overview-paused.png")
	})

	t.Run("trigger a schedule", func(t *testing.T) {
		step(t, ctx, chromedp.Navigate(srv.URL+"/schedules"), chromedp.WaitVisible(chromedp.CSS("table.schedules")))
		row := `//table[contains(@class,"schedules")]//tr[th/a[text()="` + nightly + `"]]`
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.Search(row))), "in 14h")
		require.Equal(t, "2026-03-02 02:00:00.000 UTC", run(t, ctx, chromedp.AttributeValue(chromedp.Search(row+`//time`), "title")).Value, "the absolute time on hover")
		shoot(t, ctx, shots, "schedules.png")
		run(t, ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.Search(row+`//button[text()="Trigger now"]`))))
		flash := run(t, ctx, chromedp.Text(chromedp.CSS("p.flash")))
		require.Contains(t, flash, `Schedule "`+nightly+`" triggered: enqueued job`)
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.Search(row))), "pending", "the list shows the last job")
		clickAndLoad(t, ctx, `p.flash a`)
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.CSS("h1"))), "ready", "the job appeared, waiting in the paused queue")
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.CSS("pre.payload"))), `"to": "boss@example.com"`)
		var id int64
		_, err := fmt.Sscanf(run(t, ctx, chromedp.Evaluate[string](`location.pathname`)), "/jobs/%d", &id)
		require.NoError(t, err)
		s, _ := schedule(t, lq.q, nightly)
		require.Equal(t, id, s.LastJobID, "the database has the triggered job")

		step(t, ctx, chromedp.Navigate(srv.URL+"/schedules/"+url.PathEscape(nightly)), chromedp.WaitVisible(chromedp.CSS("table.history")))
		require.Equal(t, 5, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("ol.runs li").length`)))
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.CSS("table.history"))), "triggered")
		shoot(t, ctx, shots, "schedule.png")
	})

	var job int64
	t.Run("live progress", func(t *testing.T) {
		job = startReport(t, lq, "monthly")
		step(t, ctx, chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, job)), chromedp.WaitVisible(chromedp.CSS("pre.payload")))
		require.False(t, run(t, ctx, chromedp.Evaluate[bool](`!document.querySelector(".progress-box").hidden`)), "no progress yet")
		value := func(want string) {
			t.Helper()
			got := run(t, ctx, chromedp.Poll[bool](`!document.querySelector(".progress-box").hidden && document.querySelector(".progress-box .pct").textContent === "`+want+`"`,
				chromedp.WithPollingTimeout(10*time.Second)))
			require.True(t, got, "the bar did not reach %s", want)
		}
		steps <- progressStep{0.3, "importing rows " + xss}
		<-acks
		value("30%")
		require.InDelta(t, 0.3, run(t, ctx, chromedp.Evaluate[float64](`document.querySelector(".progress-box progress").value`)), 1e-9)
		require.Equal(t, "importing rows "+xss, run(t, ctx, chromedp.Text(chromedp.CSS(".progress-box .msg"))), "the message shows as text")
		steps <- progressStep{0.8, "writing the summary"}
		<-acks
		value("80%")
		require.Equal(t, "writing the summary", run(t, ctx, chromedp.Text(chromedp.CSS(".progress-box .msg"))))
		require.Equal(t, "now", run(t, ctx, chromedp.Text(chromedp.CSS(".progress-box .updated time"))), "the report's time, relative")
		require.Equal(t, "2026-03-01 12:00:00.000 UTC", run(t, ctx, chromedp.AttributeValue(chromedp.CSS(".progress-box .updated time"), "title")).Value,
			"the absolute time on hover, set by the live update too")
		require.Equal(t, "1", run(t, ctx, chromedp.Evaluate[string](`String(performance.getEntriesByType("navigation").length)`)), "no reload")
		require.Equal(t, "undefined", run(t, ctx, chromedp.Evaluate[string](`typeof window.__xss`)), "no injected script ran")
		shoot(t, ctx, shots, "job-progress.png")
		close(steps)
		got := run(t, ctx, chromedp.Poll[bool](`!document.querySelector("[data-job-ended]").hidden`, chromedp.WithPollingTimeout(10*time.Second)))
		require.True(t, got, "the end of the job was not shown")
		require.Equal(t, "completed", run(t, ctx, chromedp.Text(chromedp.CSS("[data-job-state]"))))
		clickAndLoad(t, ctx, `[data-job-ended] a`)
		require.Contains(t, run(t, ctx, chromedp.Text(chromedp.CSS("pre.output"))), `"rows": 7`)
		shoot(t, ctx, shots, "job-output.png")
	})

	t.Run("dark mode and a phone", func(t *testing.T) {
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		require.NoError(t, err)
		pages := []struct{ name, path, sel string }{
			{"queues", "/queues", "table.queues"},
			{"schedules", "/schedules", "table.schedules"},
			{"schedule", "/schedules/" + url.PathEscape(nightly), "table.history"},
			{"job-progress", fmt.Sprintf("/jobs/%d", job), "section.progress-box"},
		}
		for _, p := range pages {
			step(t, ctx, chromedp.Navigate(srv.URL+p.path), chromedp.WaitVisible(chromedp.CSS(p.sel)))
			shoot(t, ctx, shots, p.name+"-dark.png")
		}
		step(t, ctx, chromedp.EmulateViewport(390, 844))
		for _, p := range pages {
			step(t, ctx, chromedp.Navigate(srv.URL+p.path), chromedp.WaitVisible(chromedp.CSS(p.sel)))
			overflow := run(t, ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
			require.False(t, overflow, "%s fits a phone's width", p.name)
			shoot(t, ctx, shots, p.name+"-phone-dark.png")
		}
		_, err = chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "light"}}})
		require.NoError(t, err)
		for _, p := range pages[:2] {
			step(t, ctx, chromedp.Navigate(srv.URL+p.path), chromedp.WaitVisible(chromedp.CSS(p.sel)))
			shoot(t, ctx, shots, p.name+"-phone.png")
		}
	})

	t.Run("read-only offers and takes no action", func(t *testing.T) {
		ro := serve(t, web.Handler(lq.q, &web.Options{ReadOnly: true}))
		for _, p := range []string{"/queues", "/schedules", "/schedules/" + url.PathEscape(nightly)} {
			step(t, ctx, chromedp.Navigate(ro.URL+p), chromedp.WaitVisible(chromedp.CSS("main table")))
			require.Zero(t, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("form[method=post], button").length`)), p)
		}
		for _, a := range []string{`"/queues/resume", "queue=default"`, `"/schedules/trigger", "name=hourly-sync"`} {
			status := run(t, ctx, chromedp.Evaluate[int](`((u, b) => fetch(u, {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: b}).then(r => r.status))(`+a+`)`,
				chromedp.EvalAwaitPromise))
			require.Equal(t, 403, status, a)
		}
		require.Equal(t, []string{"default", "nightly-batch"}, pausedQueues(t, lq.q), "still paused")
	})
	t.Logf("screenshots in %s", shots)
}

// Paging a filtered list: Older keeps the filter and moves the cursor.
func TestPagingAFilteredListInABrowser(t *testing.T) {
	ctx := browser(t)
	f := openFixture(t, nil)
	fillForCrawl(t, f)
	srv := serve(t, web.Handler(f.q, nil))
	rows := func() [][]string {
		return run(t, ctx, chromedp.Evaluate[[][]string](`[...document.querySelectorAll("table.jobs tbody tr")].map(tr =>
			[tr.querySelector("td:nth-child(2)").textContent, tr.querySelector("td:nth-child(3)").textContent, tr.querySelector(".state").textContent])`))
	}
	want, err := f.q.ListJobs(context.Background(), litequeue.JobQuery{Queue: "invoices", States: []litequeue.State{litequeue.StateDead}},
		litequeue.PageRequest{Limit: 100})
	require.NoError(t, err)
	ids := func(rs [][]string) []string {
		var out []string
		for _, r := range rs {
			require.Equal(t, []string{"invoices", "dead"}, r[1:], "job %s", r[0])
			out = append(out, r[0])
		}
		return out
	}
	wantIDs := func(from, to int) []string {
		var out []string
		for _, j := range want.Jobs[from:to] {
			out = append(out, fmt.Sprint(j.ID))
		}
		return out
	}
	step(t, ctx, chromedp.Navigate(srv.URL+"/jobs?state=dead&queue=invoices"), chromedp.WaitVisible(chromedp.CSS("table.jobs")))
	require.Equal(t, wantIDs(0, 50), ids(rows()))
	run(t, ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.Search(`//p[@class="pager"]/a[text()="Older →"]`))))
	search := run(t, ctx, chromedp.Evaluate[string](`location.search`))
	q, err := url.ParseQuery(strings.TrimPrefix(search, "?"))
	require.NoError(t, err)
	require.Equal(t, url.Values{"state": {"dead"}, "queue": {"invoices"}, "before": {wantIDs(49, 50)[0]}}, q)
	require.Equal(t, wantIDs(50, 100), ids(rows()), "the next 50 dead letters of invoices")
	require.Equal(t, "dead", run(t, ctx, chromedp.Evaluate[string](`document.querySelector("select[name=state]").value`)), "the form keeps the filter")
	require.Equal(t, "invoices", run(t, ctx, chromedp.Evaluate[string](`document.querySelector("input[name=queue]").value`)))
	run(t, ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.Search(`//p[@class="pager"]/a[text()="Newest"]`))))
	require.Equal(t, wantIDs(0, 50), ids(rows()), "Newest: back to the first page of the filter")
	shoot(t, ctx, t.TempDir(), "jobs-older.png")
}
