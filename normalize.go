package litequeue

import "strings"

// maxGroupKeyLen bounds a normalised message.
const maxGroupKeyLen = 200

// maxNormalizeInput bounds the work of NormalizeError: the bytes of a
// message it reads. It is at most DeadMessagePrefix (characters, so at
// least as many bytes), so the prefix the grouping reads gives the key of
// the whole message.
const maxNormalizeInput = 1024

// NormalizeError reduces an error message to the shape that groups dead
// letters: its first line, from its first 1,024 bytes (so that its cost
// does not grow with the message), with quoted strings replaced by "…",
// UUIDs by <uuid>, hexadecimal words with a digit and numbers (also inside
// words such as 3s or 10ms) by <n>, runs of white space by one space, cut
// to 200 bytes. "job 42: timeout after 3s" and "job 7: timeout after 5s"
// give the same key. An empty message gives "(no error message)".
//
// It is one pass over the line for the quotes, UUIDs and hexadecimal words,
// and one for the numbers and white space, in linear time.
func NormalizeError(msg string) string {
	msg = cutAtRune(msg, maxNormalizeInput)
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	msg = strings.TrimSpace(numbersAndSpaces(quotesAndWords(msg)))
	if len(msg) > maxGroupKeyLen {
		msg = cutAtRune(msg, maxGroupKeyLen) + "…"
	}
	if msg == "" {
		return "(no error message)"
	}
	return msg
}

// quotesAndWords replaces, from left to right, a quoted string ("…" or
// '…', up to the next quote of its kind) by "…", a UUID (a word boundary,
// 8-4-4-4-12 hexadecimal digits, a word boundary) by <uuid>, and a word
// (a run of ASCII letters, digits and underscores) of hexadecimal digits
// with at least one decimal digit, with or without a 0x prefix, by <n>.
func quotesAndWords(s string) []byte {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\'':
			if j := strings.IndexByte(s[i+1:], c); j >= 0 {
				out = append(out, `"…"`...)
				i += j + 2
				continue
			}
			out = append(out, c)
			i++
		case isWordByte(c) && (i == 0 || !isWordByte(s[i-1])):
			if isUUIDAt(s, i) {
				out = append(out, "<uuid>"...)
				i += 36
				continue
			}
			j := i + 1
			for j < len(s) && isWordByte(s[j]) {
				j++
			}
			if isHexNumber(s[i:j]) {
				out = append(out, "<n>"...)
			} else {
				out = append(out, s[i:j]...)
			}
			i = j
		default:
			out = append(out, c)
			i++
		}
	}
	return out
}

// numbersAndSpaces replaces in b each run of decimal digits, with a
// decimal fraction after it if one follows, by <n>, and each run of ASCII
// white space (tab, newline, form feed, carriage return, space) by one
// space.
func numbersAndSpaces(b []byte) string {
	var out strings.Builder
	out.Grow(len(b))
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case isDigit(c):
			j := digitsFrom(b, i)
			if j+1 < len(b) && b[j] == '.' && isDigit(b[j+1]) {
				j = digitsFrom(b, j+1)
			}
			out.WriteString("<n>")
			i = j
		case isSpaceByte(c):
			for i < len(b) && isSpaceByte(b[i]) {
				i++
			}
			out.WriteByte(' ')
		default:
			out.WriteByte(c)
			i++
		}
	}
	return out.String()
}

// digitsFrom returns the end of the run of decimal digits at b[i].
func digitsFrom(b []byte, i int) int {
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	return i
}

// isUUIDAt reports whether a UUID, ending at a word boundary, starts at
// s[i].
func isUUIDAt(s string, i int) bool {
	if len(s)-i < 36 || (len(s)-i > 36 && isWordByte(s[i+36])) {
		return false
	}
	for k := range 36 {
		c := s[i+k]
		if k == 8 || k == 13 || k == 18 || k == 23 {
			if c != '-' {
				return false
			}
		} else if !isHexByte(c) {
			return false
		}
	}
	return true
}

// isHexNumber reports whether the word w is hexadecimal digits with at
// least one decimal digit, with or without a 0x (or 0X) prefix.
func isHexNumber(w string) bool {
	hexWithDigit := func(s string) bool {
		digit := false
		for i := 0; i < len(s); i++ {
			if !isHexByte(s[i]) {
				return false
			}
			digit = digit || isDigit(s[i])
		}
		return digit
	}
	if len(w) > 2 && w[0] == '0' && (w[1] == 'x' || w[1] == 'X') && hexWithDigit(w[2:]) {
		return true
	}
	return hexWithDigit(w)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isHexByte(c byte) bool {
	return isDigit(c) || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

// isWordByte reports whether c is an ASCII letter, digit or underscore.
func isWordByte(c byte) bool {
	return isDigit(c) || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || c == '_'
}

func isSpaceByte(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}

// cutAtRune returns s cut to at most n bytes, at the start of a rune.
func cutAtRune(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
