package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/web"
)

// The queue page's form stores the limits for every process; the page then
// shows them, the groups with their counts and the job heading each
// ordered group, and a job held behind its group's head says so.
func TestQueuePageSetsLimitsAndShowsGroupsAndWhyAJobWaits(t *testing.T) {
	f := openFixture(t, nil)
	ctx := context.Background()
	var ids []int64
	for _, g := range []string{"acme", "zeta", "acme"} {
		id, err := f.q.Enqueue(ctx, Email{To: g}, &litequeue.EnqueueOptions{Group: g})
		require.NoError(t, err)
		ids = append(ids, id)
	}
	d := serve(t, web.Handler(f.q, nil))
	body := d.open("/queue?name=default")
	require.Contains(t, body, "No limits:")
	require.Contains(t, body, `action="/limits"`)
	d.requireForgeriesRefused("/limits", url.Values{"queue": {"default"}, "concurrency": {"3"}})

	_, page := d.act("/limits", url.Values{"queue": {"default"}, "concurrency": {"3"}, "ordered": {"1"},
		"rate_n": {"10"}, "rate_per": {"1m"}, "key_rate_n": {""}, "key_rate_per": {""}})
	ls, err := f.q.Limits(ctx)
	require.NoError(t, err)
	require.Equal(t, litequeue.QueueLimits{Concurrency: 3, Ordered: true, Rate: litequeue.Rate{N: 10, Per: time.Minute}}, ls["default"])
	require.Contains(t, page, "Limits of queue &#34;default&#34; stored")
	require.Contains(t, page, "3 jobs at once across every process (0 running now)")
	require.Contains(t, page, "10 starts per 1m")
	require.Contains(t, page, `name="rate_per" size="6" value="1m0s"`, "the form shows the stored limits")
	require.Contains(t, page, `<td><a href="/jobs?jobgroup=acme&amp;queue=default"><code>acme</code></a></td><td>0</td><td>2</td>`)
	require.Contains(t, page, `<a href="/jobs/`+strconv.FormatInt(ids[0], 10)+`">job `+strconv.FormatInt(ids[0], 10)+`</a> ready`)
	require.Less(t, strings.Index(page, "<code>acme</code>"), strings.Index(page, "<code>zeta</code>"), "groups by name")

	job := d.open("/jobs/" + strconv.FormatInt(ids[2], 10))
	require.Contains(t, job, "<dt>Group</dt><dd><code>acme</code></dd>")
	require.Contains(t, job, `<dd data-wait>behind job `+strconv.FormatInt(ids[0], 10)+` of its ordered group (ready)</dd>`)

	// Bad values are refused with nothing written.
	for _, form := range []url.Values{
		{"queue": {"default"}, "concurrency": {"-1"}},
		{"queue": {"default"}, "concurrency": {"many"}},
		{"queue": {"default"}, "rate_n": {"5"}, "rate_per": {"soon"}},
		{"queue": {"default"}, "rate_n": {"5"}},
	} {
		code, _, _ := d.send("/limits", form)
		require.Equal(t, http.StatusBadRequest, code, form)
	}
	ls, err = f.q.Limits(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, ls["default"].Concurrency, "nothing was written")

	// Clearing every field removes the limits.
	_, page = d.act("/limits", url.Values{"queue": {"default"}})
	require.Contains(t, page, "No limits:")
	require.NotContains(t, page, "Next in order")
}

// A queue with more groups than a page shows links to the next page.
func TestQueuePagePagesItsGroups(t *testing.T) {
	f := openFixture(t, nil)
	ctx := context.Background()
	for i := range 25 {
		_, err := f.q.Enqueue(ctx, Email{To: "x"}, &litequeue.EnqueueOptions{Group: "g" + strconv.Itoa(100+i)})
		require.NoError(t, err)
	}
	d := serve(t, web.Handler(f.q, nil))
	body := d.open("/queue?name=default")
	require.Contains(t, body, "<code>g119</code>")
	require.NotContains(t, body, "<code>g120</code>")
	require.Contains(t, body, `href="/queue?after=g119&amp;name=default" data-groups-next`)
	body = d.open("/queue?name=default&after=g119")
	require.Contains(t, body, "<code>g120</code>")
	require.Contains(t, body, "<code>g124</code>")
	require.NotContains(t, body, "<code>g119</code>")
	require.NotContains(t, body, "data-groups-next")
}
