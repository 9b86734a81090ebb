package main

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/litequeue/litequeue"
)

// limits and groups: a queue's flow-control limits, shown and set, and its
// groups with what each holds (docs/flow-control.md).

func (a *app) limits(args []string) error {
	fs := a.newFlags("limits", "FILE [QUEUE] | FILE set QUEUE [flags]", `
Print the flow-control limits stored for each queue (or QUEUE): the most
jobs running at once across every process (CONCURRENCY), per group
(KEY-CONC), whether groups run in order (ORDERED), and the most starts per
period (RATE, KEY-RATE as N/PERIOD). A queue without limits is not listed.

"lqinspect limits FILE set QUEUE" changes QUEUE's limits for every
process, through Queue.SetLimits: only the limits whose flags are given
change (0 removes one; --clear starts from no limits). Running processes
notice within their poll interval. Rates are N/PERIOD: "10/1s", "100/m",
"5/1m30s"; "0" removes the rate.`)
	fs.jsonFlag()
	fs.fileFlags(true)
	conc := fs.Int("concurrency", 0, "set: the most jobs of QUEUE running at once across processes (0: no limit)")
	keyConc := fs.Int("key-concurrency", 0, "set: the most jobs of one group running at once (0: no limit)")
	rate := fs.String("rate", "", "set: the most starts of QUEUE per period, N/PERIOD (0: no limit)")
	keyRate := fs.String("key-rate", "", "set: the most starts of one group per period, N/PERIOD (0: no limit)")
	ordered := fs.Bool("ordered", false, "set: run each group's jobs one at a time, in enqueue order (--ordered=false: not)")
	clear := fs.Bool("clear", false, "set: start from no limits (alone: remove every limit of QUEUE)")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	setAt := slices.Index(pos, "set")
	if setAt >= 0 && setAt <= 1 && len(pos) == 3 {
		path := pos[0]
		if setAt == 0 {
			path = pos[1]
		}
		return a.setLimits(fs, path, pos[2], limitFlags{conc, keyConc, rate, keyRate, ordered, clear})
	}
	given := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name != "json" && f.Name != "now" && f.Name != "busy-timeout" {
			given = true
		}
	})
	if given {
		return usagef(`the limit flags change limits: use "lqinspect limits FILE set QUEUE --concurrency N ..."`)
	}
	if len(pos) != 1 && len(pos) != 2 {
		return usagef("want FILE and at most one QUEUE, got %d arguments", len(pos))
	}
	f, err := a.open(pos[0], fs, false)
	if err != nil {
		return err
	}
	defer f.Close()
	ls, err := f.q.Limits(a.ctx)
	if err != nil {
		return err
	}
	if len(pos) == 2 {
		l, ok := ls[pos[1]]
		ls = map[string]litequeue.QueueLimits{}
		if ok {
			ls[pos[1]] = l
		}
	}
	if fs.json {
		return writeJSON(a.stdout, ls)
	}
	var rows [][]string
	for _, name := range slices.Sorted(maps.Keys(ls)) {
		rows = append(rows, limitsRow(name, ls[name]))
	}
	return table(a.stdout, "no limits: no queue has flow-control limits stored",
		[]string{"QUEUE", "CONCURRENCY", "KEY-CONC", "ORDERED", "RATE", "KEY-RATE"}, rows)
}

// limitsRow is one row of the limits table.
func limitsRow(queue string, l litequeue.QueueLimits) []string {
	n := func(v int) string {
		if v == 0 {
			return none
		}
		return strconv.Itoa(v)
	}
	ord := none
	if l.Ordered {
		ord = "yes"
	}
	return []string{queue, n(l.Concurrency), n(l.KeyConcurrency), ord, rateText(l.Rate), rateText(l.KeyRate)}
}

// rateText writes r as N/PERIOD, none for no limit.
func rateText(r litequeue.Rate) string {
	if r == (litequeue.Rate{}) {
		return none
	}
	return strconv.Itoa(r.N) + "/" + r.Per.String()
}

