package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/redact"
	"github.com/litequeue/litequeue/postgres"
)

// file is an open queue file and the "now" its output is relative to.
type file struct {
	q    *litequeue.Queue
	path string
	now  func() time.Time
	busy time.Duration // bounds a mutating call
	info os.FileInfo   // the file opened, to notice it being replaced
}

// replaced reports whether path now names another file than the one f
// opened (a restore or a rename over it); err when it names none.
func (f *file) replaced() (bool, error) {
	if f.info == nil {
		return false, nil // a PostgreSQL queue
	}
	st, err := os.Stat(f.path)
	if err != nil {
		return false, fmt.Errorf("%s: %w; the file was removed or renamed", f.name(), err)
	}
	return !os.SameFile(st, f.info), nil
}

// open opens the queue file at path: read-only unless mutating. It refuses a
// missing file itself, because litequeue.Open creates one when writable, and
// names what is wrong with a file that is not a queue file.
func (a *app) open(path string, fs *flagSet, mutating bool) (*file, error) {
	if isPostgresURL(path) {
		return a.openPostgres(path, fs, mutating)
	}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("%s: no such file (lqinspect does not create queue files)", path)
	case err != nil:
		return nil, err
	case st.IsDir():
		return nil, fmt.Errorf("%s: is a directory, not a queue file", path)
	case st.Mode()&os.ModeNamedPipe != 0:
		// Opening a FIFO would wait for a writer for ever.
		return nil, fmt.Errorf("%s: is a named pipe (FIFO), not a queue file", path)
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("%s: is a %s, not a queue file", path, fileType(st.Mode()))
	}
	opts := &litequeue.Options{ReadOnly: !mutating, BusyTimeout: fs.busyTimeout, PollInterval: -1}
	now, err := a.fixedNow(fs.now)
	if err != nil {
		return nil, err
	}
	if !now.IsZero() {
		mock := clock.NewMock()
		mock.Set(now)
		opts.Clock = mock
	}
	if mutating {
		// A writable Open would give a SQLite file without tables the queue
		// schema: check the file read-only first, so lqinspect never makes
		// a queue file of a file that was not one.
		ro := *opts
		ro.ReadOnly = true
		q, err := litequeue.Open(path, &ro)
		if err != nil {
			return nil, openError(path, err)
		}
		if err := q.Close(); err != nil {
			return nil, err
		}
		// Nor does it migrate a file of an older schema behind its
		// application's back.
		v, err := litequeue.InstalledVersion(path)
		if err != nil {
			return nil, openError(path, err)
		}
		if v < litequeue.SchemaVersion {
			return nil, olderSchemaError(path, v, litequeue.SchemaVersion)
		}
	}
	q, err := litequeue.Open(path, opts)
	if err != nil {
		return nil, openError(path, err)
	}
	if !mutating {
		if err := a.noteMoved(q, path); err != nil {
			q.Close()
			return nil, err
		}
	}
	f := &file{q: q, path: path, now: time.Now, busy: fs.busyTimeout, info: st}
	if !now.IsZero() {
		f.now = func() time.Time { return now }
	}
	return f, nil
}

// noteMoved says on stderr, when the file at path was moved to PostgreSQL,
// where and when: what a read command shows of it is what the move left
// behind, not the queue's jobs now.
func (a *app) noteMoved(q *litequeue.Queue, path string) error {
	m, err := q.Moved(a.ctx)
	if err != nil || m == nil {
		return err
	}
	where := fmt.Sprintf("PostgreSQL (%s, schema %q)", m.To, m.Schema)
	at := m.At.UTC().Format(time.RFC3339)
	if m.Complete {
		_, err = fmt.Fprintf(a.stderr, "lqinspect: note: %s was moved to %s at %s; its jobs run there now, and what follows is the file as the move left it\n",
			safeText(safeAddr(path)), safeText(where), at)
	} else {
		_, err = fmt.Fprintf(a.stderr, "lqinspect: note: %s was moved to %s at %s, and the move did not finish: run lqinspect migrate again with that URL; what follows is the file as the move left it\n",
			safeText(safeAddr(path)), safeText(where), at)
	}
	return err
}

// fileType names the type of a file that is not a regular one.
func fileType(m fs.FileMode) string {
	switch {
	case m&fs.ModeDevice != 0, m&fs.ModeCharDevice != 0:
		return "device"
	case m&fs.ModeSocket != 0:
		return "socket"
	}
	return "special file"
}

