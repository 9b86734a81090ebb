package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/humantime"
)

type rootKey struct{}

func withRoot(ctx context.Context, root string) context.Context {
	return context.WithValue(ctx, rootKey{}, root)
}

// rootOf returns the path the dashboard is mounted at, without a trailing
// slash ("" at the server's root).
func rootOf(r *http.Request) string {
	s, _ := r.Context().Value(rootKey{}).(string)
	return s
}

// page is what every template gets.
type page struct {
	Title    string
	Nav      string // the active section
	Root     string
	CSRF     string
	ReadOnly bool
	Live     bool
	Refresh  int // live refresh interval, ms
	Error    string
	Flash    string
	FlashJob int64 // a job the flash message names, linked after it
	Data     any
	// DeadBadge is the count of dead letters the navigation's badge shows
	// ("" when it could not be read: the live stream fills it then).
	DeadBadge string
}

var funcs = template.FuncMap{
	"time":   absTime, // replaced by each server's relTime (see parsePages)
	"human":  human,
	"dur":    fmtDur,
	"mulDur": func(d time.Duration, n int) time.Duration { return d * time.Duration(n) },
	"json": func(b json.RawMessage) string {
		var out bytes.Buffer
		if err := json.Indent(&out, b, "", "  "); err != nil {
			return string(b)
		}
		return out.String()
	},
	"states": litequeue.States,
	"num":    num,
	"trunc": func(n int, s string) string {
		if len(s) <= n {
			return s
		}
		return cutAtRuneStart(s, n) + "…"
	},
	"join": strings.Join,
	// query is the URL query of the pairs of key and value kv, without
	// the empty values (an odd one out is dropped).
	"query": func(kv ...string) url.Values {
		v := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] != "" {
				v.Set(kv[i], kv[i+1])
			}
		}
		return v
	},
	// firstLine is the first line of s, from its first maxShownText bytes.
	"firstLine": func(s string) string {
		s = cutAtRuneStart(s, maxShownText)
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			return s[:i]
		}
		return s
	},
	"add":         func(a, b int) int { return a + b },
	"link":        link,
	"clip":        clip,
	"oldest":      oldestWaiting,
	"scheduleURL": scheduleURL,
	"post":        newPostForm,
	"percent":     percent,
	// zoned shows t in the IANA zone tz, "" when tz is UTC or unknown.
	"zoned": func(t time.Time, tz string) string {
		if t.IsZero() || tz == "" || tz == "UTC" {
			return ""
		}
		loc, err := time.LoadLocation(tz)
		if err != nil {
			return ""
		}
		return t.In(loc).Format("2006-01-02 15:04 MST")
	},
}

// num shows n with thousands separators.
func num(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// maxShownText bounds a stored text (an error, an output) that a page
// shows: a file may hold errors of any size.
const maxShownText = 64 << 10

// clip is the template function "clip": s cut to maxShownText bytes, with a
// line saying how much was left out.
func clip(s string) string {
	if len(s) <= maxShownText {
		return s
	}
	cut := cutAtRuneStart(s, maxShownText)
	return fmt.Sprintf("%s\n… [%s more bytes not shown]", cut, num(len(s)-len(cut)))
}

// cutAtRuneStart returns s cut to at most n bytes, at the start of a rune.
func cutAtRuneStart(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// oldestWaiting is how long s's oldest ready job has waited ("+" when that
// is an "at least" figure), or "—" when none waits.
func oldestWaiting(s litequeue.QueueSummary) string {
	if s.OldestReadyID == 0 {
		return noneWaiting
	}
	return humantime.Age(s.OldestReady) + plus(s.OldestReadyCapped)
}

const noneWaiting = "—"

// fmtDur shows a duration to about three significant figures.
func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d < time.Millisecond:
		return d.String()
	case d < time.Second:
		return d.Round(time.Millisecond / 10).String()
	case d < time.Minute:
		return d.Round(time.Millisecond * 10).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		return d.Round(time.Minute).String()
	}
	return fmt.Sprintf("%.1fd", d.Hours()/24)
}

// absTime shows t as an absolute UTC time to the millisecond, "—" for the
// zero time.
func absTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
}

