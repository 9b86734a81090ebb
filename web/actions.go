package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/litequeue/litequeue"
)

// The end of every POST action: the error page when the queue refused it,
// or a redirect back to the page the form was on, with a flash message.

// actionFailed answers an action the queue refused with the error page:
// 404 Not Found when the job or schedule it names does not exist, 400 Bad Request
// when the queue refuses the name given (an empty queue name, say), 409
// Conflict for anything else (the queue is closed or read-only, the store
// failed, the job is no longer in a state the action applies to).
func (s *server) actionFailed(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, litequeue.ErrScheduleNotFound), errors.Is(err, litequeue.ErrNotFound):
		s.fail(w, r, http.StatusNotFound, err)
	case errors.Is(err, litequeue.ErrInvalidJob):
		s.fail(w, r, http.StatusBadRequest, err)
	default:
		s.fail(w, r, http.StatusConflict, err)
	}
}

// finishAction ends an action the queue ran: the error page when err is
// set (see actionFailed); otherwise a log record of what was done (the
// flash message of done, with attrs) and the redirect back to the page with
// that message (see redirectDone).
func (s *server) finishAction(w http.ResponseWriter, r *http.Request, err error, back string, done url.Values, attrs ...any) {
	if err != nil {
		s.actionFailed(w, r, err)
		return
	}
	msg, _ := flashFrom(done)
	s.opts.Logger.Info("litequeue/web: "+msg, attrs...)
	redirectDone(w, r, back, done)
}

// redirectDone sends the browser back to back (a URL path below the mount
// point, which may carry a query already) after an action that succeeded,
// with 303 See Other; the query gains done, the flash message's code and
// values (see flashValues).
func redirectDone(w http.ResponseWriter, r *http.Request, back string, done url.Values) {
	sep := "?"
	if strings.Contains(back, "?") {
		sep = "&"
	}
	http.Redirect(w, r, back+sep+done.Encode(), http.StatusSeeOther)
}

// postForm is a form of one button that posts an action, as the "post"
// template (templates/forms.html) draws it: the CSRF token, hidden fields
// and the button.
type postForm struct {
	Root, CSRF string
	Path       string // the action's path below the mount point, "queues/pause"
	Fields     []formField
	Label      string // the button's text
	Class      string // the button's class, "" for none
	Title      string // the button's tooltip, "" for none
}

type formField struct{ Name, Value string }

// newPostForm is the template function "post": the form of one button that
// posts to path (below the mount point), on page p, with the pairs of key
// and value kv. The keys "label", "class" and "title" set the button's
// text, class and tooltip; every other key is a hidden field, in the order
// given. An odd number of kv, or no label, is an error, which fails the
// page's rendering.
func newPostForm(p *page, path string, kv ...string) (postForm, error) {
	if len(kv)%2 != 0 {
		return postForm{}, fmt.Errorf("post %q: keys and values do not pair up: %q", path, kv)
	}
	f := postForm{Root: p.Root, CSRF: p.CSRF, Path: path}
	for i := 0; i < len(kv); i += 2 {
		switch k, v := kv[i], kv[i+1]; k {
		case "label":
			f.Label = v
		case "class":
			f.Class = v
		case "title":
			f.Title = v
		default:
			f.Fields = append(f.Fields, formField{k, v})
		}
	}
	if f.Label == "" {
		return postForm{}, fmt.Errorf("post %q: the button has no label", path)
	}
	return f, nil
}
