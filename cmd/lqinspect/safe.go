package main

import (
	"bytes"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/litequeue/litequeue/internal/redact"
)

// Everything lqinspect prints that came from a queue (names, keys, errors,
// payloads, outputs, schedule details) or from outside it (paths, URLs,
// error messages) goes through safeLine, safeText or safeJSON first: a
// queue file can come from anyone, and its text must not drive the
// terminal. Printable text is kept as it is, in every script; what a
// terminal would act on or that hides text is written as a visible escape:
//
//   - C0 controls and DEL (ESC, CR, BEL, backspace, ...): \x1b, \r, \x07, \x08
//   - C1 controls (U+0080-U+009F, 8-bit CSI among them): \u009b
//   - format characters (bidirectional overrides such as U+202E, zero-width
//     characters), white space other than the space, line and paragraph
//     separators, private-use and unassigned code points: \u202e
//   - bytes that are not UTF-8: \xff
//
// Tab-aligned tables stay aligned: every cell is one line of printable
// runes, so its width is its rune count.

// safeLine returns s escaped for one line or one table cell: newlines and
// tabs are escaped too.
func safeLine(s string) string { return escape(s, false, false) }

// safeText returns s escaped for a block of lines: newlines are kept,
// everything else is escaped as safeLine does.
func safeText(s string) string { return escape(s, true, false) }

// safeWriter writes what it is given escaped for the terminal, newlines
// and tabs kept: for the flag package's messages, which quote the
// arguments as given, and its usage text.
type safeWriter struct{ w io.Writer }

func (s safeWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(s.w, escape(string(p), true, true)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// safeAddr returns a queue's address (a file path or a postgres:// URL)
// for printing: the URL's password masked, then escaped.
func safeAddr(addr string) string { return safeLine(redact.URL(addr)) }

func escape(s string, keepNewlines, keepTabs bool) string {
	if printableASCII(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
		case r == '\n' && keepNewlines, r == '\t' && keepTabs:
			b.WriteRune(r)
		case r == ' ' || unicode.IsPrint(r):
			b.WriteString(s[i : i+size])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80:
			b.WriteString(`\x`)
			b.WriteString(hex2(byte(r)))
		case r <= 0xFFFF:
			b.WriteString(`\u`)
			b.WriteString(hex4(r))
		default:
			b.WriteString(`\U`)
			b.WriteString(hex4(r >> 16))
			b.WriteString(hex4(r & 0xFFFF))
		}
		i += size
	}
	return b.String()
}

// printableASCII reports whether s is all printable ASCII: nothing to escape.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

const hexDigits = "0123456789abcdef"

func hex2(c byte) string { return string([]byte{hexDigits[c>>4], hexDigits[c&15]}) }

func hex4(r rune) string {
	return string([]byte{hexDigits[r>>12&15], hexDigits[r>>8&15], hexDigits[r>>4&15], hexDigits[r&15]})
}

// safeJSON makes encoding/json's output safe for a terminal and keeps it
// the same JSON: encoding/json escapes C0 controls, U+2028 and U+2029 and
// writes U+FFFD for invalid UTF-8, but writes DEL, C1 controls and the other
// invisible characters as they are. Outside strings JSON holds only ASCII,
// so each such rune is in a string, where \uXXXX (a surrogate pair above
// U+FFFF) means the same.
func safeJSON(doc []byte) []byte {
	clean := true
	for _, c := range doc {
		if c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return doc
	}
	var b bytes.Buffer
	b.Grow(len(doc) + 16)
	for i := 0; i < len(doc); {
		r, size := utf8.DecodeRune(doc[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\ufffd`) // not written by encoding/json; kept JSON
		case r < 0x7f || (unicode.IsPrint(r) && r != 0x7f):
			b.Write(doc[i : i+size])
		case r <= 0xFFFF:
			b.WriteString(`\u` + hex4(r))
		default:
			r -= 0x10000
			b.WriteString(`\u` + hex4(0xD800+(r>>10)) + `\u` + hex4(0xDC00+(r&0x3FF)))
		}
		i += size
	}
	return b.Bytes()
}