// relTime is the template function "time": t relative to now ("3m ago",
// "in 2h", "now") in a <time> element whose title, shown on hover, is the
// absolute UTC time (see absTime), and whose datetime attribute is t in
// RFC 3339; "—" for the zero time.
func relTime(t, now time.Time) template.HTML {
	if t.IsZero() {
		return "—"
	}
	return template.HTML(`<time datetime="` + t.UTC().Format(time.RFC3339Nano) + `" title="` + absTime(t) + `">` +
		template.HTMLEscapeString(humantime.Rel(t, now)) + `</time>`)
}

// humanWords are the stored enum values a page shows in other words;
// other values are shown with their underscores as spaces (see human).
var humanWords = map[string]string{
	"give_up":   "gave up",
	"retry":     "retried",
	"permanent": "failed permanently",
	"snooze":    "snoozed",
}

// human is the template function "human": an enum value (a decision, a
// schedule event's type, an outcome) in words: "give_up" is "gave up".
func human(v any) string {
	s := fmt.Sprint(v)
	if w, ok := humanWords[s]; ok {
		return w
	}
	return strings.ReplaceAll(s, "_", " ")
}

// parsePages parses the page templates, with the template function "time"
// showing times relative to now() (the queue's clock; see relTime).
func parsePages(now func() time.Time) map[string]*template.Template {
	fm := template.FuncMap{}
	maps.Copy(fm, funcs)
	fm["time"] = func(t time.Time) template.HTML { return relTime(t, now()) }
	base := template.Must(template.New("layout.html").Funcs(fm).ParseFS(templateFS, "templates/layout.html", "templates/forms.html"))
	out := map[string]*template.Template{}
	for _, name := range []string{"overview", "jobs", "job", "dead", "queues", "queue", "schedules", "schedule", "processes", "remove", "jobconfirm", "plan", "confirm", "error", "login"} {
		t := template.Must(base.Clone())
		out[name] = template.Must(t.ParseFS(templateFS, "templates/"+name+".html"))
	}
	return out
}

// render answers r with the page name, with status code: the headers first,
// then the status, then the page.
func (s *server) render(w http.ResponseWriter, r *http.Request, code int, name string, p *page) {
	p.Root = rootOf(r)
	p.ReadOnly = s.opts.ReadOnly
	p.Live = s.opts.RefreshInterval > 0 && name != "login"
	p.Refresh = int(s.opts.RefreshInterval / time.Millisecond)
	if !s.opts.ReadOnly {
		p.CSRF = s.csrfToken(w, r)
	}
	if p.Flash == "" {
		p.Flash, p.FlashJob = flashFrom(r.URL.Query())
	}
	if name != "login" {
		p.DeadBadge = s.deadBadge(r.Context())
	}
	var buf bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&buf, "layout.html", p); err != nil {
		s.opts.Logger.Error("litequeue/web: render", "page", name, "error", err)
		http.Error(w, "the page failed to render: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

// deadBadge is the text of the dead-letter badge: the dead letters among
// the countLimit most recent, as the live stream counts them (see
// liveFrom), read through the finished index; "" when the read fails.
func (s *server) deadBadge(ctx context.Context) string {
	counts, capped, err := s.q.FinishedCounts(ctx, litequeue.StateDead, countLimit)
	if err != nil {
		s.opts.Logger.Warn("litequeue/web: count dead letters", "error", err)
		return ""
	}
	total := 0
	for _, n := range counts {
		total += n
	}
	return num(total) + plus(capped)
}

func (s *server) fail(w http.ResponseWriter, r *http.Request, code int, err error) {
	s.opts.Logger.Warn("litequeue/web: request failed", "path", r.URL.Path, "error", err)
	s.render(w, r, code, "error", &page{Title: http.StatusText(code), Error: err.Error()})
}

// overview shows the per-queue counts.
func (s *server) overview(w http.ResponseWriter, r *http.Request) {
	rows, err := s.queueRows(r.Context())
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	s.render(w, r, http.StatusOK, "overview", &page{Title: "Overview", Nav: "overview", Data: overviewData{Queues: rows, Charts: s.charts(r)}})
}

type overviewData struct {
	Queues []queueRow
	Charts []chart
}

type jobsData struct {
	Filter jobFilter
	Page   litequeue.JobPage
	Older  url.Values // the query of the next (older) page; nil on the last
	// NoGroup is the query of the same list without its job group (the
	// link that removes that filter); nil without one.
	NoGroup url.Values
}

func (s *server) jobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f, err := filterFrom(q)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	before, err := cursorFrom(q)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	var pg litequeue.JobPage
	switch {
	case f.JobGroup != "":
		pg, err = s.groupJobs(r.Context(), f, before)
	case f.Group != "":
		pg, err = s.q.ListDeadGroup(r.Context(), f.Group, f.query(), litequeue.PageRequest{Before: before, Limit: s.opts.PageSize})
	default:
		pg, err = s.q.ListJobs(r.Context(), f.query(), litequeue.PageRequest{Before: before, Limit: s.opts.PageSize})
	}
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	d := jobsData{Filter: f, Page: pg}
	if f.JobGroup != "" {
		d.NoGroup = f.Values()
		d.NoGroup.Del("jobgroup")
	}
	if pg.Next != 0 {
		d.Older = f.Values()
		d.Older.Set("before", strconv.FormatInt(pg.Next, 10))
	}
	s.render(w, r, http.StatusOK, "jobs", &page{Title: "Jobs", Nav: "jobs", Data: d})
}

type jobData struct {
	Job      litequeue.JobInfo
	Timeline template.HTML
	Workflow template.HTML // the job's workflow as a graph (workflow.go); "" for a job of none
	// WorkflowLive counts the workflow's live jobs (what its Cancel
	// workflow button would cancel).
	WorkflowLive int
	Watch        bool // stream the job's progress: live refresh is on and the job is not finished
}

func (s *server) job(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		s.fail(w, r, http.StatusBadRequest, fmt.Errorf("%q is not a job id (a positive integer)", r.PathValue("id")))
		return
	}
	j, err := s.q.Job(r.Context(), id)
	if errors.Is(err, litequeue.ErrNotFound) {
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("job %d does not exist: it may have succeeded (succeeded jobs are deleted unless CompletedRetention keeps them), or been deleted or purged", id))
		return
	}
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	nodes, err := s.q.Workflow(r.Context(), id)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	live := 0
	for _, n := range nodes {
		if !isFinished(n.State) && n.State != "" {
			live++
		}
	}
	s.render(w, r, http.StatusOK, "job", &page{Title: fmt.Sprintf("Job %d", id), Nav: "jobs", Data: jobData{Job: j, Timeline: timeline(j),
		Workflow: workflowGraph(rootOf(r), id, nodes), WorkflowLive: live, Watch: s.opts.RefreshInterval > 0 && !isFinished(j.State)}})
}

