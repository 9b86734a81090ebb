package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/litequeue/litequeue"
)

func (a *app) show(args []string) error {
	fs := a.newFlags("show", "FILE ID", `
Print one job whole: its fields, the payload pretty-printed, every failed
attempt with its time, error, decision and chosen delay, and for a running
job its lease and when the lease expires; the last progress its handler
reported and the output it set, if any.`)
	fs.jsonFlag()
	fs.fileFlags(false)
	path, ids, err := fs.parseFileIDs(args)
	if err != nil {
		return err
	}
	if len(ids) != 1 {
		return usagef("want FILE and one job ID, got %d IDs", len(ids))
	}
	f, err := a.open(path, fs, false)
	if err != nil {
		return err
	}
	defer f.Close()
	j, err := f.q.Job(a.ctx, ids[0])
	if errors.Is(err, litequeue.ErrNotFound) {
		return fmt.Errorf("no job with id %d in %s: no job had that id, or it was deleted (a job that succeeds is deleted unless completed jobs are retained; purge deletes dead letters, retained completed and cancelled jobs)", ids[0], f.name())
	}
	if err != nil {
		return err
	}
	if fs.json {
		return writeJSON(a.stdout, j)
	}
	return showJob(a.stdout, j, f.now())
}

func showJob(w io.Writer, j litequeue.JobInfo, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	field := func(name, value string) { fmt.Fprintf(tw, "%s:\t%s\n", name, safeLine(value)) }
	field("id", strconv.FormatInt(j.ID, 10))
	field("queue", j.Queue)
	field("kind", j.Kind)
	field("state", string(j.State))
	field("attempt", strconv.Itoa(j.Attempt))
	field("priority", strconv.Itoa(j.Priority))
	field("key", orNone(j.Key))
	if j.Group != "" {
		field("group", j.Group)
	}
	if j.Wait != nil {
		field("waits", j.Wait.String())
	}
	field("created", whenTime(j.CreatedAt, now))
	field("run at", whenTime(j.RunAt, now))
	switch j.State {
	case litequeue.StateReady, litequeue.StateScheduled:
		field("due", whenTime(j.VisibleAt, now))
	case litequeue.StateRunning:
		field("lease", "held since "+whenTime(j.AttemptedAt, now))
		field("lease expires", whenTime(j.VisibleAt, now))
		if j.Process != 0 {
			field("held by", "process "+strconv.FormatInt(j.Process, 10)+` ("lqinspect processes" says whether it is alive)`)
		}
	}
	if j.State != litequeue.StateRunning {
		field("last attempt", whenTime(j.AttemptedAt, now))
	}
	switch j.State {
	case litequeue.StateCompleted:
		field("completed", whenTime(j.FinishedAt, now))
	case litequeue.StateDead:
		field("died", whenTime(j.FinishedAt, now))
		field("dead reason", orNone(j.DeadReason))
	}
	if j.LastError != "" {
		// One line per line of the error, each escaped, the later ones
		// indented to the value column.
		lines := strings.Split(j.LastError, "\n")
		for i, l := range lines {
			lines[i] = safeLine(l)
		}
		fmt.Fprintf(tw, "last error:\t%s\n", strings.Join(lines, "\n\t"))
	}
	if p := j.Progress; p != nil {
		field("progress", progressLine(*p, now))
	}
	showMeta(field, j, now)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\npayload:\n%s\n", safeText(indentJSON(j.Payload)))
	if j.Output != nil {
		fmt.Fprintf(w, "\noutput:\n%s\n", safeText(indentJSON(j.Output)))
	}
	fmt.Fprintln(w)
	if len(j.Attempts) > 0 {
		fmt.Fprintln(w, "failed attempts:")
	}
	// Each error whole: its first line in the ERROR column of the
	// attempt's row, every further line in that column of a row of its own.
	// BY, the host:pid that ran the attempt, comes last, after the error.
	rows := make([][]string, 0, len(j.Attempts))
	for _, at := range j.Attempts {
		delay := none
		if at.Decision == litequeue.DecisionRetry {
			delay = roundDuration(at.Delay)
		}
		lines := strings.Split(strings.TrimRight(at.Error, "\n"), "\n")
		rows = append(rows, []string{strconv.Itoa(at.Attempt), absTime(at.StartedAt), roundDuration(at.FinishedAt.Sub(at.StartedAt)),
			string(at.Decision), delay, orNone(lines[0]), attemptedBy(at)})
		for _, l := range lines[1:] {
			rows = append(rows, []string{"", "", "", "", "", l})
		}
	}
	return table(w, "no failed attempts", []string{"ATTEMPT", "STARTED", "RAN", "DECISION", "DELAY", "ERROR", "BY"}, rows)
}

// indentJSON pretty-prints a payload, indented by two spaces; a payload that
// is not JSON is shown as it is.
func indentJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "  ", "  "); err != nil {
		return "  " + string(raw)
	}
	return "  " + b.String()
}

// progressLine renders a progress report, its percentage rounded:
// `42% "row 420 of 1000", reported 2026-01-01T00:00:00Z (3s ago)`.
func progressLine(p litequeue.Progress, now time.Time) string {
	s := percent(p.Fraction)
	if p.Message != "" {
		s += " " + strconv.Quote(p.Message)
	}
	return s + ", reported " + whenTime(p.UpdatedAt, now)
}

// attemptedBy names the process that ran an attempt: host:pid, or none
// when the record has none.
func attemptedBy(at litequeue.AttemptRecord) string {
	if at.Host == "" && at.PID == 0 {
		return none
	}
	return at.Host + ":" + strconv.Itoa(at.PID)
}
