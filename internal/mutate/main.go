// Command mutate checks that litequeue's tests fail when a documented
// guarantee is broken. It reads a curated list of mutants (mutants.txt beside
// this file): each one is an exact snippet of the source, its replacement,
// the guarantee the replacement breaks, and the tests that must then fail.
// For every mutant it applies the replacement in a scratch copy of the
// module, runs those tests, and reports the mutant killed (a test failed) or
// survived (every test passed: a hole in the suite), then a score.
//
// Usage, from the repository root:
//
//	go run ./internal/mutate                 # every mutant
//	go run ./internal/mutate -only 'stale'   # mutants whose name matches
//	go run ./internal/mutate -check          # only check the snippets still match
//
// A snippet that no longer occurs exactly once in its file is an error
// reported before anything runs: after a refactor, update the list. The
// exit status is 0 when every mutant was killed, 1 when one survived or the
// unmutated tests fail, 2 on a usage or list error.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// edit replaces the one occurrence of old in file with new.
type edit struct {
	file     string // relative to the module root
	old, new string
	line     int // where the edit starts in the list, for messages
}

// mutant is one deliberate break of a guarantee.
type mutant struct {
	name      string
	guarantee string
	tests     string // -run pattern of the tests that must fail
	pkg       string // package to test; default "."
	edits     []edit
	line      int
}

