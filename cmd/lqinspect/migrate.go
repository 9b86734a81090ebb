package main

import (
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/litequeue/litequeue/internal/redact"
	"github.com/litequeue/litequeue/postgres"
)

func (a *app) migrate(args []string) error {
	fs := a.newFlags("migrate", "FILE postgres://URL", `
Copy every job of the queue file FILE — ready, scheduled, running under the
lease of a process that is gone (it runs again when the lease ends, as on
SQLite), dead letters, retained completed and cancelled jobs — with their
attempt history, progress, output and uniqueness, into the PostgreSQL queue at URL, creating its tables if needed (in
the schema of the URL parameter search_path, default public). Jobs keep their
ids, states, attempts, due times, keys and priorities; the PostgreSQL id
sequence continues after the file's highest id. Paused queues stay paused,
schedules keep their next run, pause and history, and the dashboard's
per-minute counts come along. A file of an older schema is read as it is.

Text PostgreSQL cannot store (NUL bytes, invalid UTF-8: an old file may
hold such keys) is copied escaped, \xNN for each such byte, and counted.

It refuses while any process has FILE open (stop the queue first), and holds
the file's lock throughout. It marks FILE as moved (where to, when), before
PostgreSQL holds anything, so that the application restarted on the file
cannot run the moved jobs a second time: litequeue.Open refuses the file
for writing (ErrMoved), every writing lqinspect command too, and read
commands still read it. A move that fails takes the mark back; one that
stopped half-way (killed) is finished by running it again with the same
URL; it says on stderr each step it reached (file marked, copy committed). It refuses a file moved to another queue before, and a schedule that
PostgreSQL already has (move before any process registers schedules
there). Running it again copies nothing more. Afterwards open the queue
with postgres.Open(ctx, URL, opts) instead of litequeue.Open(FILE, opts).

Only the queue's tables (lq_*) move: it names the other tables of FILE,
an application's own in a file it shares with its queue, which stay where
they are.`)
	fs.jsonFlag()
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("want FILE and a postgres:// URL, got %d arguments", len(pos))
	}
	if !isPostgresURL(pos[1]) {
		return usagef("%q is not a postgres:// URL", redact.URL(pos[1]))
	}
	if isPostgresURL(pos[0]) {
		return usagef("FILE must be a queue file, not a URL")
	}
	m, err := postgres.MoveFileWith(a.ctx, pos[0], pos[1], &postgres.MoveOptions{Progress: a.moveProgress(pos[0])})
	if err != nil {
		return err
	}
	left, err := a.otherTables(pos[0])
	if err != nil {
		return err
	}
	if fs.json {
		b, _ := json.Marshal(map[string]any{"left_tables": left, "pending": m.Pending, "running": m.Running, "dead": m.Dead, "completed": m.Completed, "cancelled": m.Cancelled,
			"attempts": m.Attempts, "skipped": m.Skipped, "schema": m.Schema, "last_job_id": m.LastJobID,
			"paused_queues": m.PausedQueues, "schedules": m.Schedules, "history_minutes": m.History, "escaped_text": m.Escaped})
		_, err = fmt.Fprintln(a.stdout, string(safeJSON(b)))
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "moved %s from %s into PostgreSQL schema %q: %d pending or scheduled, %d running (their leases run out as on SQLite), %s, %d completed, %d cancelled, %s; %s, %s, %s of history; %s already moved by an earlier run; new ids continue after %d\n",
		plural(m.Jobs(), "job", "jobs"), safeLine(pos[0]), safeLine(m.Schema), m.Pending, m.Running, plural(m.Dead, "dead letter", "dead letters"),
		m.Completed, m.Cancelled, plural(m.Attempts, "attempt record", "attempt records"), plural(m.PausedQueues, "paused queue", "paused queues"),
		plural(m.Schedules, "schedule", "schedules"), plural(m.History, "minute", "minutes"), plural(m.Skipped, "job", "jobs"), m.LastJobID)
	if err == nil {
		switch noun := "application tables"; len(left) {
		case 0:
			_, err = fmt.Fprintf(a.stdout, "%s holds no tables besides the queue's\n", safeLine(pos[0]))
		case 1:
			noun = "application table"
			fallthrough
		default:
			_, err = fmt.Fprintf(a.stdout, "left alone in %s: %s %s (only the queue's lq_* tables move; move the application's data with its own tools)\n",
				safeLine(pos[0]), noun, safeLine(quoteList(left)))
		}
	}
	if err == nil && m.Escaped > 0 {
		_, err = fmt.Fprintf(a.stdout, "%d text values (keys, names, errors) held NUL bytes or invalid UTF-8, which PostgreSQL cannot store: they were copied with each such byte written as \\xNN (and each backslash in them as \\\\)\n", m.Escaped)
	}
	if err == nil {
		_, err = fmt.Fprintf(a.stdout, "%s is marked as moved: applications and lqinspect open it read-only only\n", safeLine(pos[0]))
	}
	return err
}

// moveProgress returns the MoveOptions.Progress that tells on stderr each
// step of the move of the file at path, so that an operator whose move
// stopped half-way sees how far it came.
func (a *app) moveProgress(path string) func(postgres.MoveStep) {
	return func(step postgres.MoveStep) {
		switch step {
		case postgres.MoveMarked:
			fmt.Fprintf(a.stderr, "lqinspect migrate: %s is marked as moving; copying its jobs into PostgreSQL\n", safeLine(path))
		case postgres.MoveCopied:
			fmt.Fprintf(a.stderr, "lqinspect migrate: PostgreSQL committed the copy; recording the move's end in %s\n", safeLine(path))
		}
	}
}

// otherTables returns the tables of the file at path besides the queue's
// own (lq_*) and SQLite's: the application's tables, in a file the
// application shares with its queue (litequeue.New), which migrate leaves
// where they are.
func (a *app) otherTables(path string) ([]string, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(a.ctx, `SELECT name FROM sqlite_schema WHERE type = 'table'
		AND name NOT LIKE 'lq\_%' ESCAPE '\' AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("reading the tables left in %s: %w", path, err)
	}
	defer rows.Close()
	names := []string{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	return names, rows.Err()
}
