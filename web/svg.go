package web

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/litequeue/litequeue"
)

// esc escapes text for SVG markup.
func esc(s string) string { return template.HTMLEscapeString(s) }

// timeline draws a job's failed attempts on a time axis: each attempt a bar
// from its start for its duration (red), each chosen retry delay a dashed
// line to the next attempt; the running attempt, if any, ends at its lease
// expiry. Every label is escaped.
func timeline(j litequeue.JobInfo) template.HTML {
	type seg struct {
		start, end time.Time
		kind       string // attempt, delay, running
		label      string
	}
	var segs []seg
	for _, a := range j.Attempts {
		segs = append(segs, seg{a.StartedAt, a.FinishedAt, "attempt", fmt.Sprintf("attempt %d: %s, %s", a.Attempt, fmtDur(a.FinishedAt.Sub(a.StartedAt)), a.Decision)})
		if a.Decision == litequeue.DecisionRetry {
			segs = append(segs, seg{a.FinishedAt, a.FinishedAt.Add(a.Delay), "delay", "waits " + fmtDur(a.Delay)})
		}
	}
	if j.State == litequeue.StateRunning && !j.AttemptedAt.IsZero() {
		segs = append(segs, seg{j.AttemptedAt, j.VisibleAt, "running", fmt.Sprintf("attempt %d running; lease until %s", j.Attempt, j.VisibleAt.UTC().Format(time.TimeOnly))})
	}
	if len(segs) == 0 {
		return ""
	}
	t0, t1 := segs[0].start, segs[0].end
	for _, s := range segs {
		if s.start.Before(t0) {
			t0 = s.start
		}
		if s.end.After(t1) {
			t1 = s.end
		}
	}
	span := t1.Sub(t0)
	if span <= 0 {
		span = 1
	}
	const w, rowH, left = 600.0, 22.0, 4.0
	h := rowH*float64(len(segs)) + 24
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="timeline" viewBox="0 0 %.0f %.0f" role="img" aria-label="attempt timeline">`, w+2*left, h)
	x := func(t time.Time) float64 { return left + w*float64(t.Sub(t0))/float64(span) }
	for i, s := range segs {
		y := float64(i)*rowH + 4
		x0, x1 := x(s.start), x(s.end)
		if x1-x0 < 3 {
			x1 = x0 + 3
		}
		switch s.kind {
		case "delay":
			fmt.Fprintf(&b, `<line class="delay" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, x0, y+8, x1, y+8)
		default:
			fmt.Fprintf(&b, `<rect class="%s" x="%.1f" y="%.1f" width="%.1f" height="14" rx="2"/>`, s.kind, x0, y+1, x1-x0)
		}
		anchor, tx := "start", x1+4
		if tx > w-160 {
			anchor, tx = "end", x0-4
			if tx < 160 {
				anchor, tx = "start", left+2
			}
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="%s">%s</text>`, tx, y+12, anchor, esc(s.label))
	}
	fmt.Fprintf(&b, `<text class="axis" x="%.1f" y="%.1f">%s</text>`, left, h-4, esc(t0.UTC().Format("15:04:05.000")))
	fmt.Fprintf(&b, `<text class="axis" x="%.1f" y="%.1f" text-anchor="end">+%s</text>`, w+left, h-4, esc(fmtDur(t1.Sub(t0))))
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// planStep is one failed attempt of a retry plan.
type planStep struct {
	Attempt    int
	Retry      bool
	Ceiling    time.Duration
	MinDelay   time.Duration
	Cumulative time.Duration
}

type planData struct {
	Policy  string
	Error   string
	Summary string
	Jitter  bool
	Steps   []planStep
	Chart   template.HTML
	Queues  []planQueue // the policies of the dashboard's configured queues
}

// planQueue is a configured queue's policy, as a link of the plan page.
type planQueue struct {
	Name    string
	Plan    url.Values // the plan page's query for the policy
	Current bool       // the page shows this policy
}

// defaultPolicy is the plan page's example.
const defaultPolicy = `{"max_attempts":6,"backoff":{"kind":"exponential","base":"1s","factor":2,"max":"5m0s","jitter":true}}`

// maxPlanAttempts bounds the schedule the page computes and draws.
const maxPlanAttempts = 1000

func (s *server) plan(w http.ResponseWriter, r *http.Request) {
	d := planData{Policy: r.URL.Query().Get("policy")}
	var asked *litequeue.RetryPolicy
	if d.Policy != "" {
		var p litequeue.RetryPolicy
		if json.Unmarshal([]byte(d.Policy), &p) == nil {
			asked = &p
		}
	}
	for _, c := range s.q.QueueConfigs() {
		b, err := json.Marshal(c.Retry)
		if err != nil {
			continue
		}
		if d.Policy == "" {
			d.Policy, asked = string(b), &c.Retry // no policy asked: the first configured queue's (by name)
		}
		d.Queues = append(d.Queues, planQueue{Name: c.Name, Plan: url.Values{"policy": {string(b)}}, Current: asked != nil && *asked == c.Retry})
	}
	if d.Policy == "" {
		d.Policy = defaultPolicy
	}
	var p litequeue.RetryPolicy
	if err := json.Unmarshal([]byte(d.Policy), &p); err != nil {
		d.Error = "Not a RetryPolicy: " + err.Error()
		s.render(w, r, http.StatusOK, "plan", &page{Title: "Retry plan", Nav: "plan", Data: d})
		return
	}
	n := p.Attempts()
	if n > maxPlanAttempts {
		d.Error = fmt.Sprintf("max_attempts is %d; the explorer draws at most %d", n, maxPlanAttempts)
		n = maxPlanAttempts
	}
	d.Jitter = p.Backoff.Kind == litequeue.BackoffExponential && p.Backoff.Jitter
	var total time.Duration
	for a := 1; a <= n; a++ {
		st := planStep{Attempt: a, Retry: a < p.Attempts()}
		if st.Retry {
			st.Ceiling = p.Backoff.Ceiling(a)
			if !d.Jitter {
				st.MinDelay = st.Ceiling
			}
			if total > time.Duration(1<<63-1)-st.Ceiling {
				total = time.Duration(1<<63 - 1)
			} else {
				total += st.Ceiling
			}
		}
		st.Cumulative = total
		d.Steps = append(d.Steps, st)
	}
	if n == 1 {
		d.Summary = "1 attempt: the job never retries; its first failure makes it a dead letter."
	} else {
		d.Summary = fmt.Sprintf("%d attempts; the longest time from the first failure to the last attempt is %s.", p.Attempts(), fmtDur(total))
	}
	d.Chart = planChart(d.Steps, d.Jitter)
	s.render(w, r, http.StatusOK, "plan", &page{Title: "Retry plan", Nav: "plan", Data: d})
}

// planChart draws each retry's wait as a bar (with jitter: the range 0 to
// the ceiling, lighter) and the cumulative maximum as a line.
func planChart(steps []planStep, jitter bool) template.HTML {
	var retries []planStep
	for _, s := range steps {
		if s.Retry {
			retries = append(retries, s)
		}
	}
	if len(retries) == 0 {
		return ""
	}
	const w, h, left, bottom = 600.0, 220.0, 56.0, 24.0
	var longest time.Duration
	for _, s := range retries {
		longest = max(longest, s.Cumulative, s.Ceiling)
	}
	step, n := durationTicks(longest, 5)
	top := step * time.Duration(n)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %.0f %.0f" role="img" aria-label="retry schedule">`, w+left+8, h+bottom)
	y := func(d time.Duration) float64 { return h - h*float64(d)/float64(top) + 4 }
	for i := 0; i <= n; i++ {
		d := step * time.Duration(i)
		fmt.Fprintf(&b, `<line class="grid" x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f"/><text class="axis" x="%.0f" y="%.1f" text-anchor="end">%s</text>`,
			left, y(d), w+left, y(d), left-4, y(d)+4, esc(tickLabel(d)))
	}
	bw := w / float64(len(retries))
	var line []string
	for i, s := range retries {
		x := left + float64(i)*bw
		cls := "bar"
		if jitter {
			cls = "bar jitter"
		}
		fmt.Fprintf(&b, `<rect class="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>retry #%d after attempt %d: wait %s</title></rect>`,
			cls, x+bw*0.15, y(s.Ceiling), bw*0.7, h+4-y(s.Ceiling), s.Attempt+1, s.Attempt, esc(waitRange(s, jitter)))
		line = append(line, fmt.Sprintf("%.1f,%.1f", x+bw/2, y(s.Cumulative)))
		if len(retries) <= 30 {
			fmt.Fprintf(&b, `<text class="axis" x="%.1f" y="%.1f" text-anchor="middle">%d</text>`, x+bw/2, h+bottom-4, s.Attempt)
		}
	}
	fmt.Fprintf(&b, `<polyline class="cumulative" points="%s"/>`, strings.Join(line, " "))
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func waitRange(s planStep, jitter bool) string {
	if jitter {
		return "0 to " + fmtDur(s.Ceiling)
	}
	return fmtDur(s.Ceiling)
}

