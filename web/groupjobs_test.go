package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/web"
)

// Each group on the queue page links to its jobs; that list keeps to the
// group through the other filters and its Older links, shows the group as
// a filter that a link removes, and refuses what would reach past it.
func TestJobsOfAGroupAreListedPagedAndKeptByEveryLink(t *testing.T) {
	f := openFixture(t, nil)
	ctx := context.Background()
	enqueue := func(queue, group string) int64 {
		id, err := f.q.Enqueue(ctx, Email{To: group}, &litequeue.EnqueueOptions{Queue: queue, Group: group})
		require.NoError(t, err)
		return id
	}
	a1 := enqueue("default", "acme & co")
	enqueue("default", "zeta")
	a2 := enqueue("default", "acme & co")
	enqueue("default", "")
	other := enqueue("other", "acme & co")
	a3 := enqueue("default", "acme & co")
	d := serve(t, web.Handler(f.q, &web.Options{PageSize: 2}))

	queuePage := d.open("/queue?name=default")
	first := "/jobs?" + url.Values{"queue": {"default"}, "jobgroup": {"acme & co"}}.Encode()
	require.Contains(t, queuePage, `<a href="/jobs?jobgroup=acme&#43;%26&#43;co&amp;queue=default"><code>acme &amp; co</code></a>`)
	require.Contains(t, queuePage, `<a href="/jobs?jobgroup=zeta&amp;queue=default"><code>zeta</code></a>`)

	body := d.open(first)
	p := parsePage(t, first, body)
	require.Equal(t, []int64{a3, a2}, jobIDs(p), "the group's newest jobs of the queue")
	require.Contains(t, body, `<input type="hidden" name="jobgroup" value="acme &amp; co">`, "the filter form keeps the group")
	require.NotContains(t, body, `<label>Tag`, "no tag or text filter with a group")
	require.NotContains(t, body, `type="search"`, "no tag or text filter with a group")
	require.NotContains(t, body, `value="filter"`, "no bulk action on everything matching")
	older, remove := linkTo(t, p, "Older →"), linkTo(t, p, "Remove the group filter")
	require.Equal(t, url.Values{"queue": {"default"}, "jobgroup": {"acme & co"}, "before": {strconv.FormatInt(a2, 10)}}, older.Query())
	require.Equal(t, url.Values{"queue": {"default"}}, remove.Query())
	require.Equal(t, url.Values{"queue": {"default"}, "jobgroup": {"acme & co"}}, linkTo(t, p, "Newest").Query())

	p = parsePage(t, older.String(), d.open(older.String()))
	require.Equal(t, []int64{a1}, jobIDs(p), "the last page")
	for _, l := range p.links {
		require.NotEqual(t, "Older →", l.text, "no page after the last")
	}

	everyQueue := "/jobs?" + url.Values{"jobgroup": {"acme & co"}}.Encode()
	p = parsePage(t, everyQueue, d.open(everyQueue))
	require.Equal(t, []int64{a3, other}, jobIDs(p), "without a queue, the group's jobs of every queue")
	dead := "/jobs?" + url.Values{"jobgroup": {"acme & co"}, "state": {"dead"}}.Encode()
	require.Empty(t, jobIDs(parsePage(t, dead, d.open(dead))))

	for _, q := range []url.Values{
		{"jobgroup": {"acme & co"}, "q": {"x"}},
		{"jobgroup": {"acme & co"}, "tag": {"x"}},
		{"jobgroup": {"acme & co"}, "group": {"x"}},
	} {
		code, body, _ := d.get("/jobs?" + q.Encode())
		require.Equal(t, http.StatusBadRequest, code, "%v: %s", q, body)
	}
	d.open(first)
	code, body, _ := d.send("/bulk", url.Values{"action": {"cancel"}, "scope": {"filter"}, "jobgroup": {"acme & co"}})
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, "reach past the group")
	code, body, _ = d.send("/bulk", url.Values{"action": {"cancel"}, "scope": {"selected"}, "id": {strconv.FormatInt(a1, 10)},
		"queue": {"default"}, "jobgroup": {"acme & co"}})
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `<input type="hidden" name="jobgroup" value="acme &amp; co">`, "the confirmation returns to the group")
	require.Equal(t, url.Values{"queue": {"default"}, "jobgroup": {"acme & co"}}, linkTo(t, parsePage(t, "/bulk", body), "Cancel").Query())
}

func jobIDs(p crawlPage) []int64 {
	ids := []int64{}
	for _, j := range p.jobs {
		ids = append(ids, j.id)
	}
	return ids
}

// linkTo is the one link of p whose text is text.
func linkTo(t *testing.T, p crawlPage, text string) *url.URL {
	t.Helper()
	var found *url.URL
	for _, l := range p.links {
		if l.text == text {
			require.Nil(t, found, "%s: two links %q", p.url, text)
			found = l.href
		}
	}
	require.NotNil(t, found, "%s: no link %q", p.url, text)
	return found
}