type deadData struct {
	Queue, Kind string
	Groups      []litequeue.DeadGroup
	Limit       int
	Total       int
	Merged      bool // the last group is the remainder (see DeadGroup.Merged)
}

func (s *server) dead(w http.ResponseWriter, r *http.Request) {
	f, err := deadFilterFrom(r.URL.Query())
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	d := deadData{Queue: f.Queue, Kind: f.Kind, Limit: litequeue.DefaultGroupLimit}
	groups, err := s.q.GroupDeadLetters(r.Context(), litequeue.JobQuery{Queue: d.Queue, Kind: d.Kind}, litequeue.GroupLimits{Limit: d.Limit})
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	d.Groups = groups
	for _, g := range groups {
		d.Total += g.Count
		d.Merged = d.Merged || g.Merged > 0
	}
	s.render(w, r, http.StatusOK, "dead", &page{Title: "Dead letters", Nav: "dead", Data: d})
}

// jobAction runs run (now: a scheduled job), requeue (a dead letter),
// retry (a cancelled job), cancel or delete on one job, then goes back to it
// (or to the jobs list when it is gone). Cancelling a running job and
// deleting a dead letter first show a confirmation page (see
// confirmJobAction) unless the form says confirm=yes.
func (s *server) jobAction(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		s.fail(w, r, http.StatusBadRequest, fmt.Errorf("%q is not a job id", r.PathValue("id")))
		return
	}
	ctx := r.Context()
	back := fmt.Sprintf("%s/jobs/%d", rootOf(r), id)
	a := r.PathValue("action")
	if _, ok := jobConfirmations[a]; ok && r.PostFormValue("confirm") != "yes" {
		if s.confirmJobAction(w, r, a, id) {
			return
		}
	}
	var code string
	switch a {
	case "requeue":
		_, err = s.q.Requeue(ctx, id)
		code = "job-requeued"
	case "run":
		err = s.q.RunNow(ctx, id)
		code = "job-run-now"
	case "retry":
		_, err = s.q.RequeueCancelled(ctx, id)
		code = "job-retried"
	case "cancel":
		_, err = s.q.Cancel(ctx, id) // a running job's handler is stopped too
		code = "job-cancelled"       // kept: back to it
	case "delete":
		_, err = s.q.DeleteJobs(ctx, litequeue.JobQuery{IDs: []int64{id}})
		code, back = "job-deleted", rootOf(r)+"/jobs"
	case "cancel-workflow":
		var n int
		n, err = s.q.CancelWorkflow(ctx, id)
		s.finishAction(w, r, err, back, flashValues("workflow-cancelled", id, n, ""), "job_id", id)
		return
	default:
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("no action %q; use run, requeue, retry, cancel, cancel-workflow or delete", a))
		return
	}
	s.finishAction(w, r, err, back, flashValues(code, id, 0, ""), "job_id", id)
}

