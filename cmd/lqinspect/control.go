package main

import (
	"errors"
	"fmt"
)

// pause and resume: a queue's pause, stored in the file, for every process
// on it.

func (a *app) pause(args []string) error {
	return a.pauseResume(args, "pause", `
Pause QUEUE for every process on the file: its workers claim no new jobs
(running ones finish; claimed ones not yet started go back unrun) within
their poll interval, until "lqinspect resume". The pause is stored in the
file and survives restarts. Pausing a paused queue changes nothing and
says so.

QUEUE must be a queue the file knows (one a job or a schedule names, or a
paused one): a name nothing knows is refused with the names it may have
meant, so that a typo does not pause a queue nobody uses. To pause a queue
before its first job, pass --create.`)
}

func (a *app) resume(args []string) error {
	return a.pauseResume(args, "resume", `
Resume QUEUE paused by "lqinspect pause" or Queue.Pause: its workers in
every process claim its jobs again within their poll interval. Resuming a
queue that is not paused changes nothing and says so ("queue X was not
paused", exit 0); a name no job, schedule or pause knows is an error with
the names it may have meant.`)
}

func (a *app) pauseResume(args []string, name, doc string) error {
	fs := a.newFlags(name, "FILE QUEUE", doc)
	fs.jsonFlag()
	fs.fileFlags(true)
	var create *bool
	if name == "pause" {
		create = fs.Bool("create", false, "pause QUEUE even when no job or schedule names it yet")
	}
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
	paused, err := f.q.PausedQueues(ctx)
	if err != nil {
		return f.lockedError(err)
	}
	_, wasPaused := paused[queue]
	// An invalid name (empty, too long) is left to the library to refuse.
	if !wasPaused && queue != "" && (create == nil || !*create) {
		var unknown unknownNameError
		switch err := checkQueue(ctx, f.q, queue); {
		case errors.As(err, &unknown) && name == "pause":
			return fmt.Errorf("%w; nothing was paused. To pause a queue before its first job, pass --create", err)
		case errors.As(err, &unknown):
			return fmt.Errorf("%w; nothing was resumed", err)
		case err != nil:
			return f.lockedError(err)
		}
	}
	verb, changed := "paused", !wasPaused
	if name == "pause" {
		err = f.q.Pause(ctx, queue)
	} else {
		verb, changed = "resumed", wasPaused
		err = f.q.Resume(ctx, queue)
	}
	if err != nil {
		return f.lockedError(err)
	}
	if fs.json {
		return writeJSON(a.stdout, map[string]any{verb: queue, "changed": changed})
	}
	switch {
	case changed:
		_, err = fmt.Fprintf(a.stdout, "%s queue %q\n", verb, queue)
	case name == "pause":
		_, err = fmt.Fprintf(a.stdout, "queue %q was already paused (since %s); nothing changed\n", queue, absTime(paused[queue]))
	default:
		_, err = fmt.Fprintf(a.stdout, "queue %q was not paused; nothing changed\n", queue)
	}
	return err
}
