package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/litequeue/litequeue"
)

// mutation opens FILE for writing, runs do within the busy timeout and
// prints what it did: "<verb> N <noun>", or {"<verb>": N} with --json.
func (a *app) mutation(fs *flagSet, path, verb, noun string, do func(ctx context.Context, f *file) (int, error)) error {
	f, err := a.open(path, fs, true)
	if err != nil {
		return err
	}
	defer f.Close()
	ctx, cancel := f.writeCtx(a.ctx)
	defer cancel()
	n, err := do(ctx, f)
	if err != nil {
		return f.lockedError(err)
	}
	if fs.json {
		return writeJSON(a.stdout, map[string]int{verb: n})
	}
	_, err = fmt.Fprintf(a.stdout, "%s %s\n", verb, plural(n, noun, noun+"s"))
	return err
}

func (a *app) requeue(args []string) error {
	fs := a.newFlags("requeue", "FILE (ID... | --all [--queue Q] [--kind K] [--dry-run | --yes])", `
Move dead letters back to ready, due now, with their attempts reset (their
history is kept), and print how many moved. With IDs it is all or nothing:
an unknown id, a job that is not dead, or one whose idempotency key a live
job now holds moves nothing. --all moves every dead letter (of --queue and
--kind when given) and skips those whose key a live job holds; it says how
many dead letters it selects and asks for confirmation when stdin is a
terminal (otherwise pass --yes), and --dry-run only says how many it would
move.`)
	all := fs.Bool("all", false, "requeue every dead letter (narrowed by --queue and --kind)")
	queue := fs.String("queue", "", "with --all: only dead letters of this queue")
	kind := fs.String("kind", "", "with --all: only dead letters of this kind")
	dryRun := fs.Bool("dry-run", false, "with --all: say how many dead letters would move, and move none")
	yes := fs.Bool("yes", false, "with --all: do not ask for confirmation")
	fs.jsonFlag()
	fs.fileFlags(true)
	path, ids, err := fs.parseFileIDs(args)
	if err != nil {
		return err
	}
	switch {
	case *all && len(ids) > 0:
		return usagef("give job IDs or --all, not both")
	case !*all && len(ids) == 0:
		return usagef("give the IDs of dead letters to requeue, or --all")
	case !*all && (*queue != "" || *kind != ""):
		return usagef("--queue and --kind narrow --all; with IDs, leave them out")
	case !*all && (*dryRun || *yes):
		return usagef("--dry-run and --yes go with --all; requeueing IDs is all or nothing and asks nothing")
	case *dryRun && *yes:
		return usagef("give --dry-run or --yes, not both")
	}
	if !*all {
		return a.mutation(fs, path, "requeued", "dead letter", func(ctx context.Context, f *file) (int, error) {
			return f.q.Requeue(ctx, ids...)
		})
	}
	if !*dryRun && !*yes && !a.isTerminal(a.stdin) {
		return usagef("stdin is not a terminal to confirm on; pass --yes to requeue without asking, or --dry-run to see how many would move")
	}
	jq := litequeue.JobQuery{Queue: *queue, Kind: *kind, States: []litequeue.State{litequeue.StateDead}}
	n, err := a.countSelected(fs, path, jq)
	if err != nil {
		return err
	}
	what := describeSelection(plural(n, "dead letter", "dead letters"), *queue, *kind)
	if *dryRun {
		if fs.json {
			return writeJSON(a.stdout, map[string]int{"would_requeue": n})
		}
		_, err := fmt.Fprintf(a.stdout, "would requeue %s (dry run: nothing was changed; those whose idempotency key a live job holds would stay dead)\n", what)
		return err
	}
	if !*yes {
		if err := a.confirm(fmt.Sprintf("Requeue %s in %s?", what, safeAddr(path))); err != nil {
			return err
		}
	}
	return a.mutation(fs, path, "requeued", "dead letter", func(ctx context.Context, f *file) (int, error) {
		return f.q.RequeueJobs(ctx, jq)
	})
}

// countSelected opens path read-only and counts the jobs jq selects.
func (a *app) countSelected(fs *flagSet, path string, jq litequeue.JobQuery) (int, error) {
	f, err := a.open(path, fs, false)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := checkFilters(a.ctx, f.q, jq.Queue, jq.Kind); err != nil {
		return 0, fmt.Errorf("%w; nothing was changed", err)
	}
	return f.q.CountJobs(a.ctx, jq, 0)
}

// describeSelection says what of queue and kind (each "" for any) the jobs
// counted as what are: `3 dead letters of queue "imports" of kind "sync"`.
func describeSelection(what, queue, kind string) string {
	if queue != "" {
		what += fmt.Sprintf(" of queue %q", queue)
	}
	if kind != "" {
		what += fmt.Sprintf(" of kind %q", kind)
	}
	return what
}

