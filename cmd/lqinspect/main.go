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
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
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
		isTerminalOut: func(w io.Writer) bool {
			f, ok := w.(*os.File)
			return ok && isTerminal(f)
		},
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

// allCommandNames lists the commands for flag parsing, which the commands
// themselves use (so it cannot refer to commands in its initializer).
var allCommandNames []string

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

// valueFlags and boolFlags are the flag names of all commands, so that
// flags given before the command are moved after it with their values.
// A command's own flag set still checks them.
var (
	valueFlags = map[string]bool{"now": true, "busy-timeout": true, "queue": true, "kind": true, "state": true,
		"order": true, "limit": true, "offset": true, "older-than": true, "policy": true, "policy-file": true, "interval": true, "from": true, "runs": true, "tag": true}
	boolFlags = map[string]bool{"json": true, "watch": true, "all": true, "dead": true, "completed": true, "cancelled": true, "yes": true, "create": true, "dry-run": true}
)

// suggest returns the candidates within a small edit distance of word, or
// that word is a prefix of, closest first.
func suggest(word string, candidates []string) []string {
	type scored struct {
		name string
		d    int
	}
	var found []scored
	for _, c := range candidates {
		d := editDistance(strings.ToLower(word), c)
		if d <= max(1, len(c)/3) || (len(word) >= 2 && strings.HasPrefix(c, word)) {
			found = append(found, scored{c, d})
		}
	}
	sort.SliceStable(found, func(i, j int) bool { return found[i].d < found[j].d })
	out := make([]string, len(found))
	for i, f := range found {
		out[i] = f.name
	}
	return out
}

// editDistance is the edit distance between a and b counting an insertion,
// a deletion, a substitution and a swap of two neighbours ("meida" for
// "media") as one edit each (optimal string alignment).
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
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
func (fs *flagSet) durationFlag(name string, value time.Duration, usage string) *time.Duration {
	d := durationValue(value)
	fs.Var(&d, name, usage)
	return (*time.Duration)(&d)
}
