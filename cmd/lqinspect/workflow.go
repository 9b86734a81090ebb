package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/litequeue/litequeue"
)

// workflow: a stored workflow as a text graph, and cancelling all of it.

func (a *app) workflow(args []string) error {
	fs := a.newFlags("workflow", "FILE ID [--cancel-all]", `
Print the workflow that holds job ID (litequeue.Workflow): every job
reachable from it through dependencies, one line each with its kind, queue
and state, its parents (with "after" for a dependency on any outcome) and,
for a waiting job, which parents it still waits for and in what state they
are; a cancelled dependant shows the parent that cancelled it. A succeeded
job's row is deleted unless completed jobs are retained: it shows as gone.
--cancel-all cancels every pending, scheduled, waiting or running job of
the workflow (their dependants that need them are cancelled with them).`)
	cancelAll := fs.Bool("cancel-all", false, "cancel every live job of the workflow")
	fs.jsonFlag()
	fs.fileFlags(true)
	path, ids, err := fs.parseFileIDs(args)
	if err != nil {
		return err
	}
	if len(ids) != 1 {
		return usagef("want FILE and one job ID, got %d IDs", len(ids))
	}
	read := func(ctx context.Context, f *file) ([]litequeue.WorkflowNode, error) {
		nodes, err := f.q.Workflow(ctx, ids[0])
		if errors.Is(err, litequeue.ErrNotFound) {
			return nil, fmt.Errorf("no job with id %d in %s: no job had that id, or it was deleted", ids[0], f.name())
		}
		return nodes, err
	}
	if *cancelAll {
		return a.mutation(fs, path, "cancelled", "job", func(ctx context.Context, f *file) (int, error) {
			n, err := f.q.CancelWorkflow(ctx, ids[0])
			if errors.Is(err, litequeue.ErrNotFound) {
				return 0, fmt.Errorf("no job with id %d in %s: no job had that id, or it was deleted", ids[0], f.name())
			}
			if err != nil {
				return 0, fmt.Errorf("%w; nothing was cancelled", err)
			}
			return n, nil
		})
	}
	f, err := a.open(path, fs, false)
	if err != nil {
		return err
	}
	defer f.Close()
	nodes, err := read(a.ctx, f)
	if err != nil {
		return err
	}
	if fs.json {
		return writeJSON(a.stdout, nodes)
	}
	return showWorkflow(a.stdout, nodes)
}

// showWorkflow prints nodes one per line, by id: parents before children
// in a workflow enqueued in one call.
func showWorkflow(w io.Writer, nodes []litequeue.WorkflowNode) error {
	for _, n := range nodes {
		state := string(n.State)
		if state == "" {
			state = "gone (succeeded, not retained)"
		}
		line := fmt.Sprintf("job %d %s [%s] %s", n.ID, n.Kind, n.Queue, state)
		if len(n.Parents) > 0 {
			var ps []string
			for _, p := range n.Parents {
				s := fmt.Sprint(p.Parent)
				if p.After {
					s += " (after)"
				}
				ps = append(ps, s)
			}
			line += " <- " + strings.Join(ps, ", ")
		}
		if why := n.Waits(nodes); why != "" {
			line += "; " + why
		}
		if n.Reason != "" {
			line += "; " + n.Reason
		}
		if _, err := fmt.Fprintln(w, safeLine(line)); err != nil {
			return err
		}
	}
	return nil
}