// isPostgresURL reports whether a FILE argument is a PostgreSQL URL.
func isPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// openPostgres opens the queue at a postgres:// URL (its lq_* tables in the
// schema of the URL's search_path parameter, default public): read-only
// (default_transaction_read_only) unless mutating. A schema without the
// queue's tables is refused, not created.
func (a *app) openPostgres(url string, fs *flagSet, mutating bool) (*file, error) {
	opts := &litequeue.Options{ReadOnly: true, PollInterval: -1}
	now, err := a.fixedNow(fs.now)
	if err != nil {
		return nil, err
	}
	if !now.IsZero() {
		mock := clock.NewMock()
		mock.Set(now)
		opts.Clock = mock
	}
	// The read-only open refuses a schema without the queue's tables, so
	// lqinspect never creates them.
	q, err := postgres.Open(a.ctx, url, opts)
	if err == nil && mutating {
		q.Close()
		// Nor does it migrate tables of an older schema.
		v, _, verr := postgres.InstalledVersion(a.ctx, url)
		switch {
		case verr != nil:
			return nil, verr
		case v < postgres.SchemaVersion:
			return nil, olderSchemaError(url, v, postgres.SchemaVersion)
		}
		opts.ReadOnly = false
		q, err = postgres.Open(a.ctx, url, opts)
	}
	if err != nil {
		return nil, err
	}
	f := &file{q: q, path: url, now: time.Now, busy: fs.busyTimeout}
	if !now.IsZero() {
		f.now = func() time.Time { return now }
	}
	return f, nil
}

// fixedNow returns the time of --now or $LQINSPECT_NOW, or zero for the
// real clock.
func (a *app) fixedNow(flagValue string) (time.Time, error) {
	s, from := flagValue, "--now"
	if s == "" {
		s, from = a.getenv(envNow), "$"+envNow
	}
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, usagef("%s %q is not an RFC 3339 time (like 2026-01-02T15:04:05Z)", from, s)
	}
	if t.Before(earliestNow) || t.After(latestNow) {
		return time.Time{}, usagef("%s %s is outside %s to %s, the times a queue stores", from, s,
			earliestNow.Format(time.RFC3339), latestNow.Format(time.RFC3339))
	}
	return t, nil
}

// earliestNow and latestNow bound --now: the times a queue stores (Unix
// nanoseconds, due times from 1970 on), between which the time from any
// stored time to now is a time.Duration.
var (
	earliestNow = time.Unix(0, 0).UTC()
	latestNow   = time.Unix(0, math.MaxInt64).UTC().Truncate(time.Second)
)

// olderSchemaError refuses to write a queue of an older schema: the write
// would migrate it, and the application that owns it, still built with the
// older litequeue, would then refuse its own queue.
func olderSchemaError(addr string, have, want int) error {
	return fmt.Errorf("%s: queue schema version %d, older than this lqinspect's %d: writing to it would migrate it, and applications built with a litequeue of schema %d would then refuse it; nothing was changed. Read commands work on it as it is; to migrate it on purpose, once every application using it runs a litequeue of schema %d, run: lqinspect upgrade %s",
		redact.URL(addr), have, want, have, want, redact.URL(addr))
}

// openError says in words which kind of file path is when Open refuses it.
func openError(path string, err error) error {
	switch {
	case errors.Is(err, litequeue.ErrNotSQLite):
		return fmt.Errorf("%s: not a SQLite database; the file was left unchanged", path)
	case errors.Is(err, litequeue.ErrNotLitequeue):
		// The library's detail names what is wrong (a view in place of a
		// queue table, a trigger on one, another application's tables).
		detail := ""
		if _, d, ok := strings.Cut(err.Error(), strings.TrimPrefix(litequeue.ErrNotLitequeue.Error(), "litequeue: ")+": "); ok {
			detail = ": " + d
		}
		return fmt.Errorf("%s: a SQLite database but not a litequeue queue file%s; the file was left unchanged", path, detail)
	case errors.Is(err, litequeue.ErrSchemaTooNew):
		return fmt.Errorf("%s: written by a newer litequeue schema than this lqinspect knows; upgrade lqinspect (the file was left unchanged): %w", path, err)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s: permission denied: %w", path, err)
	}
	return err
}

func (f *file) Close() error { return f.q.Close() }

// name is f's path or URL as messages show it: a URL's password masked.
func (f *file) name() string { return redact.URL(f.path) }

// writeCtx bounds a mutating call by the busy timeout: a file another
// process holds fails after it instead of waiting forever.
func (f *file) writeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, f.busy)
}

// lockedError explains a mutating call that ran out of time.
func (f *file) lockedError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: another process held the write lock for the whole --busy-timeout (%s); nothing was changed", f.name(), f.busy)
	}
	return err
}

// noteFilters tells on stderr when --queue or --kind (each "" for any)
// names a queue or kind nothing in the file has, with the name it may have
// meant: most likely a typo, but maybe a healthy queue with nothing in it
// today, so for a listing it is a note and the command goes on — an empty
// result is not an error (exit 0) and stdout stays the command's output.
func (a *app) noteFilters(fs *flagSet, f *file, queue, kind string) error {
	for _, check := range []func() error{
		func() error { return checkQueue(a.ctx, f.q, queue) },
		func() error { return checkKind(a.ctx, f.q, kind) },
	} {
		err := check()
		var unknown unknownNameError
		switch {
		case errors.As(err, &unknown):
			fmt.Fprintf(a.stderr, "lqinspect %s: note: %s\n", fs.Name(), safeLine(err.Error()))
		case err != nil:
			return err
		}
	}
	return nil
}

