package web

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
)

// Request bodies: every body is capped at maxBodyBytes as it comes in
// (ServeHTTP), and a form is parsed only by readForm, after the request's
// credentials were checked, and only as application/x-www-form-urlencoded:
// a multipart body, which net/http would spool to temporary files, is
// refused unread.

// maxBodyBytes bounds every request body: a form of the largest page's
// selection is a few kilobytes.
const maxBodyBytes = 1 << 20

// readForm parses r's form (r.PostForm and r.Form), or answers r and
// returns false: 415 Unsupported Media Type for a body that is not
// url-encoded, 413 Content Too Large for one over its cap, 400 Bad Request
// for a body that does not parse.
func (s *server) readForm(w http.ResponseWriter, r *http.Request) bool {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/x-www-form-urlencoded" {
			s.fail(w, r, http.StatusUnsupportedMediaType, fmt.Errorf("a form must be sent as application/x-www-form-urlencoded, not %q", ct))
			return false
		}
	}
	if err := r.ParseForm(); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.fail(w, r, http.StatusRequestEntityTooLarge, fmt.Errorf("the form is too large (over %d bytes): select fewer jobs, or act on everything matching the filter", tooBig.Limit))
			return false
		}
		s.fail(w, r, http.StatusBadRequest, fmt.Errorf("the form does not parse: %w", err))
		return false
	}
	return true
}
