package web

import (
	"fmt"
	"html/template"
	"strings"

	"github.com/litequeue/litequeue"
)

// workflowGraph draws the workflow of a job (Queue.Workflow) as an SVG
// graph: one box per job in columns by depth (parents left of their
// children), an arrow from each parent to its child (dashed for a
// dependency on any outcome), each box a link to its job's page with its
// kind and state, the current job outlined. A waiting job's box says what
// it waits for in its tooltip. Nothing for a job of no workflow.
func workflowGraph(root string, current int64, nodes []litequeue.WorkflowNode) template.HTML {
	if len(nodes) < 2 {
		return ""
	}
	index := map[int64]int{}
	for i, n := range nodes {
		index[n.ID] = i
	}
	// Depth: the longest chain of parents above a node among those shown.
	depth := make([]int, len(nodes))
	for changed, rounds := true, 0; changed && rounds < len(nodes); rounds++ {
		changed = false
		for i, n := range nodes {
			for _, p := range n.Parents {
				if k, ok := index[p.Parent]; ok && depth[k]+1 > depth[i] {
					depth[i], changed = depth[k]+1, true
				}
			}
		}
	}
	const boxW, boxH, gapX, gapY, pad = 170, 44, 60, 16, 10
	row := map[int]int{}
	x := make([]int, len(nodes))
	y := make([]int, len(nodes))
	width, height := 0, 0
	for i := range nodes {
		x[i] = pad + depth[i]*(boxW+gapX)
		y[i] = pad + row[depth[i]]*(boxH+gapY)
		row[depth[i]]++
		width, height = max(width, x[i]+boxW+pad), max(height, y[i]+boxH+pad)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="workflow" role="img" aria-label="workflow of %d jobs" width="%d" height="%d" viewBox="0 0 %d %d">`,
		len(nodes), width, height, width, height)
	b.WriteString(`<defs><marker id="wf-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>`)
	for i, n := range nodes {
		for _, p := range n.Parents {
			k, ok := index[p.Parent]
			if !ok {
				continue
			}
			class := "edge"
			if p.After {
				class += " after"
			}
			fmt.Fprintf(&b, `<line class="%s" data-parent="%d" data-child="%d" x1="%d" y1="%d" x2="%d" y2="%d" marker-end="url(#wf-arrow)"/>`,
				class, p.Parent, n.ID, x[k]+boxW, y[k]+boxH/2, x[i], y[i]+boxH/2)
		}
	}
	for i, n := range nodes {
		state := string(n.State)
		if state == "" {
			state = "gone"
		}
		title := fmt.Sprintf("job %d %s: %s", n.ID, n.Kind, state)
		if why := n.Waits(nodes); why != "" {
			title += "; " + why
		}
		if n.Reason != "" {
			title += "; " + n.Reason
		}
		class := "node state " + state
		if n.ID == current {
			class += " current"
		}
		fmt.Fprintf(&b, `<a href="%s/jobs/%d" data-node="%d"><title>%s</title><rect class="%s" x="%d" y="%d" width="%d" height="%d" rx="6"/>`,
			esc(root), n.ID, n.ID, esc(title), esc(class), x[i], y[i], boxW, boxH)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%d %s</text><text class="st" x="%d" y="%d">%s</text></a>`,
			x[i]+8, y[i]+18, n.ID, esc(clipKind(n.Kind)), x[i]+8, y[i]+35, esc(state))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// clipKind shortens a kind to fit a graph box.
func clipKind(k string) string {
	if r := []rune(k); len(r) > 18 {
		return string(r[:17]) + "…"
	}
	return k
}