// checkFilters is noteFilters for a command that changes jobs: a queue or
// kind nothing has is an error (an unknownNameError), so that a typo is not
// answered with "requeued 0".
func checkFilters(ctx context.Context, q *litequeue.Queue, queue, kind string) error {
	if err := checkQueue(ctx, q, queue); err != nil {
		return err
	}
	return checkKind(ctx, q, kind)
}

// unknownNameError is a --queue or --kind that names nothing the queue has.
type unknownNameError struct{ msg string }

func (e unknownNameError) Error() string { return e.msg }

// checkQueue returns an unknownNameError when no job, schedule or pause
// names queue ("" is any queue).
func checkQueue(ctx context.Context, q *litequeue.Queue, queue string) error {
	if queue == "" {
		return nil
	}
	known, stats, err := queueKnown(ctx, q, queue)
	if err != nil || known {
		return err
	}
	names, err := queueNames(ctx, q, stats)
	if err != nil {
		return err
	}
	return unknownQueueError(queue, names)
}

// kindSample bounds the jobs and dead letters read for the kinds a typo of
// --kind may have meant.
const kindSample = 1000

// checkKind returns an unknownNameError when no job has kind ("" is any
// kind), with the kinds of the newest jobs, dead letters and schedules.
func checkKind(ctx context.Context, q *litequeue.Queue, kind string) error {
	if kind == "" {
		return nil
	}
	n, err := q.CountJobs(ctx, litequeue.JobQuery{Kind: kind}, 1)
	if err != nil || n > 0 {
		return err
	}
	var kinds []string
	add := func(k string) {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	page, err := q.ListJobs(ctx, litequeue.JobQuery{}, litequeue.PageRequest{Limit: kindSample})
	if err != nil {
		return err
	}
	for _, j := range page.Jobs {
		add(j.Kind)
	}
	groups, err := q.GroupDeadLetters(ctx, litequeue.JobQuery{}, litequeue.GroupLimits{Limit: kindSample})
	if err != nil {
		return err
	}
	for _, g := range groups {
		for _, k := range g.Kinds {
			add(k)
		}
	}
	schedules, err := q.Schedules(ctx)
	if err != nil {
		return err
	}
	for _, s := range schedules {
		add(s.Kind)
	}
	sort.Strings(kinds)
	msg := fmt.Sprintf("no job of kind %q", kind)
	if len(kinds) == 0 {
		return unknownNameError{msg + ": the queue holds no jobs"}
	}
	if m := suggest(kind, kinds); len(m) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", m[0])
	}
	return unknownNameError{fmt.Sprintf("%s (kinds: %s)", msg, quoteList(kinds))}
}

// unknownQueueError says that nothing the queue stores (a job, a schedule,
// a pause) names queue, which queues there are (names), and which of them
// queue may have meant.
func unknownQueueError(queue string, names []string) error {
	if len(names) == 0 {
		return unknownNameError{fmt.Sprintf("no queue %q: the queue holds no jobs, schedules or paused queues", queue)}
	}
	msg := fmt.Sprintf("no queue %q: no job, schedule or pause names it", queue)
	if m := suggest(queue, names); len(m) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", m[0])
	}
	return unknownNameError{fmt.Sprintf("%s (queues: %s)", msg, quoteList(names))}
}

// queueKnown reports whether a job (in any state), a schedule or a pause
// of q names queue; it reads at most queueSample jobs (queueHasJobs), and
// returns the per-queue counts when it read them.
func queueKnown(ctx context.Context, q *litequeue.Queue, queue string) (bool, []litequeue.QueueStats, error) {
	paused, err := q.PausedQueues(ctx)
	if err != nil {
		return false, nil, err
	}
	if _, ok := paused[queue]; ok {
		return true, nil, nil
	}
	schedules, err := q.Schedules(ctx)
	if err != nil {
		return false, nil, err
	}
	for _, s := range schedules {
		if s.Queue == queue {
			return true, nil, nil
		}
	}
	return queueHasJobs(ctx, q, queue)
}

// queueNames returns, sorted, the queues to suggest for a name q does not
// know: those of stats when read (every queue with jobs), else those with
// live jobs or among the newest finished ones (QueueSummaries, bounded);
// the paused ones and those of schedules.
func queueNames(ctx context.Context, q *litequeue.Queue, stats []litequeue.QueueStats) ([]string, error) {
	var sums []litequeue.QueueSummary
	for _, st := range stats {
		sums = append(sums, litequeue.QueueSummary{Queue: st.Queue})
	}
	if stats == nil {
		var err error
		if sums, err = q.QueueSummaries(ctx, 1); err != nil {
			return nil, err
		}
	}
	paused, err := q.PausedQueues(ctx)
	if err != nil {
		return nil, err
	}
	schedules, err := q.Schedules(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	add := func(n string) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, s := range sums {
		add(s.Queue)
	}
	for n := range paused {
		add(n)
	}
	for _, s := range schedules {
		add(s.Queue)
	}
	sort.Strings(names)
	return names, nil
}