// chart is a small time series drawn on the overview.
type chart struct {
	Title string
	SVG   template.HTML
}

// charts draws the overview's throughput charts from the queue's history:
// the last hour by minute and the last day by 20 minutes, attempts that
// succeeded stacked under those that failed (retried or dead), with the
// failure rate in the title. No chart when the file has no history yet.
func (s *server) charts(r *http.Request) []chart {
	now := s.q.Now()
	pts, err := s.q.History(r.Context(), "", now.Add(-24*time.Hour))
	if err != nil || len(pts) == 0 {
		return nil
	}
	return []chart{
		throughput("Last hour, per minute", pts, now, time.Minute, 60),
		throughput("Last day, per 20 minutes", pts, now, 20*time.Minute, 72),
	}
}

func throughput(title string, pts []litequeue.HistoryPoint, now time.Time, step time.Duration, n int) chart {
	end := now.Truncate(step).Add(step)
	start := end.Add(-time.Duration(n) * step)
	ok := make([]int, n)
	bad := make([]int, n)
	var okSum, badSum int
	for _, p := range pts {
		if p.Minute.Before(start) || !p.Minute.Before(end) {
			continue
		}
		i := int(p.Minute.Sub(start) / step)
		ok[i] += p.Succeeded
		bad[i] += p.Retried + p.Dead
		okSum += p.Succeeded
		badSum += p.Retried + p.Dead
	}
	top := 1
	for i := range ok {
		top = max(top, ok[i]+bad[i])
	}
	const w, h, left, bottom = 600.0, 120.0, 40.0, 16.0
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %.0f %.0f" role="img" aria-label="%s">`, w+left+4, h+bottom+4, esc(title))
	y := func(v int) float64 { return h - h*float64(v)/float64(top) + 2 }
	fmt.Fprintf(&b, `<line class="grid" x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f"/><text class="axis" x="%.0f" y="%.1f" text-anchor="end">%d</text>`,
		left, y(top), w+left, y(top), left-4, y(top)+8, top)
	fmt.Fprintf(&b, `<line class="grid" x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f"/><text class="axis" x="%.0f" y="%.1f" text-anchor="end">0</text>`,
		left, y(0), w+left, y(0), left-4, y(0))
	bw := w / float64(n)
	for i := range ok {
		x := left + float64(i)*bw
		at := start.Add(time.Duration(i) * step).UTC().Format("15:04")
		if ok[i] > 0 {
			fmt.Fprintf(&b, `<rect class="ok" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s: %d succeeded</title></rect>`,
				x+bw*0.1, y(ok[i]), bw*0.8, y(0)-y(ok[i]), at, ok[i])
		}
		if bad[i] > 0 {
			fmt.Fprintf(&b, `<rect class="fail" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s: %d failed</title></rect>`,
				x+bw*0.1, y(ok[i]+bad[i]), bw*0.8, y(ok[i])-y(ok[i]+bad[i]), at, bad[i])
		}
	}
	layout := "15:04"
	if end.Sub(start) > 12*time.Hour {
		layout = "Jan 2 15:04"
	}
	fmt.Fprintf(&b, `<text class="axis" x="%.0f" y="%.0f">%s</text><text class="axis" x="%.0f" y="%.0f" text-anchor="end">%s UTC</text></svg>`,
		left, h+bottom+2, start.UTC().Format(layout), w+left, h+bottom+2, end.UTC().Format(layout))
	rate := "no attempts"
	if okSum+badSum > 0 {
		rate = fmt.Sprintf("%d attempts, %.1f%% failed", okSum+badSum, 100*float64(badSum)/float64(okSum+badSum))
	}
	return chart{Title: title + ": " + rate, SVG: template.HTML(b.String())}
}
