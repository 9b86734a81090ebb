package web_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/web"
)

// The queue page's limits form, filled and sent in a browser, stores the
// limits; the page then shows them and the groups, and the job page of a
// job held behind its ordered group's head says why it waits.
func TestLimitsFormAndWaitReasonInABrowser(t *testing.T) {
	ctx := browser(t)
	f := openFixture(t, nil)
	bg := context.Background()
	head, err := f.q.Enqueue(bg, Email{To: "a"}, &litequeue.EnqueueOptions{Group: "acme"})
	require.NoError(t, err)
	held, err := f.q.Enqueue(bg, Email{To: "b"}, &litequeue.EnqueueOptions{Group: "acme"})
	require.NoError(t, err)
	srv := serve(t, web.Handler(f.q, &web.Options{RefreshInterval: -1}))
	text := func(sel string) string { return run(t, ctx, chromedp.Text(chromedp.CSS(sel))) }

	step(t, ctx, chromedp.Navigate(srv.URL+"/queue?name=default"), chromedp.WaitVisible(chromedp.CSS("form[data-limits-form]")),
		chromedp.SetValue(chromedp.CSS(`form[data-limits-form] input[name=concurrency]`), "2"),
		chromedp.SetValue(chromedp.CSS(`form[data-limits-form] input[name=rate_n]`), "5"),
		chromedp.SetValue(chromedp.CSS(`form[data-limits-form] input[name=rate_per]`), "1s"))
	step(t, ctx, chromedp.Click(chromedp.CSS(`form[data-limits-form] input[name=ordered]`)))
	clickAndLoad(t, ctx, `form[data-limits-form] button`)
	require.Contains(t, text(`p.flash`), `Limits of queue "default" stored`)
	ls, err := f.q.Limits(bg)
	require.NoError(t, err)
	require.Equal(t, litequeue.QueueLimits{Concurrency: 2, Ordered: true, Rate: litequeue.Rate{N: 5, Per: time.Second}}, ls["default"])
	require.Contains(t, text(`dl[data-limits]`), "2 jobs at once across every process")
	require.Contains(t, text(`table[data-groups] tbody`), fmt.Sprintf("job %d ready", head))
	shoot(t, ctx, t.TempDir(), "queue-limits.png")

	step(t, ctx, chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, held)), chromedp.WaitVisible(chromedp.CSS("[data-wait]")))
	require.Equal(t, fmt.Sprintf("behind job %d of its ordered group (ready)", head), text(`[data-wait]`))
}
