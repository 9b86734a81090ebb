package web_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/web"
	"github.com/stretchr/testify/require"
)

// WfStep is a workflow node of the dashboard's tests.
type WfStep struct {
	Name string `json:"name"`
}

func (WfStep) Kind() string { return "wf_step" }

// The job page of a workflow's job draws the workflow: a box per job linked
// to its page, an arrow per dependency (dashed for one on any outcome), the
// page's job outlined, and a waiting job's tooltip saying what it waits for.
func TestWorkflowGraphInABrowser(t *testing.T) {
	ctx := browser(t)
	f := openFixture(t, nil)
	var w litequeue.Workflow
	a := w.Add(WfStep{Name: "a"}, nil)
	b := w.Add(WfStep{Name: "b"}, nil)
	c := w.Add(WfStep{Name: "c"}, nil)
	d := w.Add(WfStep{Name: "d"}, nil)
	w.Needs(b, a)
	w.After(c, a)
	w.Needs(d, b, c)
	ids, err := f.q.EnqueueWorkflow(context.Background(), &w)
	require.NoError(t, err)
	lone, err := f.q.Enqueue(context.Background(), WfStep{Name: "lone"}, nil)
	require.NoError(t, err)
	srv := serve(t, web.Handler(f.q, nil))

	step(t, ctx, chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, ids[d])), chromedp.WaitVisible(chromedp.CSS("svg.workflow")))
	require.Equal(t, 4, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg.workflow rect.node").length`)))
	require.Equal(t, 4, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg.workflow line.edge").length`)))
	require.Equal(t, 1, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg.workflow line.edge.after").length`)))
	require.Equal(t, fmt.Sprint(ids[d]), run(t, ctx, chromedp.Evaluate[string](`document.querySelector("svg.workflow rect.current").parentElement.dataset.node`)))
	tip := run(t, ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector('svg.workflow a[data-node="%d"] title').textContent`, ids[d])))
	require.Equal(t, fmt.Sprintf("job %d wf_step: waiting; waits for 2 of 2 parents: %d (waiting), %d (waiting)", ids[d], ids[b], ids[c]), tip)
	require.Equal(t, 3, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg.workflow rect.node.waiting").length`)))

	// A box is a link to its job's page, which draws the same workflow.
	clickAndLoad(t, ctx, fmt.Sprintf(`svg.workflow a[data-node="%d"] rect`, ids[a]))
	require.Contains(t, run(t, ctx, chromedp.Evaluate[string](`location.pathname`)), fmt.Sprintf("/jobs/%d", ids[a]))
	require.Equal(t, fmt.Sprint(ids[a]), run(t, ctx, chromedp.Evaluate[string](`document.querySelector("svg.workflow rect.current").parentElement.dataset.node`)))
	shoot(t, ctx, t.TempDir(), "job-workflow.png")

	// A job of no workflow has no graph.
	step(t, ctx, chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, lone)), chromedp.WaitVisible(chromedp.CSS("h1")))
	require.Equal(t, 0, run(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg.workflow").length`)))
}

// The job page of a workflow with live jobs has a Cancel workflow button
// that asks first; confirmed, it cancels every live job of the workflow
// and no other job, and the page then offers it no more.
func TestCancelWorkflowInABrowserAsksFirst(t *testing.T) {
	ctx := browser(t)
	f := openFixture(t, nil)
	bg := context.Background()
	var w litequeue.Workflow
	a := w.Add(WfStep{Name: "a"}, nil)
	b := w.Add(WfStep{Name: "b"}, nil)
	c := w.Add(WfStep{Name: "c"}, nil)
	w.Needs(b, a)
	w.After(c, a)
	ids, err := f.q.EnqueueWorkflow(bg, &w)
	require.NoError(t, err)
	lone, err := f.q.Enqueue(bg, WfStep{Name: "lone"}, nil)
	require.NoError(t, err)
	srv := serve(t, web.Handler(f.q, nil))
	text := func(sel string) string {
		return run(t, ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).textContent`, sel)))
	}
	button := `div.actions button[title^="Cancels the workflow"]`

	u := fmt.Sprintf("%s/jobs/%d", srv.URL, ids[b])
	step(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("svg.workflow")))
	require.Equal(t, "Cancels the workflow's 3 live jobs; asks first", run(t, ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).title`, button))))
	clickAndLoad(t, ctx, button)
	require.Equal(t, fmt.Sprintf("Cancel the workflow of job %d?", ids[b]), text("h1"))
	clickAndLoad(t, ctx, `form.confirm a.button-link`)
	require.Equal(t, u, run(t, ctx, chromedp.Evaluate[string](`location.href`)), "keep it: back to the job")
	for _, id := range ids {
		j, err := f.q.Job(bg, id)
		require.NoError(t, err)
		require.NotEqual(t, litequeue.StateCancelled, j.State, "nothing cancelled before the confirmation")
	}

	clickAndLoad(t, ctx, button)
	clickAndLoad(t, ctx, `form.confirm button[type=submit]`)
	require.Contains(t, text("p.flash"), fmt.Sprintf("Workflow of job %d: 3 jobs cancelled.", ids[b]))
	for _, id := range ids {
		j, err := f.q.Job(bg, id)
		require.NoError(t, err)
		require.Equal(t, litequeue.StateCancelled, j.State, "job %d", id)
	}
	j, err := f.q.Job(bg, lone)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateReady, j.State, "a job of no workflow is not touched")
	step(t, ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("svg.workflow")))
	require.Equal(t, 0, run(t, ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, button))), "nothing live: no button")
}
