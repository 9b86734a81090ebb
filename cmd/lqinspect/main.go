// Command lqinspect looks inside a litequeue queue file and operates it from
// the shell: counts per queue, job listings, one job's whole history, dead
// letters, requeue, purge and cancel, and the schedule a retry policy gives.
//
// It works on a file while the application runs: read-only commands open the
// file read-only (WAL readers do not block the writer), and mutating commands
// wait at most --busy-timeout for the application's write lock.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// envNow fixes "now" (RFC 3339) for every command, like --now; for tests
// and reproducible output.
const envNow = "LQINSPECT_NOW"

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
	}
	return a.run(args)
}

// app holds what a command reads and writes; tests replace the seams.
type app struct {
	ctx        context.Context
	stdin      io.Reader
	stdout     io.Writer
	stderr     io.Writer
	getenv     func(string) string
	isTerminal func(io.Reader) bool
	// newTicker returns a channel that ticks every d and a stop function.
	newTicker func(d time.Duration) (<-chan time.Time, func())
}

func realTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// isTerminal reports whether r is a terminal (not merely a character
// device: /dev/null from cron is not one, so purge asks for --yes there).
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

type command struct {
	name    string
	summary string
	run     func(a *app, args []string) error
}

var commands = []command{
	{"stats", "counts per queue: ready, scheduled, running, dead, completed", (*app).stats},
	{"jobs", "list jobs, filtered by queue, state and kind", (*app).jobs},
	{"show", "one job whole: payload and every attempt", (*app).show},
	{"dead", "list dead letters", (*app).dead},
	{"requeue", "move dead letters back to ready", (*app).requeue},
	{"purge", "delete dead letters or retained completed jobs", (*app).purge},
	{"cancel", "remove pending or scheduled jobs", (*app).cancel},
	{"plan", "print the retry schedule of a RetryPolicy", (*app).plan},
	serveCommand,
}

func (a *app) usage(w io.Writer) {
	fmt.Fprint(w, `lqinspect looks inside and operates a litequeue queue file.

Usage:

	lqinspect <command> [arguments]

The commands are:

`)
	for _, c := range commands {
		fmt.Fprintf(w, "\t%-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Run "lqinspect <command> -h" for a command's flags.
Set `+envNow+` (RFC 3339) or pass --now to fix the time relative times are shown against.
`)
}

func (a *app) run(args []string) int {
	if len(args) == 0 {
		a.usage(a.stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 && name == "help" {
			return a.run([]string{args[1], "-h"})
		}
		a.usage(a.stdout)
		return exitOK
	}
	for _, c := range commands {
		if c.name == name {
			return a.exit(name, c.run(a, args[1:]))
		}
	}
	fmt.Fprintf(a.stderr, "lqinspect: unknown command %q\n\n", name)
	a.usage(a.stderr)
	return exitUsage
}

// exit prints err for command name and returns the exit code.
func (a *app) exit(name string, err error) int {
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		if ue.msg == "" { // the flag package printed the error and the usage
			return exitUsage
		}
		fmt.Fprintf(a.stderr, "lqinspect %s: %s\n", name, ue.msg)
		fmt.Fprintf(a.stderr, "Run 'lqinspect %s -h' for usage.\n", name)
		return exitUsage
	default:
		fmt.Fprintf(a.stderr, "lqinspect %s: %v\n", name, err)
		return exitError
	}
}

// usageError is a bad invocation: exit code 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return usageError{msg: fmt.Sprintf(format, args...)}
}

// flagSet is a subcommand's flags with the ones most commands share.
type flagSet struct {
	*flag.FlagSet
	json        bool
	now         string
	busyTimeout time.Duration
}

// newFlags returns the flag set of command name. synopsis is its argument
// line and help its description, both printed by -h.
func (a *app) newFlags(name, synopsis, help string) *flagSet {
	fs := &flagSet{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError)}
	fs.SetOutput(a.stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: lqinspect %s %s\n\n%s\n", name, synopsis, strings.TrimSpace(help))
		var n int
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprint(w, "\nFlags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

// jsonFlag adds --json.
func (fs *flagSet) jsonFlag() {
	fs.BoolVar(&fs.json, "json", false, "print one JSON document instead of a table")
}

// fileFlags adds the flags of commands that open a queue file: --now and,
// for mutating commands, --busy-timeout.
func (fs *flagSet) fileFlags(mutating bool) {
	fs.StringVar(&fs.now, "now", "", "show times relative to this RFC 3339 time instead of the clock (also $"+envNow+")")
	if mutating {
		fs.DurationVar(&fs.busyTimeout, "busy-timeout", 5*time.Second, "how long to wait for another process's write lock before failing")
	}
}

// parse parses args, allowing flags after positional arguments
// ("lqinspect jobs q.db --state dead"); "--" ends the flags. It returns the
// positional arguments.
func (fs *flagSet) parse(args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{} // the flag package printed the error and the usage
		}
		used := len(args) - fs.NArg()
		rest := fs.Args()
		if used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// parseFileIDs parses args of the form FILE [ID...].
func (fs *flagSet) parseFileIDs(args []string) (path string, ids []int64, err error) {
	pos, err := fs.parse(args)
	if err != nil {
		return "", nil, err
	}
	if len(pos) == 0 {
		return "", nil, usagef("missing FILE")
	}
	ids, err = parseIDs(pos[1:])
	return pos[0], ids, err
}

// parseIDs parses job ids.
func parseIDs(args []string) ([]int64, error) {
	ids := make([]int64, 0, len(args))
	for _, s := range args {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			return nil, usagef("%q is not a job id (a positive integer)", s)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
