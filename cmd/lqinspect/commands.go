package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// The commands of lqinspect, and finding the one args name wherever it
// stands among the flags.

var commands = []command{
	{"stats", "counts per queue: ready, scheduled, running, dead, completed", (*app).stats},
	{"jobs", "list jobs, filtered by queue, state and kind", (*app).jobs},
	{"show", "one job whole: payload and every attempt", (*app).show},
	{"dead", "list dead letters", (*app).dead},
	{"requeue", "move dead letters back to ready", (*app).requeue},
	{"purge", "delete dead letters, retained completed or cancelled jobs", (*app).purge},
	{"cancel", "cancel jobs: pending, scheduled or running", (*app).cancel},
	{"pause", "pause a queue in every process", (*app).pause},
	{"resume", "resume a paused queue", (*app).resume},
	{"plan", "print the retry schedule of a RetryPolicy", (*app).plan},
	{"backup", "write a consistent copy of a live queue (file or PostgreSQL) to a file", (*app).backup},
	{"migrate", "copy a queue file's jobs into PostgreSQL", (*app).migrate},
	{"schema", "print the SQL of a PostgreSQL queue's tables, for your own migrations", (*app).schema},
	{"upgrade", "migrate a queue of an older schema on purpose (writing commands refuse one)", (*app).upgrade},
	{"schedules", "list recurring jobs; pause, resume or trigger one", (*app).schedules},
	{"workflow", "a workflow as a text graph: each job's state and why a waiting one waits; cancel all of it", (*app).workflow},
	{"processes", "list the processes working the queues: host, pid, heartbeat, alive or dead", (*app).processes},
	{"limits", "show or set a queue's flow-control limits (concurrency, per group, ordered, rates)", (*app).limits},
	{"groups", "a queue's groups: running, pending, oldest and the job heading an ordered group", (*app).groups},
	serveCommand,
}

func (a *app) usage(w io.Writer) {
	fmt.Fprint(w, `lqinspect looks inside and operates a litequeue queue file.

Usage:

	lqinspect <command> [arguments]

The commands are:

`)
	for _, c := range commands {
		fmt.Fprintf(w, "\t%-9s %s\n", c.name, c.summary)
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
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 && args[0] == "help" {
			return a.run([]string{args[1], "-h"})
		}
		a.usage(a.stdout)
		return exitOK
	}
	c, rest, err := findCommand(args)
	if err != nil {
		fmt.Fprintf(a.stderr, "lqinspect: %s\n", safeText(err.Error()))
		if strings.Contains(err.Error(), "did you mean") {
			fmt.Fprintln(a.stderr, "Run 'lqinspect help' for the commands.")
		} else {
			fmt.Fprintln(a.stderr)
			a.usage(a.stderr)
		}
		return exitUsage
	}
	return a.exit(c.name, c.run(a, rest))
}

// findCommand finds the command in args, wherever it stands: flags may come
// before it ("lqinspect --json stats FILE") and so may the file
// ("lqinspect FILE stats"); every other argument goes to the command, in
// order. A word that is no command is answered with the commands it may
// have meant.
func findCommand(args []string) (*command, []string, error) {
	var rest []string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			break
		}
		if strings.HasPrefix(arg, "-") && len(arg) > 1 {
			rest = append(rest, arg)
			if name := strings.TrimLeft(arg, "-"); !strings.Contains(name, "=") && valueFlags[name] && i+1 < len(args) {
				i++
				rest = append(rest, args[i])
			}
			continue
		}
		if c := lookup(arg); c != nil {
			return c, append(rest, args[i+1:]...), nil
		}
		rest = append(rest, arg)
	}
	// No command: explain with the first word (or flag) that might be one.
	for _, arg := range args {
		if arg == "--" {
			break
		}
		word := strings.TrimLeft(arg, "-")
		if word == "" || valueFlags[word] || boolFlags[word] || looksLikeFile(arg) {
			continue
		}
		if m := suggest(word, commandNames()); len(m) > 0 {
			if strings.HasPrefix(arg, "-") {
				return nil, nil, fmt.Errorf("no command given, and %s is not a flag; did you mean the command %s?", arg, quoteList(m))
			}
			return nil, nil, fmt.Errorf("unknown command %q; did you mean %s?", arg, quoteList(m))
		}
		if !strings.HasPrefix(arg, "-") {
			return nil, nil, fmt.Errorf("unknown command %q", arg)
		}
	}
	return nil, nil, errors.New("no command given")
}

// lookup returns the command called name, or nil.
func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

func init() { allCommandNames = commandNames() }

func commandNames() []string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return names
}

// looksLikeFile reports whether arg names an existing file or has a file
// extension: a queue file, not a mistyped command.
func looksLikeFile(arg string) bool {
	if _, err := os.Stat(arg); err == nil {
		return true
	}
	return strings.ContainsAny(arg, "./\\")
}
