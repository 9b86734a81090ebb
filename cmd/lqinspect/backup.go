package main

import (
	"fmt"
)

func (a *app) backup(args []string) error {
	fs := a.newFlags("backup", "FILE DEST", `
Write a consistent copy of the queue file FILE to DEST, which must not exist,
while the application keeps running: every job committed before the backup
began is in the copy. The copy is one self-contained file (no -wal), written
beside DEST and moved into place when complete; DEST is never overwritten.
FILE is opened read-only and is not changed.

To restore: stop every process using the queue, replace the queue file with
the copy and remove the old file's -wal and -shm, then start again.`)
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("want FILE and DEST, got %d arguments", len(pos))
	}
	if isPostgresURL(pos[0]) {
		return usagef("backup copies a queue file; back a PostgreSQL queue up with the database: pg_dump --schema of the queue's schema (its lq_* tables), or the server's base backups")
	}
	f, err := a.open(pos[0], fs, false)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.q.Backup(a.ctx, pos[1]); err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "backed up %s to %s\n", f.path, pos[1])
	return err
}
