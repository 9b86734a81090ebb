package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/web"
)

// TestOperatorsRoundTwoInABrowser walks the views and actions of issue 37
// in Chromium, on a SQLite file.
func TestOperatorsRoundTwoInABrowser(t *testing.T) {
	ctx := browser(t)
	shots := t.TempDir()
	f := openFixture(t, configured())
	dead := makeDead(t, f, "smtp: 550 mailbox unavailable", "smtp: 550 mailbox unavailable", "timeout after 3s")
	bg := context.Background()
	later, err := f.q.Enqueue(bg, Email{To: "later@example.com"}, &litequeue.EnqueueOptions{Delay: 2 * time.Hour})
	require.NoError(t, err)
	img, err := f.q.Enqueue(bg, Resize{Image: "x.png"}, nil)
	require.NoError(t, err)
	_, err = f.q.Cancel(bg, img)
	require.NoError(t, err)
	f.clock.Add(3 * time.Minute)
	// Live refresh off: what the pages show, the server rendered.
	srv := serve(t, web.Handler(f.q, &web.Options{RefreshInterval: -1}))
	text := func(sel string) string { return run(t, ctx, chromedp.Text(chromedp.CSS(sel))) }

	t.Run("badge, cancelled counts and configured queues", func(t *testing.T) {
		step(t, ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("table.counts")))
		require.Equal(t, "3", text(`nav .badge`), "the dead-letter badge, without a live stream")
		require.True(t, run(t, ctx, chromedp.Evaluate[bool](`getComputedStyle(document.querySelector("nav .badge")).display !== "none"`)))
		require.Equal(t, "1", text(`[data-live="media/cancelled"]`))
		require.Equal(t, "0", text(`[data-live="invoices/ready"]`), "a configured queue without jobs")
		shoot(t, ctx, shots, "overview-round-two.png")
	})

	t.Run("a queue's configuration", func(t *testing.T) {
		step(t, ctx, chromedp.Navigate(srv.URL+"/queues"), chromedp.WaitVisible(chromedp.CSS("table.queues")))
		clickAndLoad(t, ctx, `a[href="/queue?name=invoices"]`)
		require.Contains(t, text("dl.config"), "3 handlers at once per process")
		require.Contains(t, text("dl.config"), "5 attempts, exponential waits from 1s")
		require.Contains(t, text("dl.config"), "1m30s per attempt")
		shoot(t, ctx, shots, "queue.png")
		clickAndLoad(t, ctx, `dl.config a[href^="/plan?"]`)
		require.Contains(t, text("main"), "5 attempts", "the plan page of the queue's own policy")
	})

	t.Run("the retry plans of the queues' own policies", func(t *testing.T) {
		step(t, ctx, chromedp.Navigate(srv.URL+"/plan"), chromedp.WaitVisible(chromedp.CSS("svg.chart")))
		require.Equal(t, "invoices", text(`p.plan-queues a[aria-current]`), "the first configured queue's policy")
		require.Contains(t, text("main"), "5 attempts")
		clickAndLoad(t, ctx, `p.plan-queues a:not([aria-current])`)
		require.Equal(t, "mail", text(`p.plan-queues a[aria-current]`))
		require.Contains(t, text("main"), "1 attempt: the job never retries")
	})

	t.Run("relative times, absolute on hover", func(t *testing.T) {
		step(t, ctx, chromedp.Navigate(srv.URL+"/jobs/"+itoa(later)), chromedp.WaitVisible(chromedp.CSS("dl.facts")))
		due := `//dt[text()="Due"]/following-sibling::dd[1]/time`
		require.Equal(t, "in 1h57m", run(t, ctx, chromedp.Text(chromedp.Search(due))))
		require.Equal(t, "2026-03-01 14:00:00.000 UTC", run(t, ctx, chromedp.AttributeValue(chromedp.Search(due), "title")).Value)
		enq := `//dt[text()="Enqueued"]/following-sibling::dd[1]/time`
		require.Equal(t, "3m ago", run(t, ctx, chromedp.Text(chromedp.Search(enq))))
		step(t, ctx, chromedp.Navigate(srv.URL+"/jobs/"+itoa(dead[0])), chromedp.WaitVisible(chromedp.CSS("table.attempts")))
		require.Equal(t, "gave up", text("table.attempts tbody td:nth-child(4)"), "the decision in words")
	})

	t.Run("deleting a dead letter asks first", func(t *testing.T) {
		u := srv.URL + "/jobs/" + itoa(dead[2])
		step(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("dl.facts")))
		clickAndLoad(t, ctx, `div.actions button.danger`)
		require.Equal(t, "Delete dead letter "+itoa(dead[2])+"?", text("h1"))
		shoot(t, ctx, shots, "confirm-delete.png")
		clickAndLoad(t, ctx, `form.confirm a.button-link`)
		require.Equal(t, u, run(t, ctx, chromedp.Evaluate[string](`location.href`)), "Keep it: back to the job")
		clickAndLoad(t, ctx, `div.actions button.danger`)
		clickAndLoad(t, ctx, `form.confirm button[type=submit]`)
		require.Contains(t, text("p.flash"), "Job "+itoa(dead[2])+" deleted.")
		_, err := f.q.Job(bg, dead[2])
		require.ErrorIs(t, err, litequeue.ErrNotFound)
	})

	t.Run("cancelling a running job asks first", func(t *testing.T) {
		started := make(chan struct{}, 1)
		litequeue.Register(f.q, func(ctx context.Context, d *litequeue.Delivery[Resize]) error {
			started <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		})
		id, err := f.q.Enqueue(bg, Resize{Image: "slow.png"}, nil)
		require.NoError(t, err)
		require.NoError(t, f.q.Start(bg))
		t.Cleanup(func() { f.q.Stop(bg) })
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("the job did not start")
		}
		step(t, ctx, chromedp.Navigate(srv.URL+"/jobs/"+itoa(id)), chromedp.WaitVisible(chromedp.CSS("dl.facts")))
		require.Equal(t, "Cancel…", text(`div.actions button.danger`))
		clickAndLoad(t, ctx, `div.actions button.danger`)
		require.Equal(t, "Cancel running job "+itoa(id)+"?", text("h1"))
		j, err := f.q.Job(bg, id)
		require.NoError(t, err)
		require.Equal(t, litequeue.StateRunning, j.State, "still running while the page asks")
		clickAndLoad(t, ctx, `form.confirm button[type=submit]`)
		require.Contains(t, text("p.flash"), "Job "+itoa(id)+" cancelled.")
		j, err = f.q.Job(bg, id)
		require.NoError(t, err)
		require.Equal(t, litequeue.StateCancelled, j.State)
		require.NoError(t, f.q.Stop(bg))
	})

	// readyAfter opens job id's page (the job in state from), clicks the
	// button of action, requires the flash message flash and the job ready,
	// and returns the job as stored.
	readyAfter := func(t *testing.T, id int64, from, action, flash string) litequeue.JobInfo {
		step(t, ctx, chromedp.Navigate(srv.URL+"/jobs/"+itoa(id)), chromedp.WaitVisible(chromedp.CSS("dl.facts")))
		require.Equal(t, from, text("h1 .state"))
		clickAndLoad(t, ctx, `form[action$="/`+action+`"] button`)
		require.Contains(t, text("p.flash"), flash)
		require.Equal(t, "ready", text("h1 .state"))
		j, err := f.q.Job(bg, id)
		require.NoError(t, err)
		require.Equal(t, litequeue.StateReady, j.State)
		return j
	}

	t.Run("retry a cancelled job", func(t *testing.T) {
		readyAfter(t, img, "cancelled", "retry", "Job "+itoa(img)+" requeued")
	})

	t.Run("run a scheduled job now", func(t *testing.T) {
		j := readyAfter(t, later, "scheduled", "run", "Job "+itoa(later)+" is due now")
		require.Equal(t, f.clock.Now(), j.VisibleAt.UTC(), "due now, on the queue's clock")
	})

	t.Run("open a dead-letter group's jobs, then delete the group", func(t *testing.T) {
		row := `//table[contains(@class,"groups")]//tr[td/code[starts-with(text(),"smtp")]]`
		step(t, ctx, chromedp.Navigate(srv.URL+"/dead"), chromedp.WaitVisible(chromedp.CSS("table.groups")))
		shoot(t, ctx, shots, "dead-groups.png")
		run(t, ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.Search(row+`//a[text()="Open jobs"]`))))
		require.Contains(t, text("p.group-note"), "Dead letters whose error is like")
		require.Equal(t, 2, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("table.jobs tbody tr").length`)))
		require.Equal(t, []string{itoa(dead[1]), itoa(dead[0])}, run(t, ctx, chromedp.Evaluate[[]string](
			`[...document.querySelectorAll("table.jobs tbody tr td.n a")].map(a => a.textContent)`)), "the group's jobs, newest first")
		shoot(t, ctx, shots, "dead-group-jobs.png")
		clickAndLoad(t, ctx, `p.group-note a`)
		run(t, ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.Search(row+`//button[text()="Delete group…"]`))))
		require.Equal(t, "Delete dead letters?", text("h1"))
		clickAndLoad(t, ctx, `form.confirm button[type=submit]`)
		require.Contains(t, text("p.flash"), "Deleted 2 dead letters")
		require.Equal(t, "0", run(t, ctx, chromedp.Evaluate[string](`document.querySelector("nav .badge").textContent`)))
		require.True(t, run(t, ctx, chromedp.Evaluate[bool](`getComputedStyle(document.querySelector("nav .badge")).display === "none"`)), "a zero badge is hidden")
		for _, id := range dead[:2] {
			_, err := f.q.Job(bg, id)
			require.ErrorIs(t, err, litequeue.ErrNotFound)
		}
	})
}
