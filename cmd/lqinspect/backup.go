package main

import (
	"fmt"
	"os"
)

func (a *app) backup(args []string) error {
	fs := a.newFlags("backup", "FILE|postgres://URL DEST", `
Write a consistent copy of the queue file FILE to DEST, which must not exist,
while the application keeps running: every job committed before the backup
began is in the copy. The copy is one self-contained file (no -wal), written
beside DEST and moved into place when complete; DEST is never overwritten.
FILE is opened read-only and is not changed; the copy gets FILE's file mode
(a copy of a PostgreSQL queue is readable by its owner only, 0600).

To restore: stop every process using the queue, replace the queue file with
the copy and remove the old file's -wal and -shm, then start again.

Given a postgres:// URL, it writes the PostgreSQL queue's tables, read as one
consistent snapshot, to the queue file DEST: jobs with their ids, states and
history, paused queues, schedules. Open DEST as a queue file, or restore it
into a PostgreSQL schema with "lqinspect migrate DEST URL". It copies the
queue only; back the application's database up with the server's tools.`)
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("want FILE (or a postgres:// URL) and DEST, got %d arguments", len(pos))
	}
	if isPostgresURL(pos[1]) {
		return usagef("DEST must be a file path; to copy a queue file into PostgreSQL use: lqinspect migrate FILE URL")
	}
	f, err := a.open(pos[0], fs, false)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.q.Backup(a.ctx, pos[1]); err != nil {
		return err
	}
	if f.info != nil {
		// The copy is written private (0600); give it the mode of the file
		// it copies, so that those who may read the queue may read it.
		if err := os.Chmod(pos[1], f.info.Mode().Perm()); err != nil {
			return fmt.Errorf("backed up to %s, but could not give it the mode of %s (%s): %w", pos[1], f.name(), f.info.Mode().Perm(), err)
		}
	}
	_, err = fmt.Fprintf(a.stdout, "backed up %s to %s\n", safeAddr(f.path), safeLine(pos[1]))
	return err
}
