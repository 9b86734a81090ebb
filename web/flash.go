package web

import (
	"fmt"
	"net/url"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Flash messages: after an action the redirect's query names what was done
// by a code of a fixed set ("done"), with the job, count and name it is
// about ("job", "n", "name"); the page shows that code's sentence. A link
// cannot make the dashboard say anything else: an unknown code, or a value
// that is not of its kind, shows nothing.

// A flash is one "done" code's sentence and the values it takes.
type flash struct {
	format string // a fmt format of the values below, in order
	job    bool   // takes "job", a positive job id
	link   bool   // links the job after the sentence
	n      bool   // takes "n", a count
	name   bool   // takes "name", shown quoted
}

var flashes = map[string]flash{
	"job-requeued":       {format: "Job %d requeued.", job: true},
	"job-cancelled":      {format: "Job %d cancelled.", job: true},
	"job-run-now":        {format: "Job %d is due now: a worker of its queue starts it as soon as one is free.", job: true},
	"job-retried":        {format: "Job %d requeued: it is ready to run again, from its first attempt.", job: true},
	"job-deleted":        {format: "Job %d deleted.", job: true},
	"workflow-cancelled": {format: "Workflow of job %d: %d jobs cancelled.", job: true, n: true},
	"bulk-requeue":       {format: "Requeue: %d jobs.", n: true},
	"bulk-cancel":        {format: "Cancel: %d jobs.", n: true},
	"bulk-delete":        {format: "Delete: %d jobs.", n: true},
	"group-requeued":     {format: "Requeued %d dead letters.", n: true},
	"group-deleted":      {format: "Deleted %d dead letters, with their history.", n: true},
	"queue-paused":       {format: "Queue %q paused: no process starts its jobs until it is resumed; handlers already running finish, and new jobs wait.", name: true},
	"queue-resumed":      {format: "Queue %q resumed: its jobs run again.", name: true},
	"limits-set":         {format: "Limits of queue %q stored: every process honours them from its next claim.", name: true},
	"schedule-paused":    {format: "Schedule %q paused: it enqueues nothing until resumed (the runs that pass meanwhile are not made up).", name: true},
	"schedule-resumed":   {format: "Schedule %q resumed from its next run.", name: true},
	"schedule-triggered": {format: "Schedule %[2]q triggered: enqueued job %[1]d.", job: true, link: true, name: true},
	"schedule-removed":   {format: "Schedule %q removed, with its history; the jobs it enqueued stay.", name: true},
}

// maxFlashName bounds the name a flash message quotes.
const maxFlashName = 200

// flashValues is the query that makes code's message about job, n and
// name (each used only when code takes it).
func flashValues(code string, job int64, n int, name string) url.Values {
	f, ok := flashes[code]
	if !ok {
		panic("web: unknown flash code " + code)
	}
	v := url.Values{"done": {code}}
	if f.job {
		v.Set("job", strconv.FormatInt(job, 10))
	}
	if f.n {
		v.Set("n", strconv.Itoa(n))
	}
	if f.name {
		v.Set("name", name)
	}
	return v
}

// flashFrom returns the message of the query v and the job to link after
// it (0: none), or "" when v has no valid flash.
func flashFrom(v url.Values) (string, int64) {
	f, ok := flashes[v.Get("done")]
	if !ok {
		return "", 0
	}
	var args []any
	var job int64
	if f.job {
		id, err := strconv.ParseInt(v.Get("job"), 10, 64)
		if err != nil || id <= 0 {
			return "", 0
		}
		if f.link {
			job = id
		}
		args = append(args, id)
	}
	if f.n {
		n, err := strconv.Atoi(v.Get("n"))
		if err != nil || n < 0 {
			return "", 0
		}
		args = append(args, n)
	}
	if f.name {
		name := v.Get("name")
		if !plainName(name) {
			return "", 0
		}
		args = append(args, name)
	}
	return fmt.Sprintf(f.format, args...), job
}

// plainName reports whether a name may be quoted in a flash message: valid
// UTF-8 of at most maxFlashName bytes without control or format
// characters (which could reorder or hide the sentence around it).
func plainName(s string) bool {
	if len(s) > maxFlashName || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}