// jobConfirm is what the confirmation of one job's action says: the
// question, what it does, the button, and the link that keeps the job.
type jobConfirm struct {
	State                        litequeue.State // the state the action asks a confirmation in; "" for every state
	Question, Effect, Verb, Keep string
}

// jobConfirmations are the actions on one job that ask first, in the state
// they ask in: stopping a running handler, deleting a dead letter.
var jobConfirmations = map[string]jobConfirm{
	"cancel": {State: litequeue.StateRunning, Question: "Cancel running job %d?",
		Effect: "Its handler is stopped now (its context is cancelled with ErrJobCancelled), whatever it was doing; the job becomes cancelled and is not retried. It stays listed, and can be requeued from its page.",
		Verb:   "Cancel the job", Keep: "Keep it running"},
	"delete": {State: litequeue.StateDead, Question: "Delete dead letter %d?",
		Effect: "The job and its attempts' history are deleted for good: it can no longer be inspected or requeued.",
		Verb:   "Delete", Keep: "Keep it"},
	"cancel-workflow": {Question: "Cancel the workflow of job %d?",
		Effect: "Every live job of the workflow (ready, scheduled, waiting or running) is cancelled now, running handlers stopped; finished jobs stay as they are. Each cancelled job stays listed and can be retried from its page.",
		Verb:   "Cancel the workflow", Keep: "Keep it running"},
}

type jobConfirmData struct {
	jobConfirm
	Action string
	Job    litequeue.JobInfo
}

// confirmJobAction shows the confirmation of action on job id when the job
// is in the state that asks one, and reports whether it answered r (the
// confirmation, or the error page when the job cannot be read); false lets
// the action run.
func (s *server) confirmJobAction(w http.ResponseWriter, r *http.Request, action string, id int64) bool {
	c := jobConfirmations[action]
	j, err := s.q.Job(r.Context(), id)
	if errors.Is(err, litequeue.ErrNotFound) {
		return false // the action says so
	}
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return true
	}
	if c.State != "" && j.State != c.State {
		return false
	}
	c.Question = fmt.Sprintf(c.Question, id)
	s.render(w, r, http.StatusOK, "jobconfirm", &page{Title: "Confirm", Nav: "jobs", Data: jobConfirmData{jobConfirm: c, Action: action, Job: j}})
	return true
}

// bulkActions are the bulk actions and the states each applies to.
var bulkActions = map[string]struct {
	verb   string
	states string
}{
	"requeue": {"Requeue", "dead letters"},
	"cancel":  {"Cancel", "pending (ready or scheduled) jobs"},
	"delete":  {"Delete", "dead, completed and cancelled jobs"},
}

type confirmData struct {
	Action, Verb, States string
	Scope                string // "selected" or "filter"
	IDs                  []int64
	Filter               jobFilter
	Group                string // requeue of a dead-letter group
	Count                int
	CountCapped          bool
	Describe             string
}

// confirmLimit bounds the count shown on a confirmation.
const confirmLimit = 1_000_000