// limitsText is l in one line, "none" for no limits.
func limitsText(l litequeue.QueueLimits) string {
	var parts []string
	if l.Concurrency > 0 {
		parts = append(parts, "concurrency "+strconv.Itoa(l.Concurrency))
	}
	if l.KeyConcurrency > 0 {
		parts = append(parts, "key concurrency "+strconv.Itoa(l.KeyConcurrency))
	}
	if l.Ordered {
		parts = append(parts, "ordered")
	}
	if l.Rate.N > 0 {
		parts = append(parts, "rate "+rateText(l.Rate))
	}
	if l.KeyRate.N > 0 {
		parts = append(parts, "key rate "+rateText(l.KeyRate))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// parseRate reads N/PERIOD ("10/1s", "100/m"); "0" is no limit.
func parseRate(flagName, s string) (litequeue.Rate, error) {
	if s == "0" {
		return litequeue.Rate{}, nil
	}
	bad := func(why string) error {
		return usagef("--%s %q: %s; use N/PERIOD like 10/1s or 100/m, or 0 for no limit", flagName, s, why)
	}
	ns, per, ok := strings.Cut(s, "/")
	if !ok {
		return litequeue.Rate{}, bad("no /PERIOD")
	}
	n, err := strconv.Atoi(ns)
	if err != nil || n <= 0 {
		return litequeue.Rate{}, bad("N is not a positive whole number")
	}
	if per != "" && (per[0] < '0' || per[0] > '9') {
		per = "1" + per
	}
	d, err := time.ParseDuration(per)
	if err != nil {
		return litequeue.Rate{}, bad("PERIOD is not a duration")
	}
	if d < litequeue.MinRatePer {
		return litequeue.Rate{}, bad("PERIOD is under " + litequeue.MinRatePer.String())
	}
	return litequeue.Rate{N: n, Per: d}, nil
}

// limitFlags are the flags of "limits set".
type limitFlags struct {
	conc, keyConc  *int
	rate, keyRate  *string
	ordered, clear *bool
}

func (a *app) setLimits(fs *flagSet, path, queue string, lf limitFlags) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	changes := given["concurrency"] || given["key-concurrency"] || given["rate"] || given["key-rate"] || given["ordered"] || given["clear"]
	if !changes {
		return usagef("set: no limit given; pass --concurrency, --key-concurrency, --rate, --key-rate, --ordered or --clear")
	}
	for name, v := range map[string]int{"concurrency": *lf.conc, "key-concurrency": *lf.keyConc} {
		if v < 0 {
			return usagef("--%s %d: use a positive number, or 0 for no limit", name, v)
		}
	}
	var rate, keyRate litequeue.Rate
	var err error
	if given["rate"] {
		if rate, err = parseRate("rate", *lf.rate); err != nil {
			return err
		}
	}
	if given["key-rate"] {
		if keyRate, err = parseRate("key-rate", *lf.keyRate); err != nil {
			return err
		}
	}
	f, err := a.open(path, fs, true)
	if err != nil {
		return err
	}
	defer f.Close()
	ctx, cancel := f.writeCtx(a.ctx)
	defer cancel()
	ls, err := f.q.Limits(ctx)
	if err != nil {
		return f.lockedError(err)
	}
	var l litequeue.QueueLimits
	if !*lf.clear {
		l = ls[queue]
	}
	if given["concurrency"] {
		l.Concurrency = *lf.conc
	}
	if given["key-concurrency"] {
		l.KeyConcurrency = *lf.keyConc
	}
	if given["rate"] {
		l.Rate = rate
	}
	if given["key-rate"] {
		l.KeyRate = keyRate
	}
	if given["ordered"] {
		l.Ordered = *lf.ordered
	}
	err = f.q.SetLimits(ctx, queue, l)
	if errors.Is(err, litequeue.ErrInvalidLimits) || errors.Is(err, litequeue.ErrInvalidJob) {
		return usagef("%s; nothing was changed", err)
	}
	if err != nil {
		return f.lockedError(err)
	}
	if fs.json {
		return writeJSON(a.stdout, map[string]any{"queue": queue, "limits": l})
	}
	_, err = fmt.Fprintf(a.stdout, "queue %q limits: %s\n", queue, limitsText(l))
	return err
}

func (a *app) groups(args []string) error {
	fs := a.newFlags("groups", "FILE QUEUE", `
Print QUEUE's groups that have live jobs, by name, a page at a time: the
jobs the limits count as running, the pending ones (counted up to 10000:
"10000+" past it), when the oldest pending one was enqueued and, for an
ordered queue, the job heading the group (the one the others wait for,
with its state: a stuck group shows its head retrying). A full page ends
with the --after of the next one.`)
	fs.jsonFlag()
	fs.fileFlags(false)
	after := fs.String("after", "", "list the groups whose names sort after this one (the next page)")
	limit := fs.Int("limit", 50, "the most groups to list (at most 1000)")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("want FILE and QUEUE, got %d arguments", len(pos))
	}
	if *limit <= 0 {
		return usagef("--limit %d: use a positive number", *limit)
	}
	f, err := a.open(pos[0], fs, false)
	if err != nil {
		return err
	}
	defer f.Close()
	page, err := f.q.Groups(a.ctx, pos[1], litequeue.GroupsOptions{After: *after, Limit: *limit})
	if err != nil {
		return err
	}
	if fs.json {
		return writeJSON(a.stdout, page)
	}
	now := f.now()
	var rows [][]string
	for _, g := range page.Groups {
		head := none
		if g.Head != 0 {
			head = strconv.FormatInt(g.Head, 10) + " " + string(g.HeadState)
			if g.HeadAttempt > 0 && g.HeadState != litequeue.StateRunning {
				head += fmt.Sprintf(" (retrying after %d attempts)", g.HeadAttempt)
			}
		}
		rows = append(rows, []string{g.Group, strconv.Itoa(g.Running), g.PendingText(), relTime(g.OldestPending, now), head})
	}
	if err := table(a.stdout, fmt.Sprintf("no groups: queue %q has no live jobs with a group", pos[1]),
		[]string{"GROUP", "RUNNING", "PENDING", "OLDEST PENDING", "HEAD"}, rows); err != nil {
		return err
	}
	if page.Next != "" {
		_, err = fmt.Fprintf(a.stdout, "next page: --after %s\n", strconv.Quote(page.Next))
	}
	return err
}
