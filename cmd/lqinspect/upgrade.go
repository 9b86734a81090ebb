package main

import (
	"fmt"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/postgres"
)

func (a *app) upgrade(args []string) error {
	fs := a.newFlags("upgrade", "FILE|postgres://URL", `
Migrate a queue of an older schema to the schema of this lqinspect, on
purpose: the other commands that write refuse such a queue rather than
migrate it behind its application's back. After the upgrade, applications
built with a litequeue of the older schema refuse the queue: upgrade them
first (a newer application's own Open migrates the queue too). The
migration is one transaction: it is there whole or not at all.`)
	fs.jsonFlag()
	fs.fileFlags(true)
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one FILE or postgres:// URL, got %d arguments", len(pos))
	}
	path := pos[0]
	// The read-only open checks what path is; only then is it opened to
	// write, which migrates it.
	f, err := a.open(path, fs, false)
	if err != nil {
		return err
	}
	f.Close()
	var from, to int
	if isPostgresURL(path) {
		if from, _, err = postgres.InstalledVersion(a.ctx, path); err != nil {
			return err
		}
		to = postgres.SchemaVersion
		if from < to {
			q, err := postgres.Open(a.ctx, path, &litequeue.Options{PollInterval: -1})
			if err != nil {
				return err
			}
			if err := q.Close(); err != nil {
				return err
			}
		}
	} else {
		if from, err = litequeue.InstalledVersion(path); err != nil {
			return openError(path, err)
		}
		to = litequeue.SchemaVersion
		if from < to {
			q, err := litequeue.Open(path, &litequeue.Options{PollInterval: -1, BusyTimeout: fs.busyTimeout})
			if err != nil {
				return openError(path, err)
			}
			if err := q.Close(); err != nil {
				return err
			}
		}
	}
	if fs.json {
		return writeJSON(a.stdout, map[string]int{"from": from, "to": to})
	}
	if from == to {
		_, err = fmt.Fprintf(a.stdout, "%s is at queue schema version %d, this lqinspect's: nothing to upgrade\n", safeAddr(path), to)
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "upgraded %s from queue schema version %d to %d\n", safeAddr(path), from, to)
	return err
}
