package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/humantime"
)

// terminalSafe reports what in out a terminal would act on or that hides
// text: anything but valid UTF-8 of printable runes, spaces and the
// whitespace allowed ("\n", "\t").
func terminalSafe(out, allowed string) (rune, bool) {
	if !utf8.ValidString(out) {
		return utf8.RuneError, false
	}
	for _, r := range out {
		if r != ' ' && !unicode.IsPrint(r) && !strings.ContainsRune(allowed, r) {
			return r, false
		}
	}
	return 0, true
}

// printable reports whether s is text the terminal shows as it is.
func printable(s, allowed string) bool {
	_, ok := terminalSafe(s, allowed)
	return ok
}

// FuzzTerminalText: whatever a queue file holds, what lqinspect prints of
// it has no control bytes, is valid UTF-8, is printed unchanged when it is
// visible text already, and keeps one rune per cell column.
func FuzzTerminalText(f *testing.F) {
	for _, s := range []string{"", "plain", "ünï 名前 🔑", "a\tb\nc\r\n", "\x1b]0;title\x07", "\x1b[2K\rall good",
		"\x1b]52;c;cHduZWQ=\x07", "\u202Egpj.exe", "\u0085\u009b31m", "\xff\xfe", "a\\x1b", "\U000E0001", "\u2028\u2029", "\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		line, text := safeLine(s), safeText(s)
		if r, ok := terminalSafe(line, ""); !ok {
			t.Fatalf("safeLine(%q) = %q holds %U", s, line, r)
		}
		if r, ok := terminalSafe(text, "\n"); !ok {
			t.Fatalf("safeText(%q) = %q holds %U", s, text, r)
		}
		if strings.Count(text, "\n") != strings.Count(s, "\n") {
			t.Fatalf("safeText(%q) = %q changed the lines", s, text)
		}
		if printable(s, "") && line != s {
			t.Fatalf("safeLine changed visible text %q into %q", s, line)
		}
		if printable(s, "\n") && text != s {
			t.Fatalf("safeText changed visible text %q into %q", s, text)
		}
		if safeLine(line) != line || safeText(text) != text {
			t.Fatalf("escaping %q twice changes it", s)
		}
		var w bytes.Buffer
		safeWriter{&w}.Write([]byte(s))
		if r, ok := terminalSafe(w.String(), "\n\t"); !ok {
			t.Fatalf("safeWriter wrote %q for %q: %U", w.String(), s, r)
		}
		for _, n := range []int{2, 10, 40, 60} {
			cell := shorten(s, n)
			if r, ok := terminalSafe(cell, ""); !ok {
				t.Fatalf("shorten(%q, %d) = %q holds %U", s, n, cell, r)
			}
			if c := utf8.RuneCountInString(strings.TrimSuffix(cell, " …")); c > n {
				t.Fatalf("shorten(%q, %d) = %q is %d runes", s, n, cell, c)
			}
		}
		var tb bytes.Buffer
		if err := table(&tb, "", []string{"A", "B"}, [][]string{{s, "x"}, {"y", s}}); err != nil {
			t.Fatal(err)
		}
		if r, ok := terminalSafe(tb.String(), "\n"); !ok {
			t.Fatalf("table of %q holds %U", s, r)
		}
		if lines := strings.Count(tb.String(), "\n"); lines != 3 {
			t.Fatalf("table of %q has %d lines, want 3", s, lines)
		}
		doc, err := json.Marshal(map[string]string{"v": s})
		if err != nil {
			t.Fatal(err)
		}
		safe := safeJSON(doc)
		if r, ok := terminalSafe(string(safe), ""); !ok {
			t.Fatalf("safeJSON(%s) = %s holds %U", doc, safe, r)
		}
		var a, b map[string]string
		if err := json.Unmarshal(doc, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(safe, &b); err != nil || a["v"] != b["v"] {
			t.Fatalf("safeJSON(%s) = %s reads back %q, %v; want %q", doc, safe, b["v"], err, a["v"])
		}
	})
}

// FuzzTimes: relative times and --now never crash, whatever times a file
// holds and whatever --now says.
func FuzzTimes(f *testing.F) {
	f.Add(int64(0), int64(0), int64(1767225600), int64(0), "2026-01-01T00:00:00Z")
	f.Add(int64(-8520336000), int64(0), int64(1767225600), int64(0), "9999-12-31T23:59:59Z")
	f.Add(int64(math.MaxInt64/1000000000), int64(999999999), int64(math.MinInt64/1000000000), int64(0), "1969-12-31T23:59:59Z")
	f.Add(int64(math.MaxInt64), int64(0), int64(math.MinInt64), int64(0), "yesterday")
	f.Fuzz(func(t *testing.T, sec, nsec, nowSec, nowNsec int64, now string) {
		at, ref := time.Unix(sec, nsec), time.Unix(nowSec, nowNsec)
		rel := relTime(at, ref)
		switch c := at.Compare(ref); {
		case at.IsZero():
			if rel != none {
				t.Fatalf("relTime of the zero time = %q", rel)
			}
		case c > 0 && !strings.HasPrefix(rel, "in "), c < 0 && !strings.HasSuffix(rel, " ago"), c == 0 && rel != "now":
			t.Fatalf("relTime(%v, %v) = %q", at, ref, rel)
		}
		humantime.Duration(time.Duration(sec*1e9 + nsec))
		humantime.Duration(time.Duration(sec))
		a := &app{getenv: func(string) string { return "" }}
		got, err := a.fixedNow(now)
		if err == nil && !got.IsZero() && (got.Before(earliestNow) || got.After(latestNow)) {
			t.Fatalf("--now %q accepted as %v, outside the stored years", now, got)
		}
	})
}

