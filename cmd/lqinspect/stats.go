package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/humantime"
)

// watchInterval is how often stats --watch refreshes unless --interval says.
const watchInterval = time.Second

// clearScreen moves the cursor home and clears the terminal.
const clearScreen = "\x1b[H\x1b[2J"

func (a *app) stats(args []string) error {
	fs := a.newFlags("stats", "FILE", `
Print one row per queue: jobs ready (due now), scheduled (due later),
running (leased), dead (dead letters), completed (retained) and cancelled
(and, when any workflow job waits for its parents, waiting),
how long the oldest ready job has waited, when the next scheduled job is
due, and "paused" for a queue paused with "lqinspect pause" (listed even
with no jobs), and, when any queue has flow-control limits, each queue's
limits ("lqinspect limits"). --queue shows only that queue's row; a queue no job, schedule
or pause names is an error naming the queues there are.

With --watch it refreshes every --interval until interrupted: on a terminal
it redraws the screen; to a pipe or a file it writes plain frames, one after
the other (with --json: one compact JSON array per line). When the file is
replaced (restored from a backup, renamed over) it opens the new one and
says so on stderr.`)
	fs.jsonFlag()
	fs.fileFlags(false)
	queue := fs.String("queue", "", "only this queue's row")
	watch := fs.Bool("watch", false, "refresh until interrupted")
	interval := fs.durationFlag("interval", watchInterval, "with --watch: the time between refreshes")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one FILE, got %d arguments", len(pos))
	}
	if *interval <= 0 {
		return usagef("--interval %s is not positive", *interval)
	}
	f, err := a.open(pos[0], fs, false)
	if err != nil {
		return err
	}
	defer func() { f.Close() }()
	render := func() error {
		stats, err := f.q.Stats(a.ctx)
		if err != nil {
			return err
		}
		if *queue != "" {
			if stats, err = queueRow(a.ctx, f.q, stats, *queue); err != nil {
				return err
			}
		}
		switch {
		case fs.json && *watch:
			if stats == nil {
				stats = []litequeue.QueueStats{}
			}
			line, err := json.Marshal(stats)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "%s\n", safeJSON(line))
			return err
		case fs.json:
			return writeList(a.stdout, stats)
		}
		ls, err := f.q.Limits(a.ctx)
		if err != nil {
			return err
		}
		return statsTable(a.stdout, stats, ls, f.now())
	}
	if !*watch {
		return render()
	}
	tty := a.isTerminalOut != nil && a.isTerminalOut(a.stdout)
	tick, stop := a.newTicker(*interval)
	defer stop()
	for frame := 0; ; frame++ {
		if frame > 0 {
			replaced, err := f.replaced()
			if err != nil {
				return err
			}
			if replaced {
				nf, err := a.open(f.path, fs, false)
				if err != nil {
					return err
				}
				f.Close()
				f = nf
				fmt.Fprintf(a.stderr, "lqinspect stats: note: %s was replaced; showing the new file\n", safeAddr(f.path))
			}
		}
		if !fs.json {
			switch {
			case tty:
				fmt.Fprint(a.stdout, clearScreen)
			case frame > 0:
				fmt.Fprintln(a.stdout)
			}
			fmt.Fprintf(a.stdout, "Every %s: lqinspect stats %s\t%s\n\n", *interval, safeAddr(f.path), absTime(f.now()))
		}
		if err := render(); err != nil {
			if a.ctx.Err() != nil {
				return nil
			}
			return err
		}
		select {
		case <-a.ctx.Done():
			return nil
		case <-tick:
		}
	}
}

// queueRow returns the row of queue in stats; an empty row for a queue only
// a schedule names so far; or an error naming the queues there are (and the
// closest to queue) when nothing names it.
func queueRow(ctx context.Context, q *litequeue.Queue, stats []litequeue.QueueStats, queue string) ([]litequeue.QueueStats, error) {
	for _, s := range stats {
		if s.Queue == queue {
			return []litequeue.QueueStats{s}, nil
		}
	}
	// stats holds every queue that has jobs or is paused: only a schedule
	// may name another.
	schedules, err := q.Schedules(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(stats)+len(schedules))
	for _, s := range stats {
		names = append(names, s.Queue)
	}
	for _, s := range schedules {
		if s.Queue == queue {
			return []litequeue.QueueStats{{Queue: queue}}, nil
		}
		if !slices.Contains(names, s.Queue) {
			names = append(names, s.Queue)
		}
	}
	sort.Strings(names)
	return nil, unknownQueueError(queue, names)
}

func statsTable(w io.Writer, stats []litequeue.QueueStats, ls map[string]litequeue.QueueLimits, now time.Time) error {
	rows := make([][]string, len(stats))
	for i, s := range stats {
		oldest := none
		if s.Ready > 0 {
			oldest = humantime.Age(s.OldestReady)
		}
		paused := none
		if s.Paused {
			paused = "paused"
		}
		rows[i] = []string{s.Queue, strconv.Itoa(s.Ready), strconv.Itoa(s.Scheduled), strconv.Itoa(s.Running),
			strconv.Itoa(s.Dead), strconv.Itoa(s.Completed), strconv.Itoa(s.Cancelled), oldest, relTime(s.NextDue, now), paused}
	}
	header := []string{"QUEUE", "READY", "SCHEDULED", "RUNNING", "DEAD", "COMPLETED", "CANCELLED", "OLDEST READY", "NEXT DUE", "PAUSED"}
	// Workflow jobs waiting for their parents: a column when any wait.
	waiting := false
	for _, s := range stats {
		waiting = waiting || s.Waiting > 0
	}
	if waiting {
		header = append(header[:1], append([]string{"WAITING"}, header[1:]...)...)
		for i, s := range stats {
			rows[i] = append(rows[i][:1], append([]string{strconv.Itoa(s.Waiting)}, rows[i][1:]...)...)
		}
	}
	// Flow-control limits (limits.go): a column when any queue has some.
	if len(ls) > 0 {
		header = append(header, "LIMITS")
		for i, s := range stats {
			text := none
			if l, ok := ls[s.Queue]; ok {
				text = limitsText(l)
			}
			rows[i] = append(rows[i], text)
		}
	}
	return table(w, "no jobs", header, rows)
}