func (a *app) cancel(args []string) error {
	fs := a.newFlags("cancel", "FILE ID...", `
Cancel jobs by id and print how many were cancelled. A ready or scheduled
job is cancelled at once. A running job is cancelled at once too, and its
worker, in whichever process, cancels its handler's context within its poll
interval (or at its next lease extension) and drops its result. Cancelled
jobs are kept, in state cancelled, until "lqinspect purge --cancelled". It
is all or nothing: an unknown id, or a job that is completed, dead or
cancelled already, cancels nothing.`)
	fs.jsonFlag()
	fs.fileFlags(true)
	path, ids, err := fs.parseFileIDs(args)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return usagef("want FILE and at least one job ID")
	}
	return a.mutation(fs, path, "cancelled", "job", func(ctx context.Context, f *file) (int, error) {
		n, err := f.q.Cancel(ctx, ids...)
		if err != nil {
			return 0, fmt.Errorf("%w; nothing was cancelled", err)
		}
		return n, nil
	})
}

func (a *app) purge(args []string) error {
	fs := a.newFlags("purge", "FILE (--dead [--queue Q] [--kind K] [--older-than D] [ID...] | --completed [--older-than D] | --cancelled [--older-than D])", `
Delete dead letters, with their history, retained completed jobs or
cancelled jobs, and print how many were deleted. --dead deletes every dead
letter that the other flags and IDs select; --completed deletes completed
jobs kept by Options.CompletedRetention; --cancelled deletes cancelled jobs.
It asks for confirmation when stdin is a terminal; otherwise pass --yes.`)
	dead := fs.Bool("dead", false, "delete dead letters")
	completed := fs.Bool("completed", false, "delete retained completed jobs")
	cancelled := fs.Bool("cancelled", false, "delete cancelled jobs")
	queue := fs.String("queue", "", "with --dead: only dead letters of this queue")
	kind := fs.String("kind", "", "with --dead: only dead letters of this kind")
	olderThan := fs.durationFlag("older-than", 0, "only jobs that died or completed more than this long ago, like 7d, 36h or 90m (0: any age)")
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	fs.jsonFlag()
	fs.fileFlags(true)
	path, ids, err := fs.parseFileIDs(args)
	if err != nil {
		return err
	}
	switch {
	case boolInt(*dead)+boolInt(*completed)+boolInt(*cancelled) != 1:
		return usagef("give exactly one of --dead, --completed and --cancelled")
	case !*dead && (*queue != "" || *kind != "" || len(ids) > 0):
		return usagef("--queue, --kind and IDs select dead letters; --completed and --cancelled take only --older-than")
	case *olderThan < 0:
		return usagef("--older-than %s is negative", *olderThan)
	}
	what := describePurge(*dead, *queue, *kind, *olderThan, ids)
	if *cancelled {
		what = strings.Replace(what, "completed jobs", "cancelled jobs", 1)
	}
	if !*yes {
		if err := a.confirm(fmt.Sprintf("Delete %s from %s?", what, safeAddr(path))); err != nil {
			return err
		}
	}
	if *cancelled {
		return a.mutation(fs, path, "purged", "cancelled job", func(ctx context.Context, f *file) (int, error) {
			return f.q.PurgeCancelled(ctx, *olderThan)
		})
	}
	if *completed {
		return a.mutation(fs, path, "purged", "completed job", func(ctx context.Context, f *file) (int, error) {
			return f.q.PurgeCompleted(ctx, *olderThan)
		})
	}
	return a.mutation(fs, path, "purged", "dead letter", func(ctx context.Context, f *file) (int, error) {
		if err := checkFilters(ctx, f.q, *queue, *kind); err != nil {
			return 0, fmt.Errorf("%w; nothing was purged", err)
		}
		for _, id := range ids {
			if _, err := f.q.DeadLetter(ctx, id); err != nil {
				return 0, fmt.Errorf("%w; nothing was purged", err)
			}
		}
		jq := litequeue.JobQuery{Queue: *queue, Kind: *kind, IDs: ids, States: []litequeue.State{litequeue.StateDead}}
		if *olderThan > 0 {
			jq.FinishedBefore = f.q.Now().Add(-*olderThan)
		}
		return f.q.DeleteJobs(ctx, jq)
	})
}

// describePurge says in words what a purge selects.
func describePurge(dead bool, queue, kind string, olderThan time.Duration, ids []int64) string {
	var b strings.Builder
	if dead {
		b.WriteString("dead letters")
		if len(ids) > 0 {
			fmt.Fprintf(&b, " %v", ids)
		}
	} else {
		b.WriteString("completed jobs")
	}
	if queue != "" {
		fmt.Fprintf(&b, " of queue %q", queue)
	}
	if kind != "" {
		fmt.Fprintf(&b, " of kind %q", kind)
	}
	if olderThan > 0 {
		fmt.Fprintf(&b, " older than %s", olderThan)
	} else if len(ids) == 0 {
		b.WriteString(" (all of them)")
	}
	return b.String()
}

// errNotConfirmed is a purge or requeue that was not confirmed.
var errNotConfirmed = errors.New("not confirmed; nothing was changed")

// confirm asks question on a terminal and wants "y" or "yes". Without a
// terminal it refuses: a script must pass --yes.
func (a *app) confirm(question string) error {
	if !a.isTerminal(a.stdin) {
		return usagef("stdin is not a terminal to confirm on; pass --yes to go ahead without asking")
	}
	fmt.Fprintf(a.stderr, "%s [y/N] ", question)
	line, err := bufio.NewReader(a.stdin).ReadString('\n')
	if err != nil && line == "" {
		return errNotConfirmed
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return errNotConfirmed
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
