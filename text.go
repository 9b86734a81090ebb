package litequeue

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The text a caller hands the queue is checked here, at the API edge, once
// for both backends, so that a queue file and a PostgreSQL queue accept and
// refuse the same strings (PostgreSQL's text type holds neither NUL nor
// invalid UTF-8; SQLite holds both) and every refusal is an ErrInvalidJob
// that says what was wrong.

// validName checks a kind, queue or schedule name: 1 to MaxNameLen bytes of
// valid UTF-8, made of letters, marks, digits, punctuation, symbols and the
// ASCII space, neither blank nor beginning or ending with a space. Control
// characters (C0, DEL, C1), format characters such as the bidirectional
// overrides (U+202E) and zero-width characters, other white space (tabs, line
// breaks, U+00A0) and unassigned or private-use code points are refused: a
// name is shown in tables, logs and the dashboard, where such a character
// would hide or disguise it.
func validName(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty %s name", ErrInvalidJob, what)
	case len(s) > MaxNameLen:
		return fmt.Errorf("%w: %s name is %d bytes, longer than %d", ErrInvalidJob, what, len(s), MaxNameLen)
	}
	// The common case, printable ASCII, in one pass over the bytes.
	ascii := true
	for i := 0; i < len(s) && ascii; i++ {
		ascii = s[i] >= 0x20 && s[i] < 0x7f
	}
	if !ascii {
		if !utf8.ValidString(s) {
			return fmt.Errorf("%w: %s name %q is not valid UTF-8", ErrInvalidJob, what, s)
		}
		for i, r := range s {
			if r != ' ' && !unicode.IsPrint(r) {
				return fmt.Errorf("%w: %s name %q holds %U at byte %d; names may not hold control characters or other invisible ones (format characters such as U+202E, white space other than the space)",
					ErrInvalidJob, what, s, r, i)
			}
		}
	}
	if s[0] == ' ' || s[len(s)-1] == ' ' {
		if strings.TrimLeft(s, " ") == "" {
			return fmt.Errorf("%w: %s name %q is only spaces", ErrInvalidJob, what, s)
		}
		return fmt.Errorf("%w: %s name %q begins or ends with a space", ErrInvalidJob, what, s)
	}
	return nil
}

// validText checks a free-form string the queue stores (an idempotency key):
// at most limit bytes (0: no limit) of valid UTF-8 without NUL, the text
// both backends store unchanged. Other characters are allowed; lqinspect
// and the dashboard escape them when they show the text.
func validText(what, s string, limit int) error {
	return checkText(ErrInvalidJob, what, s, limit)
}

// checkText is validText with the refusal wrapping invalid (ErrInvalidJob,
// ErrInvalidProgress, …).
func checkText(invalid error, what, s string, limit int) error {
	switch {
	case limit > 0 && len(s) > limit:
		return fmt.Errorf("%w: %s is %d bytes, longer than %d", invalid, what, len(s), limit)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s %q is not valid UTF-8; encode binary data (hex, base64) first", invalid, what, s)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%w: %s %q holds a NUL byte, which PostgreSQL's text cannot store", invalid, what, s)
	}
	return nil
}

// storableText reports whether s is text both backends store unchanged
// (valid UTF-8 without NUL): a lookup by any other string matches nothing.
func storableText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// replacementEscape is what encoding/json writes for each byte of invalid
// UTF-8 in a string (a valid U+FFFD it writes as it is).
var replacementEscape = []byte(`\ufffd`)

// checkPayloadText refuses a payload that encoding/json changed silently: a
// string (or map key) of the job holding invalid UTF-8 is encoded with
// U+FFFD in its place, so the handler would see other text than was
// enqueued. payload is job's encoding; the job is walked only when the
// payload holds the escape encoding/json writes for such bytes.
func checkPayloadText(kind string, job any, payload []byte) error {
	if path, ok := replacedText(job, payload); ok {
		if path == "" {
			path = "the job"
		}
		return fmt.Errorf("%w: job of kind %q: %s holds invalid UTF-8, which JSON cannot carry (it would arrive as U+FFFD); use []byte for binary data",
			ErrInvalidJob, kind, path)
	}
	return nil
}

// replacedText finds a string of v that encoding/json replaced with U+FFFD
// in b, v's encoding, and returns where it is ("" for v itself). v is walked
// only when b holds the escape encoding/json writes for such bytes.
func replacedText(v any, b []byte) (string, bool) {
	if !bytes.Contains(b, replacementEscape) {
		return "", false
	}
	return invalidUTF8(reflect.ValueOf(v), "", 0)
}

var (
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// invalidUTF8 finds a string that encoding/json would encode from v and
// that is not valid UTF-8, and returns where it is ("field To", "element 3
// of field Tags"). Values that encode themselves (json.Marshaler,
// encoding.TextMarshaler) are not looked into; depth bounds the walk.
func invalidUTF8(v reflect.Value, path string, depth int) (string, bool) {
	if !v.IsValid() || depth > 64 {
		return "", false
	}
	t := v.Type()
	if t.Kind() != reflect.Interface && t.Kind() != reflect.Pointer &&
		(t.Implements(jsonMarshalerType) || t.Implements(textMarshalerType)) {
		return "", false
	}
	at := func(what string) string {
		if path == "" {
			return what
		}
		return what + " of " + path
	}
	switch v.Kind() {
	case reflect.String:
		return path, !utf8.ValidString(v.String())
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return "", false
		}
		return invalidUTF8(v.Elem(), path, depth+1)
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "", false // []byte is base64
		}
		for i := range v.Len() {
			if p, ok := invalidUTF8(v.Index(i), at(fmt.Sprintf("element %d", i)), depth+1); ok {
				return p, true
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			k := it.Key()
			if k.Kind() == reflect.String && !utf8.ValidString(k.String()) {
				return at("a map key"), true
			}
			if p, ok := invalidUTF8(it.Value(), at(fmt.Sprintf("map value %q", fmt.Sprint(k.Interface()))), depth+1); ok {
				return p, true
			}
		}
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() && !f.Anonymous {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if p, ok := invalidUTF8(v.Field(i), at("field "+f.Name), depth+1); ok {
				return p, true
			}
		}
	}
	return "", false
}

// Limits on names and keys, in bytes. A kind, queue or schedule name is
// valid UTF-8 of letters, marks, digits, punctuation, symbols and inner
// spaces: no control, format (such as U+202E) or other invisible
// character, and no space at either end. A key is valid UTF-8 without NUL.
// Anything else is refused with ErrInvalidJob.
const (
	MaxNameLen = 128 // kind and queue names
	MaxKeyLen  = 512 // idempotency keys
)