// bulk runs a bulk action on the selected jobs or on every job matching
// the filter. Without confirm=yes it shows what it would do and how many
// jobs that is, and asks.
func (s *server) bulk(w http.ResponseWriter, r *http.Request) {
	req, err := bulkFrom(r.PostForm)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	a := bulkActions[req.Action]
	f := req.Filter
	jq := f.query()
	d := confirmData{Action: req.Action, Verb: a.verb, States: a.states, Scope: req.Scope, Filter: f, IDs: req.IDs}
	if req.Scope == "selected" {
		jq = litequeue.JobQuery{IDs: req.IDs}
		d.Describe = fmt.Sprintf("the %d selected jobs", len(req.IDs))
	} else {
		d.Describe = "every job matching the filter"
	}
	ctx := r.Context()
	switch req.Action {
	case "requeue":
		jq.States = []litequeue.State{litequeue.StateDead}
	case "cancel":
		jq.States = narrowStates(jq.States, litequeue.StateReady, litequeue.StateScheduled)
	case "delete":
		jq.States = narrowStates(jq.States, litequeue.StateCompleted, litequeue.StateDead)
	}
	if !req.Confirm {
		if len(jq.States) > 0 {
			d.Count, err = s.q.CountJobs(ctx, jq, confirmLimit)
			if err != nil {
				s.fail(w, r, http.StatusInternalServerError, err)
				return
			}
		}
		d.CountCapped = d.Count >= confirmLimit
		s.render(w, r, http.StatusOK, "confirm", &page{Title: "Confirm", Nav: "jobs", Data: d})
		return
	}
	jq.States = nil // the action method narrows to its own states
	if f.State != "" && req.Scope == "filter" {
		st, _ := litequeue.ParseState(f.State)
		jq.States = []litequeue.State{st}
	}
	var n int
	switch req.Action {
	case "requeue":
		n, err = s.q.RequeueJobs(ctx, jq)
	case "cancel":
		n, err = s.q.CancelJobs(ctx, jq)
	case "delete":
		n, err = s.q.DeleteJobs(ctx, jq)
	}
	if err != nil {
		s.fail(w, r, http.StatusConflict, fmt.Errorf("%s stopped after %d jobs: %w", strings.ToLower(a.verb), n, err))
		return
	}
	s.opts.Logger.Info("litequeue/web: bulk "+req.Action, "scope", req.Scope, "jobs", n)
	v := f.Values()
	for k, vs := range flashValues("bulk-"+req.Action, 0, n, "") {
		v[k] = vs
	}
	http.Redirect(w, r, rootOf(r)+"/jobs?"+v.Encode(), http.StatusSeeOther)
}

func narrowStates(asked []litequeue.State, want ...litequeue.State) []litequeue.State {
	if len(asked) == 0 {
		return want
	}
	var out []litequeue.State
	for _, w := range want {
		for _, a := range asked {
			if a == w {
				out = append(out, w)
			}
		}
	}
	return out
}

// requeueGroup requeues (POST /dead/requeue) or deletes (POST
// /dead/delete) a dead-letter group after a confirmation.
func (s *server) requeueGroup(w http.ResponseWriter, r *http.Request) {
	a := r.PathValue("action")
	if a != "requeue" && a != "delete" {
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("no dead-letter group action %q; use requeue or delete", a))
		return
	}
	del := a == "delete"
	key := r.PostFormValue("key")
	f, err := deadFilterFrom(r.PostForm)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	gq := litequeue.JobQuery{Queue: f.Queue, Kind: f.Kind}
	if key == "" {
		s.fail(w, r, http.StatusBadRequest, errors.New("no group given"))
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		d := confirmData{Action: "requeue", Verb: "Requeue", States: "dead letters", Group: key,
			Filter: jobFilter{Queue: gq.Queue, Kind: gq.Kind}, Describe: "every dead letter whose error is like"}
		if del {
			d.Action, d.Verb, d.Describe = "delete", "Delete", "for good, with its history, every dead letter whose error is like"
		}
		d.Count, _ = strconv.Atoi(r.PostFormValue("count"))
		s.render(w, r, http.StatusOK, "confirm", &page{Title: "Confirm", Nav: "dead", Data: d})
		return
	}
	var n int
	verb, code := "requeue", "group-requeued"
	if del {
		verb, code = "delete", "group-deleted"
		n, err = s.q.DeleteDeadGroup(r.Context(), key, gq)
	} else {
		n, err = s.q.RequeueGroup(r.Context(), key, gq)
	}
	if err != nil {
		s.fail(w, r, http.StatusConflict, fmt.Errorf("%s stopped after %d jobs: %w", verb, n, err))
		return
	}
	s.opts.Logger.Info("litequeue/web: "+verb+" group", "key", key, "jobs", n)
	back := link(rootOf(r), "/dead", jobFilter{Queue: gq.Queue, Kind: gq.Kind}.DeadValues())
	redirectDone(w, r, string(back), flashValues(code, 0, n, ""))
}

// countLimit bounds the live counts of the overview and the live refresh:
// exact below it, shown with a "+" at it (about 0.3s per page on a file of
// a million jobs; see BenchmarkPagesOnAMillionJobs).
const countLimit = 10_000
