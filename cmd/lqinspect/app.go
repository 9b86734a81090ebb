package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
)

// What every command reads and writes (app), and how a command's error
// becomes the exit code and message.

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// envNow fixes "now" (RFC 3339) for every command, like --now; for tests
// and reproducible output.
const envNow = "LQINSPECT_NOW"

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
	// isTerminalOut reports whether w is a terminal (nil: never), so that
	// screen control codes go only to terminals, never to pipes and files.
	isTerminalOut func(w io.Writer) bool
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

// exit prints err for command name, escaped for the terminal (safeText: a
// message may quote a path, a name or a stored error), and returns the exit
// code.
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
		fmt.Fprintf(a.stderr, "lqinspect %s: %s\n", name, safeText(ue.msg))
		fmt.Fprintf(a.stderr, "Run 'lqinspect %s -h' for usage.\n", name)
		return exitUsage
	default:
		// The command's name says where the error comes from; the
		// library's own "litequeue: " prefix would say it twice.
		fmt.Fprintf(a.stderr, "lqinspect %s: %s\n", name, safeText(strings.TrimPrefix(err.Error(), "litequeue: ")))
		return exitError
	}
}

// usageError is a bad invocation: exit code 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return usageError{msg: fmt.Sprintf(format, args...)}
}

type command struct {
	name    string
	summary string
	run     func(a *app, args []string) error
}