// FuzzPlan: any --policy JSON is refused with an error or planned in at
// most planStepLimit steps, each wait range ordered and the cumulative
// time growing, and printed as terminal-safe text.
func FuzzPlan(f *testing.F) {
	for _, s := range []string{`{"max_attempts":5,"backoff":{"kind":"exponential","base":"1s","factor":2,"max":"5m0s","jitter":true}}`,
		`{"max_attempts":9223372036854775807}`, `{"max_attempts":1000000000,"backoff":{"kind":"fixed","delay":"2562047h"}}`,
		`{"max_attempts":3,"backoff":{"kind":"exponential","base":"1ns","factor":1e308,"max":"2562047h"}}`, `{}`, `[]`, `{"max_attempts":-1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, policy string) {
		var p litequeue.RetryPolicy
		if json.Unmarshal([]byte(policy), &p) != nil {
			return
		}
		plan := planFor(p)
		if len(plan.Steps) > planStepLimit || len(plan.Steps)+plan.NotListed != p.Attempts() {
			t.Fatalf("%s: %d steps and %d not listed for %d attempts", policy, len(plan.Steps), plan.NotListed, p.Attempts())
		}
		var last time.Duration
		for _, s := range plan.Steps {
			if s.MinDelay > s.MaxDelay || s.MinDelay < 0 || s.Cumulative < last {
				t.Fatalf("%s: step %+v", policy, s)
			}
			last = s.Cumulative
		}
		var b bytes.Buffer
		if err := planTable(&b, p, plan); err != nil {
			t.Fatal(err)
		}
		if r, ok := terminalSafe(b.String(), "\n"); !ok {
			t.Fatalf("%s: the plan holds %U", policy, r)
		}
	})
}

// FuzzCommandLine: any command line (arguments separated by NUL) is parsed
// without a panic, answered with exit code 0, 1 or 2, and with output a
// terminal shows as text. It runs in an empty directory, so no FILE exists
// and every command stops after parsing, at the latest when it opens FILE;
// commands that would reach the network (URLs, serve's address lookup,
// migrate) or paths outside the directory (a device, a FIFO) are left out.
func FuzzCommandLine(f *testing.F) {
	for _, s := range []string{"stats\x00q.db", "jobs\x00q.db\x00--state\x00ready,bogus", "q.db\x00stats\x00--now\x009999-12-31T23:59:59Z",
		"plan\x00--policy\x00{\"max_attempts\":9223372036854775807}", "plan\x00--policy-file\x00-", "show\x00q.db\x00-3",
		"purge\x00q.db\x00--dead\x00--older-than\x001d12h", "requeue\x00q.db\x00--all\x00--kind\x00\x1b[2J", "stat", "--json\x00stats",
		"help\x00jobs", "stats\x00--\x1b]0;x\x07", "schedules\x00q.db\x00history", "upgrade\x00q.db\x00--busy-timeout\x00-1s"} {
		f.Add(s)
	}
	f.Chdir(f.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, "\x00")
		for _, a := range args {
			if strings.Contains(a, "://") || strings.HasPrefix(a, "postgres") || strings.Contains(a, "/") || strings.Contains(a, "..") {
				return
			}
		}
		if c, _, err := findCommand(args); err == nil && (c.name == "serve" || c.name == "migrate") {
			return
		}
		var out, errOut bytes.Buffer
		a := &app{ctx: ctx, stdin: strings.NewReader(""), stdout: &out, stderr: &errOut,
			getenv: func(string) string { return "" }, isTerminal: func(io.Reader) bool { return false },
			newTicker: func(time.Duration) (<-chan time.Time, func()) { return nil, func() {} }}
		code := a.run(args)
		if code < 0 || code > 2 {
			t.Fatalf("%q: exit code %d", args, code)
		}
		if r, ok := terminalSafe(out.String(), "\n\t"); !ok {
			t.Fatalf("%q: stdout holds %U: %q", args, r, out.String())
		}
		if r, ok := terminalSafe(errOut.String(), "\n\t"); !ok {
			t.Fatalf("%q: stderr holds %U: %q", args, r, errOut.String())
		}
	})
}
