package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/litequeue/litequeue"
)

// Flow control on the queue page: the queue's limits with a form to change
// them, what they count now, and a page of its groups (busy and stuck ones
// shown by their counts and the job heading each).

// groupsPerPage is how many groups the queue page shows at once.
const groupsPerPage = 20

// flowData is the flow-control part of a queue's page.
type flowData struct {
	Limits  litequeue.QueueLimits
	Limited bool // any limit is set
	Usage   litequeue.LimitsUsage
	Groups  litequeue.GroupsPage
	After   string     // the page of groups shown starts after this name
	Next    url.Values // the query of the next page of groups; nil on the last
	// Form holds the limits as the form shows them: "" for no limit.
	Form map[string]string
}

// flowOf reads queue's limits, their usage and the page of groups after
// after.
func (s *server) flowOf(ctx context.Context, queue, after string) (flowData, error) {
	ls, err := s.q.Limits(ctx)
	if err != nil {
		return flowData{}, err
	}
	l, ok := ls[queue]
	f := flowData{Limits: l, Limited: ok, After: after}
	if f.Usage, err = s.q.LimitsUsage(ctx, queue); err != nil {
		return flowData{}, err
	}
	if f.Groups, err = s.q.Groups(ctx, queue, litequeue.GroupsOptions{After: after, Limit: groupsPerPage}); err != nil {
		return flowData{}, err
	}
	if f.Groups.Next != "" {
		f.Next = url.Values{"name": {queue}, "after": {f.Groups.Next}}
	}
	num := func(n int) string {
		if n == 0 {
			return ""
		}
		return strconv.Itoa(n)
	}
	per := func(r litequeue.Rate) string {
		if r.N == 0 {
			return ""
		}
		return r.Per.String()
	}
	f.Form = map[string]string{"concurrency": num(l.Concurrency), "key_concurrency": num(l.KeyConcurrency),
		"rate_n": num(l.Rate.N), "rate_per": per(l.Rate), "key_rate_n": num(l.KeyRate.N), "key_rate_per": per(l.KeyRate)}
	return f, nil
}

// errBadLimit is a limit field of the form that is no number or duration.
var errBadLimit = errors.New("invalid limit")

// limitsFromForm reads the limits the form posted: an empty field is no
// limit, a rate's period is a Go duration ("1s", "1m30s").
func limitsFromForm(r *http.Request) (litequeue.QueueLimits, error) {
	num := func(name string) (int, error) {
		v := strings.TrimSpace(r.PostFormValue(name))
		if v == "" {
			return 0, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, fmt.Errorf("%w: %s %q is not a whole number; leave it empty for no limit", errBadLimit, name, v)
		}
		return n, nil
	}
	dur := func(name string) (time.Duration, error) {
		v := strings.TrimSpace(r.PostFormValue(name))
		if v == "" {
			return 0, nil
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return 0, fmt.Errorf("%w: %s %q is not a duration like 1s or 1m30s", errBadLimit, name, v)
		}
		return d, nil
	}
	var l litequeue.QueueLimits
	var errs []error
	collect := func(err error) { errs = append(errs, err) }
	var err error
	l.Concurrency, err = num("concurrency")
	collect(err)
	l.KeyConcurrency, err = num("key_concurrency")
	collect(err)
	l.Rate.N, err = num("rate_n")
	collect(err)
	l.Rate.Per, err = dur("rate_per")
	collect(err)
	l.KeyRate.N, err = num("key_rate_n")
	collect(err)
	l.KeyRate.Per, err = dur("key_rate_per")
	collect(err)
	l.Ordered = r.PostFormValue("ordered") != ""
	return l, errors.Join(errs...)
}

// setLimits stores the limits the form posted for its "queue", then goes
// back to the queue's page. Invalid limits are 400 Bad Request, with
// nothing written.
func (s *server) setLimits(w http.ResponseWriter, r *http.Request) {
	name := r.PostFormValue("queue")
	l, err := limitsFromForm(r)
	if err == nil {
		err = s.q.SetLimits(r.Context(), name, l)
	}
	if errors.Is(err, errBadLimit) || errors.Is(err, litequeue.ErrInvalidLimits) {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	back := rootOf(r) + "/queue?" + url.Values{"name": {name}}.Encode()
	s.finishAction(w, r, err, back, flashValues("limits-set", 0, 0, name), "queue", name)
}
