// Package redact hides the password of a database address before it is
// printed, logged or stored: the one place every command and error that
// shows a PostgreSQL URL goes through.
package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// Mask is what a password is replaced with.
const Mask = "xxxxx"

// URL returns addr with its password replaced by Mask: the password of a
// URL's user information (postgres://user:secret@host/db), a password
// query parameter (?password=secret), and the password of a key/value
// connection string (host=db password=secret, quoted or not: a string that
// begins with keyword=). Anything else is returned unchanged, so a file
// path stays as it is. A URL that does
// not parse is returned as "(an unparsable URL, hidden)": it may hold a
// password in a form this cannot find.
func URL(addr string) string {
	if !strings.Contains(addr, "://") {
		if !keyValue.MatchString(addr) {
			return addr
		}
		return keyValuePassword.ReplaceAllString(addr, "${1}"+Mask)
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "(an unparsable URL, hidden)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), Mask)
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", Mask)
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// keyValue matches the start of a key/value connection string.
var keyValue = regexp.MustCompile(`^\s*[A-Za-z_]+\s*=`)

// keyValuePassword matches the value of password= in a key/value
// connection string: a quoted value (with \' and \\ escapes) or a word.
var keyValuePassword = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s]*)`)
