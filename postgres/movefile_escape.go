package postgres

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Text that PostgreSQL's text type cannot store, escaped by MoveFile.

// escaper makes text PostgreSQL's text type can store: valid UTF-8 without
// NUL is kept as it is; in other text each NUL and each byte that is not
// UTF-8 is written as \xNN and each backslash as \\, so that two different
// values stay different. n counts the values it changed.
type escaper struct{ n int }

func (e *escaper) text(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	e.n++
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == 0:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func (e *escaper) ptr(s *string) *string {
	if s == nil {
		return nil
	}
	t := e.text(*s)
	return &t
}
