package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/litequeue/litequeue"
)

// watchInterval is how often stats --watch refreshes.
const watchInterval = time.Second

// clearScreen moves the cursor home and clears the terminal.
const clearScreen = "\x1b[H\x1b[2J"

func (a *app) stats(args []string) error {
	fs := a.newFlags("stats", "FILE", `
Print one row per queue: jobs ready (due now), scheduled (due later),
running (leased), dead (dead letters) and completed (retained), how long the
oldest ready job has waited, and when the next scheduled job is due.`)
	fs.jsonFlag()
	fs.fileFlags(false)
	watch := fs.Bool("watch", false, "refresh every second until interrupted (with --json: one document per refresh)")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one FILE, got %d arguments", len(pos))
	}
	f, err := a.open(pos[0], fs, false)
	if err != nil {
		return err
	}
	defer f.Close()
	render := func() error {
		stats, err := f.q.Stats(a.ctx)
		if err != nil {
			return err
		}
		if fs.json {
			return writeList(a.stdout, stats)
		}
		return statsTable(a.stdout, stats, f.now())
	}
	if !*watch {
		return render()
	}
	tick, stop := a.newTicker(watchInterval)
	defer stop()
	for {
		if !fs.json {
			fmt.Fprintf(a.stdout, "%sEvery %s: lqinspect stats %s\t%s\n\n", clearScreen, watchInterval, f.path, absTime(f.now()))
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

func statsTable(w io.Writer, stats []litequeue.QueueStats, now time.Time) error {
	rows := make([][]string, len(stats))
	for i, s := range stats {
		oldest := none
		if s.Ready > 0 {
			oldest = shortDuration(s.OldestReady)
		}
		rows[i] = []string{s.Queue, strconv.Itoa(s.Ready), strconv.Itoa(s.Scheduled), strconv.Itoa(s.Running),
			strconv.Itoa(s.Dead), strconv.Itoa(s.Completed), oldest, relTime(s.NextDue, now)}
	}
	return table(w, "no jobs", []string{"QUEUE", "READY", "SCHEDULED", "RUNNING", "DEAD", "COMPLETED", "OLDEST READY", "NEXT DUE"}, rows)
}
