package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/litequeue/litequeue/internal/humantime"
)

// none is what a table shows for an absent value.
const none = "-"

// relTime says when t is relative to now: "in 4m", "12s ago", "now", or
// none for a zero t (humantime.Rel: times more than 292 years apart are
// shown in days and hours).
func relTime(t, now time.Time) string {
	if t.IsZero() {
		return none
	}
	return humantime.Rel(t, now)
}

// absTime formats t in UTC, or none when zero.
func absTime(t time.Time) string {
	if t.IsZero() {
		return none
	}
	return t.UTC().Format(time.RFC3339)
}

// whenTime is absTime with relTime in parentheses.
func whenTime(t, now time.Time) string {
	if t.IsZero() {
		return none
	}
	return absTime(t) + " (" + relTime(t, now) + ")"
}

// roundDuration formats d for reading, rounded to what a reader uses:
// "350ms", "17.6s", and from a minute on its two largest units ("4m12s",
// "3d2h"); under a millisecond in microseconds ("412µs"). --json output keeps
// exact values instead.
func roundDuration(d time.Duration) string {
	abs := d
	if abs < 0 {
		abs = -abs // MinInt64 stays negative and goes to humantime below
	}
	switch {
	case abs < 0 || abs >= time.Minute:
		return humantime.Duration(d)
	case abs >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	case abs >= time.Millisecond:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Microsecond).String()
}

// percent formats fraction (1 is 100%) with at most one decimal: "5.7%",
// "42%". A fraction that rounds to 0% or 100% without being it reads
// "<0.1%" or ">99.9%", so that neither claims nothing or all was done.
func percent(fraction float64) string {
	p := fraction * 100
	switch {
	case p > 0 && p < 0.05:
		return "<0.1%"
	case p < 100 && p >= 99.95:
		return ">99.9%"
	}
	return strings.TrimSuffix(strconv.FormatFloat(p, 'f', 1, 64), ".0") + "%"
}

// shorten returns the first line of s escaped for the terminal (safeLine),
// cut to at most n runes with "…", and " …" after it when more lines
// follow. An escape sequence is never cut in half.
func shorten(s string, n int) string {
	line, _, more := strings.Cut(s, "\n")
	line = strings.TrimSpace(line)
	if line == "" && !more {
		return none
	}
	if safe := safeLine(line); utf8.RuneCountInString(safe) <= n {
		if more {
			return safe + " …"
		}
		return safe
	}
	var b strings.Builder
	width := 0
	for i := 0; i < len(line); {
		_, size := utf8.DecodeRuneInString(line[i:])
		piece := safeLine(line[i : i+size])
		if width += utf8.RuneCountInString(piece); width > n-1 {
			break
		}
		b.WriteString(piece)
		i += size
	}
	return b.String() + "…"
}

// orNone returns s, or none when s is empty.
func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

// table writes rows under header as aligned columns, or the line empty
// when there are no rows. Every cell is escaped for the terminal (safeLine):
// one line of printable runes, so its width is its rune count.
func table(w io.Writer, empty string, header []string, rows [][]string) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, empty)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	cells := make([]string, 0, len(header))
	for _, r := range rows {
		cells = cells[:0]
		for _, c := range r {
			cells = append(cells, safeLine(c))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// writeJSON writes v as one indented JSON document, escaped for the
// terminal (safeJSON).
func writeJSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(safeJSON(b.Bytes()))
	return err
}

// writeList writes items as one JSON array, [] when there are none.
func writeList[T any](w io.Writer, items []T) error {
	if items == nil {
		items = []T{}
	}
	return writeJSON(w, items)
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
