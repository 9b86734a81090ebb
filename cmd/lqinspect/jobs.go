package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/litequeue/litequeue"
)

// lastErrorWidth is how many characters of a last error a table shows.
const lastErrorWidth = 40

// listFlags are the selection and paging flags of jobs and dead.
type listFlags struct {
	queue, kind, order string
	group              string // jobs of this group (EnqueueOptions.Group) only
	limit, offset      int
	after              string
	tags               string // comma-separated; jobs only
}

func (l *listFlags) add(fs *flagSet) {
	fs.StringVar(&l.queue, "queue", "", "only jobs of this queue")
	fs.StringVar(&l.kind, "kind", "", "only jobs of this kind")
	fs.StringVar(&l.group, "group", "", "only jobs of this group (EnqueueOptions.Group; lqinspect groups lists a queue's)")
	fs.StringVar(&l.order, "order", string(litequeue.OrderNewest), `"newest" (highest id first) or "next-due" (earliest due first; without --state, live jobs only)`)
	fs.IntVar(&l.limit, "limit", defaultListLimit, "show at most this many (0: all, read page by page); when more match, stderr names the --after of the next page")
	fs.StringVar(&l.after, "after", "", "start after this cursor (the one stderr names after a page)")
	fs.IntVar(&l.offset, "offset", 0, fmt.Sprintf("skip this many, at most %d (past it page with --after)", maxOffset))
}

// filter checks the flags and returns the library's filter (its Limit
// unset: listPages pages).
func (l *listFlags) filter() (litequeue.JobFilter, error) {
	f := litequeue.JobFilter{Queue: l.queue, Kind: l.kind, Group: l.group, Offset: l.offset, After: l.after}
	if l.group != "" && l.tags != "" {
		return f, usagef("--group and --tag do not combine: list by one of them")
	}
	switch o := litequeue.Order(l.order); o {
	case litequeue.OrderNewest, litequeue.OrderNextDue:
		f.Order = o
	default:
		return f, usagef("unknown --order %q; use %q or %q", l.order, litequeue.OrderNewest, litequeue.OrderNextDue)
	}
	if l.limit < 0 {
		return f, usagef("--limit %d is negative; use 0 for all", l.limit)
	}
	switch {
	case l.offset < 0:
		return f, usagef("--offset %d is negative", l.offset)
	case l.offset > maxOffset:
		return f, usagef("--offset %d is past %d, too many rows to skip; page with --after CURSOR instead (after each page stderr names the next one's)", l.offset, maxOffset)
	}
	return f, nil
}

// parseStates parses a comma-separated list of states.
func parseStates(s string) ([]litequeue.State, error) {
	if s == "" {
		return nil, nil
	}
	var out []litequeue.State
	for _, name := range strings.Split(s, ",") {
		st, err := litequeue.ParseState(strings.TrimSpace(name))
		if err != nil {
			all := litequeue.States()
			names := make([]string, len(all))
			for i, st := range all {
				names[i] = string(st)
			}
			return nil, usagef("unknown state %q in --state; use one or more of %s, separated by commas", name, strings.Join(names, ", "))
		}
		out = append(out, st)
	}
	return out, nil
}

