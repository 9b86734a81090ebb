package main

import (
	"context"
	"fmt"

	"github.com/litequeue/litequeue"
)

// pause and resume: a queue's pause, stored in the file, for every process
// on it.

func (a *app) pause(args []string) error {
	return a.pauseResume(args, "pause", "paused", `
Pause QUEUE for every process on the file: its workers claim no new jobs
(running ones finish; claimed ones not yet started go back unrun) within
their poll interval, until "lqinspect resume". The pause is stored in the
file and survives restarts. A queue with no jobs yet may be paused: the
pause applies to the jobs that come. Pausing a paused queue changes
nothing.`, (*litequeue.Queue).Pause)
}

func (a *app) resume(args []string) error {
	return a.pauseResume(args, "resume", "resumed", `
Resume QUEUE paused by "lqinspect pause" or Queue.Pause: its workers in
every process claim its jobs again within their poll interval. Resuming a
queue that is not paused changes nothing.`, (*litequeue.Queue).Resume)
}

func (a *app) pauseResume(args []string, name, verb, doc string, do func(*litequeue.Queue, context.Context, string) error) error {
	fs := a.newFlags(name, "FILE QUEUE", doc)
	fs.jsonFlag()
	fs.fileFlags(true)
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("want FILE and QUEUE, got %d arguments", len(pos))
	}
	path, queue := pos[0], pos[1]
	f, err := a.open(path, fs, true)
	if err != nil {
		return err
	}
	defer f.Close()
	ctx, cancel := f.writeCtx(a.ctx)
	defer cancel()
	if err := do(f.q, ctx, queue); err != nil {
		return f.lockedError(err)
	}
	if fs.json {
		return writeJSON(a.stdout, map[string]string{verb: queue})
	}
	_, err = fmt.Fprintf(a.stdout, "%s queue %q\n", verb, queue)
	return err
}
