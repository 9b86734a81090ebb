// Command lqinspect looks inside a litequeue queue — a queue file, or a
// PostgreSQL queue given by its postgres:// URL — and operates it from the
// shell: counts per queue, job listings, one job's whole history, dead
// letters, requeue, purge, cancel, pause and resume, schedules, the schedule
// a retry policy gives, backups, moving a file to PostgreSQL, schema SQL,
// upgrades, and the web dashboard (serve). "lqinspect -h" lists the commands;
// docs/lqinspect.md in the repository describes them.
//
// It works on a file while the application runs: read-only commands open the
// file read-only (WAL readers do not block the writer), and mutating commands
// wait at most --busy-timeout for the application's write lock.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run runs lqinspect with args (without the program name) and returns the
// exit code. It stops at SIGINT or SIGTERM.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a := &app{
		ctx:        ctx,
		stdin:      stdin,
		stdout:     stdout,
		stderr:     stderr,
		getenv:     os.Getenv,
		isTerminal: isTerminal,
		newTicker:  realTicker,
		isTerminalOut: func(w io.Writer) bool {
			f, ok := w.(*os.File)
			return ok && isTerminal(f)
		},
	}
	return a.run(args)
}
