package litequeue

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Stored text: what a handler's error becomes before the queue writes it.
// The text is the handler's, so it may be anything a Go string holds: bytes
// that are not UTF-8, NUL bytes (which PostgreSQL refuses in text), or a
// megabyte of response body. The queue makes it safe once, where the
// attempt's outcome is decided, so both backends store the same text and
// neither refuses it.

// MaxErrorBytes is the most bytes of a failed attempt's error text that the
// queue stores, as the job's last error and in its attempt history, on
// every backend. A longer text keeps its beginning, cut at a character
// boundary, and ends with "…[truncated, N bytes]", N being the length of
// the whole text. Bytes that are not valid UTF-8, and NUL bytes, are
// stored as U+FFFD, and such a text ends with " [invalid UTF-8 or NUL
// bytes replaced by U+FFFD]". Event.Err, OnDead's cause and the handler's
// own error keep the text as it was.
const MaxErrorBytes = 8 << 10

// invalidMark ends a text in which invalid UTF-8 or NUL bytes were
// replaced.
const invalidMark = " [invalid UTF-8 or NUL bytes replaced by U+FFFD]"

// storedText returns s as the queue stores it: valid UTF-8 without NUL
// bytes — each byte that is not valid UTF-8, and each NUL, replaced by
// U+FFFD and the text marked at its end (invalidMark) — and at most limit
// bytes, a longer text cut and marked "…[truncated, N bytes]" (N: the bytes
// of s), before invalidMark. Text that needs neither comes back unchanged.
func storedText(s string, limit int) string {
	clean := !strings.ContainsRune(s, 0) && utf8.ValidString(s)
	if clean && len(s) <= limit {
		return s
	}
	body, mark := s, ""
	if !clean {
		var b strings.Builder
		b.Grow(len(s) + 8)
		for i := 0; i < len(s); {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == 0 || (r == utf8.RuneError && size <= 1) {
				b.WriteRune(utf8.RuneError)
			} else {
				b.WriteString(s[i : i+size])
			}
			i += size
		}
		body, mark = b.String(), invalidMark
	}
	trunc := ""
	if len(body)+len(mark) > limit {
		trunc = "…[truncated, " + strconv.Itoa(len(s)) + " bytes]"
		cut := max(limit-len(trunc)-len(mark), 0)
		for cut > 0 && !utf8.RuneStart(body[cut]) {
			cut--
		}
		body = body[:cut]
	}
	return body + trunc + mark
}
