package web

import (
	"errors"
	"fmt"
	"html/template"
	"net/url"
	"strconv"
	"strings"

	"github.com/litequeue/litequeue"
)

// The dashboard's parsers of outside input: the query of the jobs and dead
// letters pages (filters and the cursor), and the bulk form (an action, a
// scope and a list of ids). Each refuses what it cannot take with an error
// that says what was wrong; FuzzParams runs them on arbitrary input.

// Bounds of the input the parsers take.
const (
	maxFilterName  = 1024   // bytes of a queue or kind filter
	maxFilterText  = 200    // bytes of a text filter
	maxFilterGroup = 4096   // bytes of a dead-letter group's key
	maxSelected    = 10_000 // ids of one bulk selection
)

// jobFilter is the filter of the jobs page, as in its query string. Group,
// when set, is a dead-letter group's key (litequeue.DeadGroup.Key): the
// page lists that group's dead letters (see Queue.ListDeadGroup), and
// State and Text do not apply. JobGroup, when set, is a job group
// (litequeue.EnqueueOptions.Group, the groups of the queue page): the page
// lists that group's jobs (litequeue.JobFilter.Group), and Text, Tag and
// Group do not apply.
type jobFilter struct {
	Queue, Kind, State, Text string
	Group                    string
	Tag                      string // a tag the jobs carry (litequeue.JobQuery.Tags)
	JobGroup                 string
}

// filterFrom reads the filter of the query (or form) v: "queue", "kind"
// (trimmed of surrounding spaces; at most maxFilterName bytes each),
// "state" (one of litequeue.States), "q" (at most maxFilterText bytes) and
// "group" (at most maxFilterGroup bytes; with it, state must be empty or
// dead and q empty), "tag" (trimmed; at most maxFilterName bytes; a
// string no tag can be selects nothing) and "jobgroup" (as it is, not
// trimmed: a group is any string; at most maxFilterGroup bytes; with it,
// q, tag and group must be empty).
func filterFrom(v url.Values) (jobFilter, error) {
	f := jobFilter{Queue: strings.TrimSpace(v.Get("queue")), Kind: strings.TrimSpace(v.Get("kind")),
		State: v.Get("state"), Text: v.Get("q"), Group: v.Get("group"), Tag: strings.TrimSpace(v.Get("tag")),
		JobGroup: v.Get("jobgroup")}
	if len(f.JobGroup) > maxFilterGroup {
		return jobFilter{}, fmt.Errorf("the job group filter is %d bytes long; at most %d are taken", len(f.JobGroup), maxFilterGroup)
	}
	if f.JobGroup != "" && (f.Text != "" || f.Tag != "" || f.Group != "") {
		return jobFilter{}, errors.New("a job group's jobs are listed by queue, kind and state only: drop q, tag and group, or clear the job group")
	}
	if len(f.Group) > maxFilterGroup {
		return jobFilter{}, fmt.Errorf("the group filter is %d bytes long; at most %d are taken (open the group from the dead letters page)", len(f.Group), maxFilterGroup)
	}
	if f.Group != "" && (f.Text != "" || (f.State != "" && f.State != string(litequeue.StateDead))) {
		return jobFilter{}, errors.New("a dead-letter group lists dead letters only, without a text filter: drop state and q, or clear the group")
	}
	for _, c := range []struct {
		name, s string
		max     int
	}{{"queue", f.Queue, maxFilterName}, {"kind", f.Kind, maxFilterName}, {"text", f.Text, maxFilterText}, {"tag", f.Tag, maxFilterName}} {
		if len(c.s) > c.max {
			return jobFilter{}, fmt.Errorf("the %s filter is %d bytes long; at most %d are taken", c.name, len(c.s), c.max)
		}
	}
	if f.State != "" {
		if _, err := litequeue.ParseState(f.State); err != nil {
			return jobFilter{}, err
		}
	}
	return f, nil
}