// parse reads the mutant list. Outside snippets, blank lines and lines
// starting with # are ignored. A mutant is
//
//	mutant: NAME
//	guarantee: WHAT THE CHANGE BREAKS
//	tests: GO TEST -run PATTERN
//	pkg: ./some/package        (optional; default .)
//	<<<< FILE
//	original lines, verbatim
//	====
//	replacement lines, verbatim
//	>>>>
//
// with one or more <<<< … >>>> edits.
func parse(r io.Reader) ([]mutant, error) {
	var ms []mutant
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		n++
		return sc.Text(), true
	}
	for {
		line, ok := next()
		if !ok {
			break
		}
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		key, val, _ := strings.Cut(line, ":")
		val = strings.TrimSpace(val)
		if strings.HasPrefix(line, "<<<<") {
			if len(ms) == 0 {
				return nil, fmt.Errorf("line %d: edit before the first mutant", n)
			}
			e := edit{file: strings.TrimSpace(strings.TrimPrefix(line, "<<<<")), line: n}
			if e.file == "" {
				return nil, fmt.Errorf("line %d: <<<< needs a file name", n)
			}
			var old, repl []string
			into := &old
			closed := false
			for !closed {
				l, ok := next()
				if !ok {
					return nil, fmt.Errorf("line %d: edit not closed with >>>>", e.line)
				}
				switch l {
				case "====":
					if into == &repl {
						return nil, fmt.Errorf("line %d: second ==== in one edit", n)
					}
					into = &repl
				case ">>>>":
					if into != &repl {
						return nil, fmt.Errorf("line %d: >>>> before ====", n)
					}
					closed = true
				default:
					*into = append(*into, l)
				}
			}
			e.old, e.new = strings.Join(old, "\n"), strings.Join(repl, "\n")
			if e.old == "" {
				return nil, fmt.Errorf("line %d: empty original snippet", e.line)
			}
			if e.old == e.new {
				return nil, fmt.Errorf("line %d: the replacement equals the original", e.line)
			}
			m := &ms[len(ms)-1]
			m.edits = append(m.edits, e)
			continue
		}
		switch key {
		case "mutant":
			ms = append(ms, mutant{name: val, pkg: ".", line: n})
		case "guarantee", "tests", "pkg":
			if len(ms) == 0 {
				return nil, fmt.Errorf("line %d: %s before the first mutant", n, key)
			}
			m := &ms[len(ms)-1]
			switch key {
			case "guarantee":
				m.guarantee = val
			case "tests":
				m.tests = val
			case "pkg":
				m.pkg = val
			}
		default:
			return nil, fmt.Errorf("line %d: unexpected %q; want mutant:, guarantee:, tests:, pkg: or <<<< FILE", n, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, m := range ms {
		switch {
		case m.name == "":
			return nil, fmt.Errorf("line %d: mutant without a name", m.line)
		case seen[m.name]:
			return nil, fmt.Errorf("line %d: mutant %q listed twice", m.line, m.name)
		case m.guarantee == "":
			return nil, fmt.Errorf("line %d: mutant %q names no guarantee", m.line, m.name)
		case m.tests == "":
			return nil, fmt.Errorf("line %d: mutant %q names no tests", m.line, m.name)
		case len(m.edits) == 0:
			return nil, fmt.Errorf("line %d: mutant %q has no edit", m.line, m.name)
		}
		if _, err := regexp.Compile(m.tests); err != nil {
			return nil, fmt.Errorf("line %d: mutant %q: tests: %v", m.line, m.name, err)
		}
		seen[m.name] = true
	}
	return ms, nil
}

// check reports every edit whose snippet does not occur exactly once in its
// file under root.
func check(root string, ms []mutant) error {
	var errs []error
	for _, m := range ms {
		for _, e := range m.edits {
			src, err := os.ReadFile(filepath.Join(root, e.file))
			if err != nil {
				errs = append(errs, fmt.Errorf("mutant %q (line %d): %v", m.name, e.line, err))
				continue
			}
			if c := bytes.Count(src, []byte(e.old)); c != 1 {
				errs = append(errs, fmt.Errorf("mutant %q (line %d): the snippet occurs %d times in %s, want exactly once; update the list", m.name, e.line, c, e.file))
			}
		}
	}
	return errors.Join(errs...)
}

// apply applies m's edits in root and returns a function that restores the
// files.
func apply(root string, m mutant) (restore func() error, err error) {
	orig := map[string][]byte{}
	restore = func() error {
		var errs []error
		for f, b := range orig {
			errs = append(errs, os.WriteFile(filepath.Join(root, f), b, 0o644))
		}
		return errors.Join(errs...)
	}
	for _, e := range m.edits {
		path := filepath.Join(root, e.file)
		src, err := os.ReadFile(path)
		if err != nil {
			return restore, err
		}
		if _, ok := orig[e.file]; !ok {
			orig[e.file] = src
		}
		if bytes.Count(src, []byte(e.old)) != 1 {
			return restore, fmt.Errorf("mutant %q: snippet at line %d does not occur exactly once in %s (edits of one mutant must not overlap)", m.name, e.line, e.file)
		}
		src = bytes.Replace(src, []byte(e.old), []byte(e.new), 1)
		if err := os.WriteFile(path, src, 0o644); err != nil {
			return restore, err
		}
	}
	return restore, nil
}

// copyModule copies the files git knows of (tracked or not ignored) from
// root into a new temporary directory, so the working tree is never mutated.
func copyModule(root string) (string, error) {
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return "", fmt.Errorf("git ls-files: %w", err)
	}
	dst, err := os.MkdirTemp("", "litequeue-mutate-")
	if err != nil {
		return "", err
	}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if f == "" {
			continue
		}
		src := filepath.Join(root, f)
		st, err := os.Lstat(src)
		if err != nil || !st.Mode().IsRegular() {
			continue // deleted in the work tree, or not a regular file
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return dst, err
		}
		if err := os.MkdirAll(filepath.Join(dst, filepath.Dir(f)), 0o755); err != nil {
			return dst, err
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, st.Mode().Perm()); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// result of running a mutant's tests.
type result struct {
	killed  bool
	invalid bool   // the mutant does not build: a mistake in the list
	why     string // the first failing test or the build error
	took    time.Duration
}

var failLine = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)|^panic: test timed out.*|^FAIL\s+\S+ \[build failed\]|^.*\.go:\d+:\d+: .*`)

// runTests runs the tests matching pattern of pkg in dir.
func runTests(ctx context.Context, dir, pkg, pattern string, timeout time.Duration, race bool) (result, string) {
	args := []string{"test", "-count=1", "-failfast", "-timeout", timeout.String(), "-run", pattern}
	if race {
		args = append(args, "-race")
	}
	args = append(args, pkg)
	ctx, cancel := context.WithTimeout(ctx, timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	start := time.Now()
	out, err := cmd.CombinedOutput()
	r := result{took: time.Since(start)}
	if err == nil {
		if bytes.Contains(out, []byte("no tests to run")) {
			return result{killed: false, why: "no test matched " + pattern, took: r.took}, string(out)
		}
		return r, string(out)
	}
	if bytes.Contains(out, []byte("[build failed]")) || bytes.Contains(out, []byte("[setup failed]")) {
		r.invalid = true
	}
	r.killed = true
	if m := failLine.Find(out); m != nil {
		r.why = strings.TrimSpace(string(m))
	} else {
		r.why = strings.TrimSpace(string(lastLine(out)))
	}
	return r, string(out)
}

func lastLine(b []byte) []byte {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}

// moduleRoot is the directory of the main module's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside a Go module; run from the repository")
	}
	return filepath.Dir(mod), nil
}

func main() {
	list := flag.String("list", "", "mutant list (default internal/mutate/mutants.txt of the module)")
	only := flag.String("only", "", "run only the mutants whose name matches this regular expression")
	checkOnly := flag.Bool("check", false, "only check that every snippet occurs exactly once, run nothing")
	timeout := flag.Duration("timeout", 3*time.Minute, "bound on one mutant's test run (a hang counts as killed)")
	race := flag.Bool("race", false, "run the tests with the race detector (slower)")
	verbose := flag.Bool("v", false, "print the test output of survivors and of the baseline")
	flag.Parse()

	root, err := moduleRoot()
	if err != nil {
		fatal(2, err)
	}
	if *list == "" {
		*list = filepath.Join(root, "internal", "mutate", "mutants.txt")
	}
	f, err := os.Open(*list)
	if err != nil {
		fatal(2, err)
	}
	ms, err := parse(f)
	f.Close()
	if err != nil {
		fatal(2, fmt.Errorf("%s: %w", *list, err))
	}
	if err := check(root, ms); err != nil {
		fatal(2, fmt.Errorf("%s is out of date with the source:\n%w", *list, err))
	}
	if *checkOnly {
		fmt.Printf("%d mutants, every snippet found exactly once\n", len(ms))
		return
	}
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			fatal(2, fmt.Errorf("-only: %w", err))
		}
		var sel []mutant
		for _, m := range ms {
			if re.MatchString(m.name) {
				sel = append(sel, m)
			}
		}
		ms = sel
		if len(ms) == 0 {
			fatal(2, fmt.Errorf("-only %q matches no mutant", *only))
		}
	}

	dir, err := copyModule(root)
	if dir != "" {
		defer os.RemoveAll(dir)
	}
	if err != nil {
		fatal(2, err)
	}
	// An interrupt ends the run but still removes the scratch copy.
	ctx := context.Background()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		time.Sleep(time.Second) // let the test process exit first
		os.RemoveAll(dir)
		os.Exit(130)
	}()
	start := time.Now()

	// Baseline: every test the list names must pass unmutated, or a
	// "killed" would mean nothing.
	byPkg := map[string][]string{}
	var pkgs []string
	for _, m := range ms {
		if _, ok := byPkg[m.pkg]; !ok {
			pkgs = append(pkgs, m.pkg)
		}
		byPkg[m.pkg] = append(byPkg[m.pkg], "(?:"+m.tests+")")
	}
	for _, pkg := range pkgs {
		pattern := strings.Join(byPkg[pkg], "|")
		r, out := runTests(ctx, dir, pkg, pattern, *timeout, *race)
		if r.killed {
			fmt.Fprintf(os.Stderr, "the unmutated tests of %s fail (%s); fix them before measuring:\n%s\n", pkg, r.why, out)
			os.Exit(1)
		}
		fmt.Printf("baseline %s: the named tests pass unmutated (%s)\n", pkg, r.took.Round(time.Second))
		if *verbose {
			fmt.Print(out)
		}
	}

	var survivors []mutant
	killed := 0
	for i, m := range ms {
		restore, err := apply(dir, m)
		if err != nil {
			_ = restore()
			fatal(2, err)
		}
		r, out := runTests(ctx, dir, m.pkg, m.tests, *timeout, *race)
		if err := restore(); err != nil {
			fatal(2, fmt.Errorf("restoring after mutant %q: %w", m.name, err))
		}
		if r.invalid {
			fatal(2, fmt.Errorf("mutant %q does not build; fix its replacement in the list:\n%s", m.name, out))
		}
		status := "killed  "
		if r.killed {
			killed++
		} else {
			status = "SURVIVED"
			survivors = append(survivors, m)
		}
		fmt.Printf("[%2d/%d] %s %-34s %6s  %s\n", i+1, len(ms), status, m.name, r.took.Round(100*time.Millisecond), r.why)
		if !r.killed && *verbose {
			fmt.Print(out)
		}
	}
	fmt.Printf("\nscore: %d of %d mutants killed (%.0f%%) in %s\n", killed, len(ms), 100*float64(killed)/float64(len(ms)), time.Since(start).Round(time.Second))
	if len(survivors) > 0 {
		fmt.Println("\nsurvivors (a guarantee broken and no test noticed):")
		for _, m := range survivors {
			fmt.Printf("  %s: %s\n    tests: %s\n", m.name, m.guarantee, m.tests)
		}
		os.Exit(1)
	}
}

func fatal(code int, err error) {
	fmt.Fprintln(os.Stderr, "mutate:", err)
	os.Exit(code)
}
