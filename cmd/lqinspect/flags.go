package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The commands' flags: the shared ones, parsing that allows flags after
// the arguments, job ids and durations in days.

// allCommandNames lists the command names for flag parsing, to tell a
// mistyped flag from a command given as one. It is filled at start-up from
// the command table, which refers to the very functions that parse flags.
var allCommandNames []string

// valueFlags and boolFlags are the flag names of all commands, so that
// flags given before the command are moved after it with their values.
// A command's own flag set still checks them.
var (
	valueFlags = map[string]bool{"now": true, "busy-timeout": true, "queue": true, "kind": true, "state": true,
		"order": true, "limit": true, "offset": true, "older-than": true, "policy": true, "policy-file": true, "interval": true, "from": true, "runs": true, "tag": true,
		"concurrency": true, "key-concurrency": true, "rate": true, "key-rate": true, "after": true}
	boolFlags = map[string]bool{"json": true, "watch": true, "all": true, "dead": true, "completed": true, "cancelled": true, "yes": true, "create": true, "dry-run": true, "cancel-all": true, "ordered": true, "clear": true}
)

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
	fs.SetOutput(safeWriter{a.stderr})
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
		fs.busyTimeout = 5 * time.Second
		fs.Var((*durationValue)(&fs.busyTimeout), "busy-timeout", "how long to wait for another process's write lock before failing")
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
			// The flag package printed the error and the usage; add what
			// the flag may have meant.
			if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
				var flags []string
				fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f.Name) })
				if m := suggest(name, flags); len(m) > 0 {
					fmt.Fprintf(fs.Output(), "did you mean --%s?\n", m[0])
				} else if valueFlags[name] || boolFlags[name] {
					// A flag of other commands: not a misspelt command.
					fmt.Fprintf(fs.Output(), "--%s is a flag of other commands, not of %s\n", name, fs.Name())
				} else if m := suggest(name, allCommandNames); len(m) > 0 {
					fmt.Fprintf(fs.Output(), "--%s is not a flag of %s; did you mean the command %q?\n", name, fs.Name(), m[0])
				}
			}
			return nil, usageError{}
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

// durationValue is a flag.Value for durations that, besides Go's units
// (time.ParseDuration: "90m", "36h", "1h30m"), takes days: "7d", "1d12h".
type durationValue time.Duration

func (d *durationValue) String() string { return time.Duration(*d).String() }

func (d *durationValue) Set(s string) error {
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d = durationValue(v)
	return nil
}

// parseDuration parses a duration with an optional leading count of days.
func parseDuration(s string) (time.Duration, error) {
	days, rest, found := strings.Cut(s, "d")
	var d time.Duration
	if found {
		n, err := strconv.ParseUint(days, 10, 16)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration like 7d, 36h or 1h30m", s)
		}
		d = time.Duration(n) * 24 * time.Hour
		if rest == "" {
			return d, nil
		}
	} else {
		rest = s
	}
	r, err := time.ParseDuration(rest)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration like 7d, 36h or 1h30m", s)
	}
	if found && r < 0 {
		return 0, fmt.Errorf("%q mixes days with a negative duration", s)
	}
	return d + r, nil
}

// durationFlag defines a duration flag that also takes days.
func (fs *flagSet) durationFlag(name string, value time.Duration, help string) *time.Duration {
	d := durationValue(value)
	fs.Var(&d, name, help)
	return (*time.Duration)(&d)
}
