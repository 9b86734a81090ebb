package web_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/web"
	"github.com/stretchr/testify/require"
)

// The job page shows a job's tags, metadata and trace context.

var metaOpts = &litequeue.EnqueueOptions{
	Tags:     []string{"invoice", "tenant:42"},
	Metadata: map[string]string{"request_id": "r-1", "note": xss},
	Trace:    litequeue.TraceContext{TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
}

func TestJobPageShowsMetadata(t *testing.T) {
	f := openFixture(t, nil)
	ctx := context.Background()
	id, err := f.q.Enqueue(ctx, Email{To: "m@example.com"}, metaOpts)
	require.NoError(t, err)
	plain, err := f.q.Enqueue(ctx, Email{To: "p@example.com"}, nil)
	require.NoError(t, err)
	d := serve(t, web.Handler(f.q, nil))
	code, body, _ := d.get(fmt.Sprintf("/jobs/%d", id))
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `<a class="tag" href="/jobs?tag=invoice">invoice</a>`)
	require.Contains(t, body, `>tenant:42</a>`)
	require.Contains(t, body, `<dt>request_id</dt><dd>r-1</dd>`)
	require.Contains(t, body, `<code data-traceparent>00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01</code>`)
	require.NotContains(t, body, "<script>window.__xss", "metadata is escaped")
	code, body, _ = d.get(fmt.Sprintf("/jobs/%d", plain))
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, body, "<h2>Metadata</h2>")
	require.NotContains(t, body, `class="tags"`)

	// The jobs page filters by tag, and its links and forms keep the tag.
	code, body, _ = d.get("/jobs?tag=invoice")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, fmt.Sprintf(`href="/jobs/%d"`, id))
	require.NotContains(t, body, fmt.Sprintf(`href="/jobs/%d"`, plain))
	require.Contains(t, body, `<input name="tag" value="invoice"`)
	require.Contains(t, body, `<input type="hidden" name="tag" value="invoice">`)
	code, body, _ = d.get("/jobs?tag=nope")
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, body, fmt.Sprintf(`href="/jobs/%d"`, id))
}

func TestJobMetadataInABrowser(t *testing.T) {
	bctx := browser(t)
	f := openFixture(t, nil)
	id, err := f.q.Enqueue(context.Background(), Email{To: "m@example.com"}, metaOpts)
	require.NoError(t, err)
	_, err = f.q.Enqueue(context.Background(), Email{To: "other@example.com"}, nil)
	require.NoError(t, err)
	srv := serve(t, web.Handler(f.q, nil))
	step(t, bctx, chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, id)), chromedp.WaitVisible(chromedp.CSS("dd.tags")))
	tags := run(t, bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("dd.tags a.tag")].map(s => s.textContent)`))
	require.Equal(t, []string{"invoice", "tenant:42"}, tags)
	meta := run(t, bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("dl.metadata dt, dl.metadata dd")].map(e => e.textContent)`))
	require.Equal(t, []string{"note", xss, "request_id", "r-1"}, meta, "keys in order, values as text")
	require.Equal(t, "undefined", run(t, bctx, chromedp.Evaluate[string](`typeof window.__xss`)), "no injected script ran")
	shoot(t, bctx, t.TempDir(), "job-metadata.png")
	clickAndLoad(t, bctx, `dd.tags a.tag:nth-of-type(2)`)
	require.Contains(t, run(t, bctx, chromedp.Evaluate[string](`location.search`)), "tag=tenant")
	ids := run(t, bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("table.jobs tbody tr td:nth-child(2)")].map(td => td.textContent)`))
	require.Equal(t, []string{fmt.Sprint(id)}, ids, "the tag's link lists the jobs that carry it")
}

// The schedule page shows a schedule's bounds, and an ended schedule as
// ended.
func TestSchedulePageShowsItsBounds(t *testing.T) {
	f := openFixture(t, nil)
	ctx := context.Background()
	now := f.clock.Now()
	_, err := f.q.RegisterSchedule(ctx, litequeue.Schedule{Name: "bounded", Cron: "@hourly", Job: Email{To: "x"},
		EndAt: now.Add(24 * time.Hour), MaxRuns: 5, RunImmediately: true})
	require.NoError(t, err)
	_, err = f.q.RegisterSchedule(ctx, litequeue.Schedule{Name: "over", Cron: "@hourly", Job: Email{To: "x"}, EndAt: now.Add(-time.Hour)})
	require.NoError(t, err)
	d := serve(t, web.Handler(f.q, nil))
	code, body, _ := d.get("/schedules/bounded")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "<dt>First run</dt><dd>at its registration</dd>")
	require.Regexp(t, `<dd data-schedule-end>after <[^>]+>[^<]+</[a-z]+>, or after 5 runs \(0 so far\)</dd>`, body)
	code, body, _ = d.get("/schedules/over")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `<span class="state ended">ended</span>`)
	require.Contains(t, body, "— ended</dd>")
	_, list, _ := d.get("/schedules")
	require.Contains(t, list, `<span class="state ended">ended</span>`)
}