// deadFilterFrom reads the filter of the dead letters page from the query
// (or form) v: "queue" and "kind", as filterFrom does.
func deadFilterFrom(v url.Values) (jobFilter, error) {
	f, err := filterFrom(url.Values{"queue": v["queue"], "kind": v["kind"]})
	if err != nil {
		return jobFilter{}, err
	}
	return jobFilter{Queue: f.Queue, Kind: f.Kind}, nil
}

// query is the filter as a litequeue.JobQuery.
func (f jobFilter) query() litequeue.JobQuery {
	q := litequeue.JobQuery{Queue: f.Queue, Kind: f.Kind, Text: f.Text}
	if f.Tag != "" {
		q.Tags = []string{f.Tag}
	}
	if st, err := litequeue.ParseState(f.State); err == nil && f.State != "" {
		q.States = []litequeue.State{st}
	}
	return q
}

// Values is the filter as query parameters, without the empty ones.
func (f jobFilter) Values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"queue": f.Queue, "kind": f.Kind, "state": f.State, "q": f.Text, "group": f.Group, "tag": f.Tag, "jobgroup": f.JobGroup} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// DeadValues is the part of the filter the dead letters page takes (queue
// and kind) as query parameters.
func (f jobFilter) DeadValues() url.Values {
	v := url.Values{}
	if f.Queue != "" {
		v.Set("queue", f.Queue)
	}
	if f.Kind != "" {
		v.Set("kind", f.Kind)
	}
	return v
}

func (f jobFilter) Empty() bool { return f == jobFilter{} }

// cursorFrom reads the jobs page's cursor, "before": a job id, or 0
// (absent) for the newest page.
func cursorFrom(v url.Values) (int64, error) {
	s := v.Get("before")
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("the page cursor %q is not a job id; follow the Older link, or start from the newest page", s)
	}
	return n, nil
}

// bulkRequest is what the bulk form asks for.
type bulkRequest struct {
	Action  string // requeue, cancel or delete
	Scope   string // "selected" (IDs) or "filter"
	IDs     []int64
	Filter  jobFilter
	Confirm bool // confirm=yes: act, rather than ask
}

// bulkFrom reads the bulk form v: "action", "scope", the filter, "id"s
// (positive job ids, at most maxSelected, at least one for the scope
// "selected") and "confirm".
func bulkFrom(v url.Values) (bulkRequest, error) {
	b := bulkRequest{Action: v.Get("action"), Scope: v.Get("scope"), Confirm: v.Get("confirm") == "yes"}
	if _, ok := bulkActions[b.Action]; !ok {
		return bulkRequest{}, fmt.Errorf("no bulk action %q; use requeue, cancel or delete", b.Action)
	}
	f, err := filterFrom(v)
	if err != nil {
		return bulkRequest{}, err
	}
	b.Filter = f
	switch b.Scope {
	case "selected":
		ids := v["id"]
		if len(ids) > maxSelected {
			return bulkRequest{}, fmt.Errorf("%d jobs are selected; select at most %d, or act on everything matching the filter", len(ids), maxSelected)
		}
		for _, s := range ids {
			id, err := strconv.ParseInt(s, 10, 64)
			if err != nil || id <= 0 {
				return bulkRequest{}, fmt.Errorf("%q is not a job id", s)
			}
			b.IDs = append(b.IDs, id)
		}
		if len(b.IDs) == 0 {
			return bulkRequest{}, errors.New("no job is selected: tick the jobs to act on, or act on everything matching the filter")
		}
	case "filter":
		if f.Group != "" {
			return bulkRequest{}, errors.New("a dead-letter group is acted on from the dead letters page (Requeue group, Delete group); here, select its jobs")
		}
		if f.JobGroup != "" {
			return bulkRequest{}, errors.New("a job group's jobs are acted on by selecting them; everything matching the filter would reach past the group")
		}
	default:
		return bulkRequest{}, fmt.Errorf("scope %q: use selected or filter", b.Scope)
	}
	return b, nil
}

// link is the template function "link": the URL of path below the mount
// point root, with the query v. It is built here, every part escaped once,
// and handed to the template as a URL so that the query is not escaped
// again.
func link(root, path string, v url.Values) template.URL {
	u := url.URL{Path: root + path, RawQuery: v.Encode()}
	return template.URL(u.String())
}
