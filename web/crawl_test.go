package web_test

import (
	"context"
	"database/sql"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/web"
)

// The crawler: every link of every page of the dashboard, followed from the
// overview on a file with more than 200 jobs of each state, must land where
// its text says, keeping the filter and the cursor.

// perState is the jobs of each state in the queue "invoices" (and a tenth
// of that in "mail").
const perState = 210

// stateOrder is the stored state of each listing state, for the SQL below.
var crawlStates = []struct {
	name  string
	state int // lq_jobs.state
	due   bool
}{
	{"ready", 0, true}, {"scheduled", 0, false}, {"running", 1, false},
	{"completed", 2, true}, {"dead", 3, true}, {"cancelled", 4, true},
}

// fillForCrawl writes the jobs of the crawl straight into the file of f:
// the states interleaved by id, so that every listing pages through the
// whole id range.
func fillForCrawl(t *testing.T, f *fixture) {
	t.Helper()
	db, err := sql.Open("sqlite", f.path)
	require.NoError(t, err)
	defer db.Close()
	now := f.clock.Now().UnixNano()
	tx, err := db.Begin()
	require.NoError(t, err)
	n := len(crawlStates)
	total := perState * n * 11 / 10
	for i := range total {
		st := crawlStates[i%n]
		queue, kind := "invoices", "send_invoice"
		if i%11 == 10 {
			queue, kind = "mail", "send_email"
		}
		visible := now - int64(i+1)*1e9
		if !st.due {
			visible = now + 3600e9 + int64(i)
		}
		// Jobs of two groups (all states: a group's list shows every one),
		// one with a name that needs escaping, and jobs of none.
		var grp any
		switch i % 4 {
		case 0:
			grp = "acme & co/?#"
		case 1:
			grp = "zeta"
		}
		var lease, finished, lastErr any
		attempt := 0
		switch st.name {
		case "running":
			lease, attempt = i+1, 1
		case "completed", "cancelled":
			finished = now - int64(i)
		case "dead":
			finished, attempt, lastErr = now-int64(i), 1, fmt.Sprintf("smtp %d refused", i%5)
		}
		_, err := tx.Exec(`INSERT INTO lq_jobs (queue, kind, state, priority, visible_at, attempt, payload, lease, created_at, run_at, finished_at, last_error, grp)
			VALUES (?, ?, ?, 0, ?, ?, CAST(? AS BLOB), ?, ?, ?, ?, ?, ?)`,
			queue, kind, st.state, visible, attempt, fmt.Sprintf(`{"n":%d,"tag":"crawl-%d"}`, i, i%3), lease, now-int64(total-i)*1e9, now, finished, lastErr, grp)
		require.NoError(t, err)
	}
	// The rows went in behind the store's back: count them as its
	// migration 0010 does, for the counts the pages read from lq_counts.
	_, err = tx.Exec(`DELETE FROM lq_counts; INSERT INTO lq_counts (queue, state, due, n)
		SELECT queue, state, CASE WHEN state = 0 THEN visible_at >> 38 ELSE 0 END, count(*) FROM lq_jobs GROUP BY 1, 2, 3`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
}

var (
	linkRE    = regexp.MustCompile(`(?s)<a\s[^>]*?href="([^"]*)"[^>]*>(.*?)</a>`)
	tagRE     = regexp.MustCompile(`<[^>]*>`)
	jobRowRE  = regexp.MustCompile(`<td class="n"><a href="[^"]*/jobs/(\d+)">\d+</a></td>\s*<td>([^<]*)</td><td>([^<]*)</td>\s*<td><span class="state (\w+)">`)
	h1RE      = regexp.MustCompile(`<h1>(.*?)</h1>`)
	filterRE  = regexp.MustCompile(`<input name="(queue|kind)" value="([^"]*)"`)
	stateSel  = regexp.MustCompile(`<option selected>(\w+)</option>`)
	searchRE  = regexp.MustCompile(`<input name="q" type="search" value="([^"]*)"`)
	groupRE   = regexp.MustCompile(`<input type="hidden" name="group" value="([^"]*)">`)
	jobGrpRE  = regexp.MustCompile(`<input type="hidden" name="jobgroup" value="([^"]*)">`)
	postForms = regexp.MustCompile(`(?s)<form method="post" action="([^"]*)"[^>]*>(.*?)</form>`)
	hiddenRE  = regexp.MustCompile(`<input type="hidden" name="([^"]*)" value="([^"]*)">`)
)

// crawlPage is one page the crawler read.
type crawlPage struct {
	url   string
	body  string
	jobs  []crawlJob // the rows of a jobs list
	links []crawlLink
}

type crawlJob struct {
	id                 int64
	queue, kind, state string
}

type crawlLink struct {
	href *url.URL
	text string
}

func parsePage(t *testing.T, u, body string) crawlPage {
	p := crawlPage{url: u, body: body}
	for _, m := range jobRowRE.FindAllStringSubmatch(body, -1) {
		id, _ := strconv.ParseInt(m[1], 10, 64)
		p.jobs = append(p.jobs, crawlJob{id, html.UnescapeString(m[2]), html.UnescapeString(m[3]), m[4]})
	}
	for _, m := range linkRE.FindAllStringSubmatch(body, -1) {
		href, err := url.Parse(html.UnescapeString(m[1]))
		require.NoError(t, err, "%s: a link %q", u, m[1])
		text := strings.TrimSpace(html.UnescapeString(tagRE.ReplaceAllString(m[2], "")))
		p.links = append(p.links, crawlLink{href, text})
	}
	return p
}

// jobsFilterOf reads the filter the jobs page shows in its form.
func jobsFilterOf(body string) url.Values {
	v := url.Values{}
	for _, m := range filterRE.FindAllStringSubmatch(body, -1) {
		if m[2] != "" {
			v.Set(m[1], html.UnescapeString(m[2]))
		}
	}
	if m := stateSel.FindStringSubmatch(body); m != nil {
		v.Set("state", m[1])
	}
	if m := searchRE.FindStringSubmatch(body); m != nil && m[1] != "" {
		v.Set("q", html.UnescapeString(m[1]))
	}
	if m := groupRE.FindStringSubmatch(body); m != nil {
		v.Set("group", html.UnescapeString(m[1]))
	}
	if m := jobGrpRE.FindStringSubmatch(body); m != nil {
		v.Set("jobgroup", html.UnescapeString(m[1]))
	}
	return v
}

// without returns a copy of v without the keys given.
func without(v url.Values, keys ...string) url.Values {
	out := url.Values{}
	for k, vs := range v {
		if !slices.Contains(keys, k) {
			out[k] = vs
		}
	}
	return out
}

func TestEveryLinkLandsWhereItSays(t *testing.T) {
	f := openFixture(t, nil)
	fillForCrawl(t, f)
	_, err := f.q.RegisterSchedule(context.Background(), litequeue.Schedule{Name: "nightly/report ?all", Cron: "0 3 * * *", Job: Email{To: "boss"}})
	require.NoError(t, err)
	d := serve(t, web.Handler(f.q, nil))
	ctx := context.Background()

	// expectJobs is what SearchJobs finds for a filter: the crawler's walk
	// of the Older links must find the same jobs in the same order.
	expectJobs := func(v url.Values) []int64 {
		if g := v.Get("group"); g != "" {
			// A dead-letter group: the dead letters of the filter whose
			// error normalises to the key, newest first.
			dead, err := f.q.Jobs(ctx, litequeue.JobFilter{Queue: v.Get("queue"), Kind: v.Get("kind"), States: []litequeue.State{litequeue.StateDead}})
			require.NoError(t, err)
			var ids []int64
			for _, j := range dead {
				msg := j.LastError
				if msg == "" {
					msg = j.DeadReason
				}
				if litequeue.NormalizeError(msg) == g {
					ids = append(ids, j.ID)
				}
			}
			slices.Sort(ids)
			slices.Reverse(ids)
			return ids
		}
		jq := litequeue.JobQuery{Queue: v.Get("queue"), Kind: v.Get("kind"), Text: v.Get("q")}
		if s := v.Get("state"); s != "" {
			jq.States = []litequeue.State{litequeue.State(s)}
		}
		// A job group: the jobs of the filter whose grp, read from the
		// file, is the group.
		inGroup := func(int64) bool { return true }
		if g := v.Get("jobgroup"); g != "" {
			db, err := sql.Open("sqlite", f.path)
			require.NoError(t, err)
			defer db.Close()
			rows, err := db.Query(`SELECT id FROM lq_jobs WHERE grp = ?`, g)
			require.NoError(t, err)
			members := map[int64]bool{}
			for rows.Next() {
				var id int64
				require.NoError(t, rows.Scan(&id))
				members[id] = true
			}
			require.NoError(t, rows.Err())
			require.NotEmpty(t, members, "group %q", g)
			inGroup = func(id int64) bool { return members[id] }
		}
		var ids []int64
		p := litequeue.PageRequest{Limit: 1000}
		for {
			pg, err := f.q.ListJobs(ctx, jq, p)
			require.NoError(t, err)
			for _, j := range pg.Jobs {
				if inGroup(j.ID) {
					ids = append(ids, j.ID)
				}
			}
			if pg.Next == 0 {
				return ids
			}
			p.Before = pg.Next
		}
	}

	pages := map[string]crawlPage{}
	var todo []string
	visit := func(u string) {
		if _, ok := pages[u]; !ok && !slices.Contains(todo, u) {
			todo = append(todo, u)
		}
	}
	get := func(u string) crawlPage {
		if p, ok := pages[u]; ok {
			return p
		}
		code, body, _ := d.get(u)
		require.Equal(t, http.StatusOK, code, "%s: %s", u, body)
		p := parsePage(t, u, body)
		pages[u] = p
		return p
	}
	// The seeds: the overview, and a text filter (the overview links none).
	visit("/")
	visit("/jobs?" + url.Values{"q": {"crawl-1"}, "queue": {"invoices"}, "state": {"dead"}}.Encode())
	chains := map[string]bool{} // the filters whose first page was read (their walks are checked at the end)
	counts := map[string]int{}  // the jobs a count link of a filter says it leads to
	links, jobPages := 0, 0
	const jobPagesRead = 60
	for len(todo) > 0 {
		u := todo[0]
		todo = todo[1:]
		p := get(u)
		if pu, _ := url.Parse(u); pu.Path == "/jobs" && pu.Query().Get("before") == "" {
			chains[pu.Query().Encode()] = true
		}
		for _, l := range p.links {
			if l.href.Host != "" || strings.HasPrefix(l.href.Path, "/static/") {
				continue
			}
			links++
			checkLink(t, p, l, counts)
			if strings.HasPrefix(l.href.Path, "/jobs/") {
				// A job's page has the same links whatever the job: the
				// first jobPagesRead are read; every link to one is
				// checked against its text above.
				if jobPages++; jobPages > jobPagesRead {
					continue
				}
			}
			visit(l.href.String())
		}
		checkLanding(t, p)
		// Forms that lead to a page with links: the bulk form's
		// confirmation, and a dead-letter group's (each without confirm).
		for _, m := range postForms.FindAllStringSubmatch(p.body, -1) {
			action := html.UnescapeString(m[1])
			if action != "/dead/requeue" && action != "/dead/delete" {
				continue
			}
			form := url.Values{}
			for _, h := range hiddenRE.FindAllStringSubmatch(m[2], -1) {
				form.Add(html.UnescapeString(h[1]), html.UnescapeString(h[2]))
			}
			checkConfirmCancel(t, d, action, form, url.Values{"queue": form["queue"], "kind": form["kind"]}, "/dead")
		}
		if pu, _ := url.Parse(u); (strings.HasPrefix(u, "/jobs?") || u == "/jobs") && !pu.Query().Has("group") && !pu.Query().Has("jobgroup") {
			filter := without(pu.Query(), "before")
			form := url.Values{"csrf": {csrfOf(t, p.body)}, "action": {"delete"}, "scope": {"filter"}}
			for k, vs := range filter {
				form[k] = vs
			}
			checkConfirmCancel(t, d, "/bulk", form, filter, "/jobs")
		}
	}

	// Each filter's walk through its Older links found every job it
	// selects, newest first, none twice.
	for q := range chains {
		v, _ := url.ParseQuery(q)
		var walked []int64
		u := "/jobs"
		if q != "" {
			u += "?" + q
		}
		for u != "" {
			p, ok := pages[u]
			require.True(t, ok, "%s was not crawled", u)
			for _, j := range p.jobs {
				walked = append(walked, j.id)
			}
			next := ""
			for _, l := range p.links {
				if l.text == "Older →" {
					next = l.href.String()
				}
			}
			u = next
		}
		require.Equal(t, expectJobs(v), walked, "the walk of %q", q)
		if n, ok := counts[q]; ok {
			require.Len(t, walked, n, "the count that links to %q", q)
		}
	}
	for q := range counts {
		require.Contains(t, chains, q, "a count links to %q", q)
	}
	require.Contains(t, chains, url.Values{"queue": {"invoices"}, "state": {"completed"}}.Encode(), "the overview links each state of each queue")
	require.GreaterOrEqual(t, len(chains), 15)
	for _, q := range []string{"invoices", "mail"} {
		for _, g := range []string{"acme & co/?#", "zeta"} {
			require.Contains(t, chains, url.Values{"queue": {q}, "jobgroup": {g}}.Encode(), "the queue page links each group's jobs")
		}
	}
	t.Logf("%d pages, %d links, %d filters walked to their end", len(pages), links, len(chains))
}

// navLinks are the links of every page's header.
var navLinks = map[string]string{"litequeue": "/", "Overview": "/", "Jobs": "/jobs", "Dead letters": "/dead",
	"Queues": "/queues", "Schedules": "/schedules", "Processes": "/processes", "Retry plans": "/plan"}

// checkLink checks what a link says against where it points. A count that
// links to a jobs list is noted in counts (by the list's query), for the
// walk of that list to match.
func checkLink(t *testing.T, p crawlPage, l crawlLink, counts map[string]int) {
	t.Helper()
	q := l.href.Query()
	pu, _ := url.Parse(p.url)
	here := pu.Query()
	n, numErr := strconv.Atoi(strings.ReplaceAll(l.text, ",", ""))
	switch {
	case l.text == "Older →":
		require.Equal(t, "/jobs", l.href.Path, "%s: Older", p.url)
		require.Equal(t, without(here, "before"), without(q, "before"), "%s: Older keeps the filter", p.url)
		require.NotEmpty(t, p.jobs)
		require.Equal(t, strconv.FormatInt(p.jobs[len(p.jobs)-1].id, 10), q.Get("before"), "%s: Older starts below the last job shown", p.url)
	case l.text == "Newest":
		require.Equal(t, "/jobs", l.href.Path)
		require.Equal(t, without(here, "before"), q, "%s: Newest keeps the filter, drops the cursor", p.url)
	case l.text == "Clear":
		require.Equal(t, "/jobs", l.href.String())
	case strings.HasPrefix(l.text, "Dead letters") && l.href.Path == "/dead" && len(q) == 0:
		// the navigation's link, with the badge's count
		require.Regexp(t, `^Dead letters( [\d,]+\+?)?$`, l.text, "%s", p.url)
	case navLinks[l.text] != "" && (l.href.Path == navLinks[l.text] || l.text == "Dead letters"):
		require.Equal(t, navLinks[l.text], l.href.String(), "%s: %q", p.url, l.text)
	case l.href.Path == "/queue":
		require.Equal(t, []string{"name"}, keys(q), "%s: %q", p.url, l.text)
		require.Equal(t, "details", l.text, "%s: a queue's page", p.url)
	case l.href.Path == "/plan" && q.Has("policy"):
		require.Equal(t, []string{"policy"}, keys(q), "%s: %q", p.url, l.text)
	case l.text == "Back to the groups":
		require.Equal(t, "/dead", l.href.Path, "%s", p.url)
		require.Equal(t, without(here, "group", "before", "state"), q, "%s: back to the groups of the same filter", p.url)
	case l.href.Path == "/jobs" && q.Has("group"):
		require.Subset(t, []string{"group", "queue", "kind", "before"}, keys(q), "%s: %q", p.url, l.text)
		if l.text != "Older →" && l.text != "Newest" {
			require.Equal(t, "Open jobs", l.text, "%s: a dead-letter group's jobs", p.url)
			require.Equal(t, here.Get("queue"), q.Get("queue"), "%s: the group's link keeps the queue filter", p.url)
			require.Equal(t, here.Get("kind"), q.Get("kind"), "%s: the group's link keeps the kind filter", p.url)
		}
	case l.text == "Remove the group filter":
		require.Equal(t, "/jobs", l.href.Path, "%s", p.url)
		require.Equal(t, without(here, "jobgroup", "before"), q, "%s: the same list without its job group", p.url)
	case l.href.Path == "/jobs" && q.Has("jobgroup"):
		require.Equal(t, "/queue", pu.Path, "%s: %q: only the queue page links a job group", p.url, l.text)
		require.Equal(t, []string{"jobgroup", "queue"}, keys(q), "%s: %q", p.url, l.text)
		require.Equal(t, here.Get("name"), q.Get("queue"), "%s: a group's jobs of this queue", p.url)
		require.Equal(t, q.Get("jobgroup"), l.text, "%s: a group's link says which group", p.url)
	case l.href.Path == "/jobs" && numErr == nil:
		require.Subset(t, []string{"queue", "state"}, keys(q), "%s: %q", p.url, l.text)
		if old, ok := counts[q.Encode()]; ok {
			require.Equal(t, old, n, "%s: two counts of %s", p.url, q.Encode())
		}
		counts[q.Encode()] = n
	case l.href.Path == "/dead" && numErr == nil:
		require.Equal(t, []string{"queue"}, keys(q), "%s: %q", p.url, l.text)
	case l.href.Path == "/jobs" && len(q) == 1 && (q.Has("queue") || q.Has("kind")):
		require.Contains(t, []string{q.Get("queue"), q.Get("kind")}, l.text, "%s: a link to a queue's or a kind's jobs says which", p.url)
	case l.href.Path == "/processes" && len(q) == 0 && l.text != "Processes":
		require.Regexp(t, `^process \d+$`, l.text, "%s: a job page's link to the process holding it", p.url)
	case strings.HasPrefix(l.href.Path, "/schedules/"):
		require.Equal(t, "/schedules/"+l.text, l.href.Path, "%s: a schedule's link", p.url)
	case strings.HasPrefix(l.href.Path, "/jobs/"):
		id := strings.TrimPrefix(l.href.Path, "/jobs/")
		require.Regexp(t, `^\d+$`, id, "%s: %q", p.url, l.text)
		if _, err := time.ParseDuration(strings.TrimSuffix(l.text, "+")); err == nil && pu.Path == "/" {
			break // the oldest waiting job, by how long it waited
		}
		require.Contains(t, []string{id, "job " + id, "Open job " + id}, l.text, "%s: a job link says which job", p.url)
	default:
		require.Contains(t, []string{"/", "/queues"}, l.href.Path, "%s: a link %q to %s that the crawler does not know", p.url, l.text, l.href)
	}
}

func keys(v url.Values) []string {
	var out []string
	for k := range v {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// checkLanding checks a page against the link that led to it, by its URL:
// a filtered list shows its filter and only jobs that match it, below the
// cursor.
func checkLanding(t *testing.T, p crawlPage) {
	t.Helper()
	u, _ := url.Parse(p.url)
	q := u.Query()
	switch {
	case u.Path == "/jobs":
		require.Equal(t, without(q, "before"), jobsFilterOf(p.body), "%s: the form shows the filter", p.url)
		before, _ := strconv.ParseInt(q.Get("before"), 10, 64)
		for _, j := range p.jobs {
			if s := q.Get("state"); s != "" {
				require.Equal(t, s, j.state, "%s: job %d", p.url, j.id)
			}
			if q.Has("group") {
				require.Equal(t, "dead", j.state, "%s: job %d of a dead-letter group", p.url, j.id)
			}
			if s := q.Get("queue"); s != "" {
				require.Equal(t, s, j.queue, "%s: job %d", p.url, j.id)
			}
			if s := q.Get("kind"); s != "" {
				require.Equal(t, s, j.kind, "%s: job %d", p.url, j.id)
			}
			if before != 0 {
				require.Less(t, j.id, before, "%s: below the cursor", p.url)
			}
		}
	case strings.HasPrefix(u.Path, "/jobs/"):
		m := h1RE.FindStringSubmatch(p.body)
		require.NotNil(t, m, p.url)
		require.True(t, strings.HasPrefix(m[1], "Job "+strings.TrimPrefix(u.Path, "/jobs/")+" "), "%s: %s", p.url, m[1])
	case u.Path == "/dead":
		require.Equal(t, q, jobsFilterOf(p.body), "%s: the form shows the filter", p.url)
	}
}

// checkConfirmCancel posts form (without confirm) to action, and requires
// the confirmation's Cancel link to lead back to path with the filter
// want.
func checkConfirmCancel(t *testing.T, d *dash, action string, form, want url.Values, path string) {
	t.Helper()
	code, body, _ := d.post(action, form, "")
	require.Equal(t, http.StatusOK, code, "%s %v: %s", action, form, body)
	var cancel *crawlLink
	for _, l := range parsePage(t, action, body).links {
		if l.text == "Cancel" {
			cancel = &l
		}
	}
	require.NotNil(t, cancel, "%s: no Cancel link", action)
	require.Equal(t, path, cancel.href.Path)
	for k, vs := range want {
		if len(vs) == 0 || vs[0] == "" {
			delete(want, k)
		}
	}
	require.Equal(t, want, cancel.href.Query(), "%s: Cancel goes back to the filter", action)
}