// list opens FILE (the one positional argument) read-only, lists the jobs
// l and states select (for --order next-due without states, the live
// ones), noting on stderr a queue or kind l names that nothing has
// (noteFilters), and prints them as JSON or with table, a page of --limit
// (then a note on stderr if more match) or, with --limit 0, every match
// page by page by cursor (listPages).
func (a *app) list(fs *flagSet, args []string, l *listFlags, states func() ([]litequeue.State, error),
	table func(w io.Writer, jobs []litequeue.JobInfo, now time.Time) error) error {
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one FILE, got %d arguments", len(pos))
	}
	filter, err := l.filter()
	if err != nil {
		return err
	}
	if filter.States, err = states(); err != nil {
		return err
	}
	f, err := a.open(pos[0], fs, false)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := a.noteFilters(fs, f, l.queue, l.kind); err != nil {
		return err
	}
	if filter.Order == litequeue.OrderNextDue && len(filter.States) == 0 {
		filter.States = liveStates
	}
	fetch := func(jf litequeue.JobFilter) ([]litequeue.JobInfo, error) {
		var jobs []litequeue.JobInfo
		var err error
		if l.tags != "" {
			jobs, err = taggedJobs(a, f.q, jf, l.tags)
		} else {
			jobs, err = f.q.Jobs(a.ctx, jf)
		}
		if errors.Is(err, litequeue.ErrBadCursor) {
			return nil, usagef("--after %q is not a cursor of --order %s: pass the one stderr named after a page of the same order", l.after, jf.Order)
		}
		return jobs, err
	}
	pw := &pageWriter{w: a.stdout, json: fs.json, table: table, now: f.now()}
	return a.listPages(pw, filter, l.limit, fetch)
}

func (a *app) jobs(args []string) error {
	fs := a.newFlags("jobs", "FILE", `
List jobs, newest first: id, queue, kind, state, attempts made, priority,
when it is due (for a running job: when its lease ends), idempotency key and
the last error, shortened.`)
	var l listFlags
	l.add(fs)
	state := fs.String("state", "", "only jobs in these states, comma-separated: ready, scheduled, running, completed, dead")
	fs.StringVar(&l.tags, "tag", "", "only jobs that carry these tags, comma-separated (every one of them); newest first")
	fs.jsonFlag()
	fs.fileFlags(false)
	return a.list(fs, args, &l, func() ([]litequeue.State, error) { return parseStates(*state) }, jobsTable)
}

func jobsTable(w io.Writer, jobs []litequeue.JobInfo, now time.Time) error {
	rows := make([][]string, len(jobs))
	for i, j := range jobs {
		rows[i] = []string{strconv.FormatInt(j.ID, 10), j.Queue, j.Kind, string(j.State), strconv.Itoa(j.Attempt),
			strconv.Itoa(j.Priority), due(j, now), orNone(j.Key), shorten(j.LastError, lastErrorWidth)}
	}
	return table(w, "no jobs", []string{"ID", "QUEUE", "KIND", "STATE", "ATTEMPT", "PRIO", "DUE", "KEY", "LAST ERROR"}, rows)
}

// due says when a pending job is due, or when a running job's lease ends.
func due(j litequeue.JobInfo, now time.Time) string {
	switch j.State {
	case litequeue.StateReady, litequeue.StateScheduled:
		return relTime(j.VisibleAt, now)
	case litequeue.StateRunning:
		return "lease ends " + relTime(j.VisibleAt, now)
	}
	return none
}

func (a *app) dead(args []string) error {
	fs := a.newFlags("dead", "FILE", `
List dead letters, newest first: jobs that gave up (attempts used up, a
permanent error, a strategy's refusal or an undecodable payload), with the
reason, when they died and the last error. Requeue them with
"lqinspect requeue", delete them with "lqinspect purge --dead".`)
	var l listFlags
	l.add(fs)
	fs.jsonFlag()
	fs.fileFlags(false)
	dead := func() ([]litequeue.State, error) { return []litequeue.State{litequeue.StateDead}, nil }
	return a.list(fs, args, &l, dead, deadTable)
}

func deadTable(w io.Writer, jobs []litequeue.JobInfo, now time.Time) error {
	rows := make([][]string, len(jobs))
	for i, j := range jobs {
		rows[i] = []string{strconv.FormatInt(j.ID, 10), j.Queue, j.Kind, strconv.Itoa(j.Attempt),
			relTime(j.FinishedAt, now), orNone(j.DeadReason), shorten(j.LastError, lastErrorWidth)}
	}
	return table(w, "no dead letters", []string{"ID", "QUEUE", "KIND", "ATTEMPTS", "DIED", "REASON", "LAST ERROR"}, rows)
}
