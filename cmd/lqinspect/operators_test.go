package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/pgtest"
	"github.com/litequeue/litequeue/postgres"
	"github.com/stretchr/testify/require"
)

// runUntil makes a queue file at t0 whose queue, with the handlers register
// adds, runs the jobs enqueue enqueues until the first event of type until,
// then stops; it returns the file's path.
func runUntil(t *testing.T, register func(q *litequeue.Queue), until litequeue.EventType, jobs ...litequeue.Job) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "queue.db")
	mock := clock.NewMock()
	mock.Set(t0)
	seen := make(chan struct{}, 1)
	q, err := litequeue.Open(path, &litequeue.Options{Clock: mock, PollInterval: -1, OnEvent: func(e litequeue.Event) {
		if e.Type == until {
			select {
			case seen <- struct{}{}:
			default:
			}
		}
	}})
	require.NoError(t, err)
	register(q)
	ctx := context.Background()
	for _, j := range jobs {
		_, err = q.Enqueue(ctx, j, nil)
		require.NoError(t, err)
	}
	require.NoError(t, q.Start(ctx))
	select {
	case <-seen:
	case <-time.After(waitLimit):
		t.Fatalf("no %s event", until)
	}
	stopCtx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	require.NoError(t, q.Stop(stopCtx))
	require.NoError(t, q.Close())
	return path
}

// withJobs enqueues jobs into the queue at addr, a file (made when missing)
// or a postgres:// URL, and closes it; it returns addr.
func withJobs(t *testing.T, addr string, jobs ...litequeue.Job) string {
	t.Helper()
	var q *litequeue.Queue
	var err error
	if isPostgresURL(addr) {
		q, err = postgres.Open(context.Background(), addr, &litequeue.Options{PollInterval: -1})
	} else {
		q, err = litequeue.Open(addr, &litequeue.Options{PollInterval: -1})
	}
	require.NoError(t, err)
	for _, j := range jobs {
		_, err := q.Enqueue(context.Background(), j, nil)
		require.NoError(t, err)
	}
	require.NoError(t, q.Close())
	return addr
}

func TestStatsQueueShowsOneQueue(t *testing.T) {
	fx := newFixture(t)
	for _, args := range [][]string{
		{"stats", "--queue", "imports", fx.path},
		{"stats", fx.path, "--queue", "imports"},
		{"--queue", "imports", "stats", fx.path},
		{"stats", "--queue=imports", fx.path},
	} {
		r := lq(t, "", args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		require.Empty(t, r.stderr)
		require.Contains(t, r.stdout, "imports ")
		require.NotContains(t, r.stdout, "default")
		require.NotContains(t, r.stdout, "media")
	}

	// A queue no job names is an error with the queue it may have meant.
	r := lq(t, "", "stats", fx.path, "--queue", "imprts")
	require.Equal(t, exitError, r.code)
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, `no queue "imprts"`)
	require.Contains(t, r.stderr, `did you mean "imports"?`)

	// A flag of other commands is not answered with a command it resembles.
	r = lq(t, "", "plan", "--queue", "x")
	require.Equal(t, exitUsage, r.code)
	require.NotContains(t, r.stderr, "did you mean the command")
	require.Contains(t, r.stderr, "--queue is a flag of other commands, not of plan")
}

func TestShowNotFoundSaysWhatIsTrue(t *testing.T) {
	fx := newFixture(t)
	// A cancelled job is kept, and show shows it.
	r := lq(t, "", "cancel", fx.path, "7")
	require.Equal(t, 0, r.code, r.stderr)
	r = lq(t, "", "show", fx.path, "7")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `state:\s+cancelled`, r.stdout)

	r = lq(t, "", "show", fx.path, "99")
	require.Equal(t, exitError, r.code)
	require.NotContains(t, r.stderr, "been cancelled")
	require.Contains(t, r.stderr, "no job with id 99")
	require.Contains(t, r.stderr, "deleted")
	require.Contains(t, r.stderr, "cancelled jobs")
}

func TestShowLongErrorWholeWhileListsCutIt(t *testing.T) {
	long := "upstream said: " + strings.Repeat("0123456789", 60) + " END\nsecond line of the body END2"
	path := runUntil(t, func(q *litequeue.Queue) {
		litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[Import]) error {
			return litequeue.Permanent(errors.New(long))
		})
	}, litequeue.EventDead, Import{File: "big.csv"})

	r := lq(t, "", "show", path, "1")
	require.Equal(t, 0, r.code, r.stderr)
	attempts := r.stdout[strings.Index(r.stdout, "failed attempts:"):]
	require.Contains(t, attempts, "upstream said: "+strings.Repeat("0123456789", 60)+" END")
	require.Contains(t, attempts, "second line of the body END2")
	require.NotContains(t, r.stdout, "…")

	// Lists keep cutting the error to one short line.
	r = lq(t, "", "dead", path)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "…")
	require.NotContains(t, r.stdout, "END")
}

// Flaky fails with an odd delay after reporting an odd fraction.
type Flaky struct{}

func (Flaky) Kind() string { return "flaky" }
func (Flaky) RetryPolicy() *litequeue.RetryPolicy {
	p := litequeue.FixedRetry(3, 17628654351*time.Nanosecond)
	return &p
}

const oddFraction = 0.05712653527563553

func TestDurationsAndPercentagesAreRounded(t *testing.T) {
	path := runUntil(t, func(q *litequeue.Queue) {
		litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[Flaky]) error {
			if err := d.SetProgress(oddFraction, "rows"); err != nil {
				return err
			}
			return errors.New("flaky")
		})
	}, litequeue.EventRetrying, Flaky{})

	r := lq(t, "", "show", path, "1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `progress:\s+5\.7% "rows"`, r.stdout)
	require.Regexp(t, `retry\s+17\.6s\s+flaky`, r.stdout)
	require.NotContains(t, r.stdout, "17.628")
	require.NotContains(t, r.stdout, "5.712")

	// --json keeps the exact values.
	var j litequeue.JobInfo
	decode(t, &j, "show", path, "1")
	require.Equal(t, oddFraction, j.Progress.Fraction)
	require.Len(t, j.Attempts, 1)
	require.Equal(t, 17628654351*time.Nanosecond, j.Attempts[0].Delay)

	r = lq(t, "", "plan", "--policy", `{"max_attempts":3,"backoff":{"kind":"fixed","delay":"17.628654351s"}}`)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "fixed backoff of 17.6s")
	require.Contains(t, r.stdout, "35.3s")
	require.NotContains(t, r.stdout, "17.628")

	for d, want := range map[time.Duration]string{
		0: "0s", 412 * time.Microsecond: "412µs", 350*time.Millisecond + 400*time.Microsecond: "350ms",
		17628654351: "17.6s", 4*time.Minute + 12*time.Second + 300*time.Millisecond: "4m12s", -1500 * time.Millisecond: "-1.5s",
	} {
		require.Equal(t, want, roundDuration(d), "%d", d)
	}
	for f, want := range map[float64]string{0: "0%", 0.0004: "<0.1%", 0.42: "42%", 0.99999: ">99.9%", 1: "100%"} {
		require.Equal(t, want, percent(f), "%g", f)
	}
}

func TestScheduleHistoryLimitHasOneMeaningAndSaysWhenMoreAreKept(t *testing.T) {
	path := scheduleFile(t)
	q, err := litequeue.Open(path, &litequeue.Options{PollInterval: -1})
	require.NoError(t, err)
	for range 25 {
		_, err := q.TriggerSchedule(context.Background(), "nightly")
		require.NoError(t, err)
	}
	require.NoError(t, q.Close())
	// nightly: registered, 26 enqueued (one trigger by scheduleFile).
	rows := func(out string) int { return len(strings.Split(strings.TrimSpace(out), "\n")) - 1 }

	r := lq(t, "", "schedules", path, "history", "nightly")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, defaultHistory, rows(r.stdout))
	require.Equal(t, "showing the newest 20 events of nightly; older ones are kept: --limit N for more, --limit 0 for all\n", r.stderr)

	r = lq(t, "", "schedules", path, "history", "nightly", "--limit", "0")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 27, rows(r.stdout))
	require.Empty(t, r.stderr)
	require.Contains(t, r.stdout, "registered")

	r = lq(t, "", "schedules", path, "history", "nightly", "--limit", "27")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 27, rows(r.stdout))
	require.Empty(t, r.stderr, "all events shown: nothing more is said to be kept")

	var events []map[string]any
	r = lq(t, "", "schedules", path, "history", "nightly", "--limit", "5", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &events))
	require.Len(t, events, 5)
	require.Contains(t, r.stderr, "showing the newest 5 events")

	// --runs sets the listing's next runs, and only that.
	r = lq(t, "", "schedules", path, "--runs", "1")
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stdout, ", ")
}

func TestScheduleRunsInTheirOwnZoneToTheSecond(t *testing.T) {
	path := schedulesFile(t, func(ctx context.Context, q *litequeue.Queue, _ *clock.Mock) {
		_, err := q.TriggerSchedule(ctx, "berlin")
		require.NoError(t, err)
	},
		litequeue.Schedule{Name: "berlin", Cron: "30 2 * * *", TimeZone: "Europe/Berlin", Job: SendEmail{To: "ops@example.com"}},
		litequeue.Schedule{Name: "every-90s", Every: 90 * time.Second, Job: Ping{}},
	)

	r := lq(t, "", "schedules", path, "--now", "2026-01-01T00:00:10Z", "--runs", "2")
	require.Equal(t, 0, r.code, r.stderr)
	var berlin, every string
	for _, line := range strings.Split(r.stdout, "\n") {
		switch {
		case strings.HasPrefix(line, "berlin"):
			berlin = line
		case strings.HasPrefix(line, "every-90s"):
			every = line
		}
	}
	// 02:30 in Berlin is 01:30 UTC in winter: shown as Berlin reads it.
	require.Contains(t, berlin, "2026-01-01T02:30:00+01:00, 2026-01-02T02:30:00+01:00 (in 1h29m)")
	require.Contains(t, berlin, "2026-01-01T01:00:00+01:00 job 1 pending", "the last run in the zone too")
	require.Contains(t, every, "2026-01-01T00:01:30Z, 2026-01-01T00:03:00Z (in 1m20s)")

	// So are the occurrences in its history.
	r = lq(t, "", "schedules", path, "history", "berlin")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `triggered\s+2026-01-01T01:00:00\+01:00\s+1`, r.stdout)

	// --json stays in UTC.
	var got []map[string]any
	decode(t, &got, "schedules", path, "--now", "2026-01-01T00:00:10Z", "--runs", "1")
	for _, s := range got {
		if s["name"] == "berlin" {
			require.Equal(t, []any{"2026-01-01T01:30:00Z"}, s["next_runs"])
		}
	}
}

// view opens the queue at addr, a file or a postgres:// URL, read-only.
func view(t *testing.T, addr string) *litequeue.Queue {
	t.Helper()
	if !isPostgresURL(addr) {
		return libraryView(t, addr)
	}
	q, err := postgres.Open(context.Background(), addr, &litequeue.Options{ReadOnly: true, PollInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, q.Close()) })
	return q
}

// pauseResumeSays checks pause and resume on the queue at addr, whose jobs
// are in queues default and media only.
func pauseResumeSays(t *testing.T, addr string) {
	t.Helper()
	r := lq(t, "", "resume", addr, "media")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "queue \"media\" was not paused; nothing changed\n", r.stdout)
	r = lq(t, "", "resume", addr, "media", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"resumed":"media","changed":false}`, r.stdout)

	// A typo pauses nothing and hints at the queue meant.
	r = lq(t, "", "pause", addr, "meida")
	require.Equal(t, exitError, r.code, r.stdout)
	require.Contains(t, r.stderr, `no queue "meida"`)
	require.Contains(t, r.stderr, `did you mean "media"?`)
	require.Contains(t, r.stderr, "--create")
	r = lq(t, "", "resume", addr, "meida")
	require.Equal(t, exitError, r.code, r.stdout)
	require.Contains(t, r.stderr, `did you mean "media"?`)
	q := view(t, addr)
	paused, err := q.PausedQueues(context.Background())
	require.NoError(t, err)
	require.Empty(t, paused, "a typo paused a queue")

	r = lq(t, "", "pause", addr, "media")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "paused queue \"media\"\n", r.stdout)
	r = lq(t, "", "pause", addr, "media")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `^queue "media" was already paused \(since .*\); nothing changed\n$`, r.stdout)

	// --create pauses a queue before its first job; resume then knows it.
	r = lq(t, "", "pause", addr, "reports", "--create")
	require.Equal(t, 0, r.code, r.stderr)
	r = lq(t, "", "resume", addr, "reports")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "resumed queue \"reports\"\n", r.stdout)
	paused, err = q.PausedQueues(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"media"}, slices.Collect(maps.Keys(paused)))
}

func TestPauseResumeSayWhatChangedAndRefuseTyposOnSQLite(t *testing.T) {
	pauseResumeSays(t, withJobs(t, filepath.Join(t.TempDir(), "queue.db"), SendEmail{To: "a"}, Resize{Image: "b"}))

	// A queue that only a schedule names is known.
	path := scheduleFile(t)
	r := lq(t, "", "pause", path, "media")
	require.Equal(t, 0, r.code, r.stderr)
}

func TestPauseResumeSayWhatChangedAndRefuseTyposOnPostgreSQL(t *testing.T) {
	u, _ := pgtest.FreshSchema(t)
	pauseResumeSays(t, withJobs(t, u, SendEmail{To: "a"}, Resize{Image: "b"}))
}

func TestRequeueAllHasADryRunAndAsksFirst(t *testing.T) {
	fx := newFixture(t)
	dead := map[int64]litequeue.State{3: litequeue.StateDead, 4: litequeue.StateDead, 5: litequeue.StateDead}

	r := lq(t, "", "requeue", fx.path, "--all", "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "would requeue 3 dead letters (dry run: nothing was changed; those whose idempotency key a live job holds would stay dead)\n", r.stdout)
	r = lq(t, "", "requeue", fx.path, "--all", "--dry-run", "--queue", "imports", "--kind", "import", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"would_requeue": 3}`, r.stdout)
	requireStates(t, fx.path, dead)

	// Without a terminal to ask on, --all needs --yes.
	r = lq(t, "", "requeue", fx.path, "--all")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "pass --yes to requeue without asking, or --dry-run")
	requireStates(t, fx.path, dead)

	terminal := func(a *app) { a.isTerminal = func(io.Reader) bool { return true } }
	r = lqApp(t, terminal, "n\n", "requeue", fx.path, "--all", "--kind", "import")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, `Requeue 3 dead letters of kind "import" in `+fx.path+"? [y/N]")
	require.Contains(t, r.stderr, "not confirmed; nothing was changed")
	requireStates(t, fx.path, dead)

	r = lqApp(t, terminal, "y\n", "requeue", fx.path, "--all")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "requeued 3 dead letters\n", r.stdout)
	requireStates(t, fx.path, map[int64]litequeue.State{3: litequeue.StateReady, 4: litequeue.StateReady, 5: litequeue.StateReady})

	// IDs are explicit: no question, and the --all flags are refused.
	r = lq(t, "", "requeue", fx.path, "3", "--dry-run")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "--dry-run and --yes go with --all")
}

func TestFiltersNamingNothingAreSaidSo(t *testing.T) {
	fx := newFixture(t)
	dead := map[int64]litequeue.State{3: litequeue.StateDead, 4: litequeue.StateDead, 5: litequeue.StateDead}
	// Changing commands refuse, change nothing and hint at the name meant.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"requeue", fx.path, "--all", "--yes", "--kind", "imprt"}, `no job of kind "imprt"; did you mean "import"? (kinds: "import", "ping", "render", "resize", "send_email", "sync"); nothing was changed`},
		{[]string{"requeue", fx.path, "--all", "--dry-run", "--kind", "imprt"}, `did you mean "import"?`},
		{[]string{"requeue", fx.path, "--all", "--yes", "--queue", "import"}, `no queue "import": no job, schedule or pause names it; did you mean "imports"?`},
		{[]string{"purge", fx.path, "--dead", "--yes", "--kind", "imprt"}, `did you mean "import"?`},
		{[]string{"purge", fx.path, "--dead", "--yes", "--queue", "nope"}, `no queue "nope"`},
	} {
		r := lq(t, "", tc.args...)
		require.Equal(t, exitError, r.code, "%v: %s", tc.args, r.stdout)
		require.Empty(t, r.stdout, "%v", tc.args)
		require.Contains(t, r.stderr, tc.want, "%v", tc.args)
		requireStates(t, fx.path, dead)
	}

	// A kind that exists with no dead letter of it is no typo: 0 is the answer.
	r := lq(t, "", "requeue", fx.path, "--all", "--yes", "--kind", "sync")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "requeued 0 dead letters\n", r.stdout)
	require.Empty(t, r.stderr)

	// Listings note it on stderr, with the hint, and list nothing (exit 0).
	r = lq(t, "", "jobs", fx.path, "--kind", "sned_email")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "no jobs\n", r.stdout)
	require.Contains(t, r.stderr, `lqinspect jobs: note: no job of kind "sned_email"; did you mean "send_email"?`)
	r = lq(t, "", "dead", fx.path, "--queue", "imprts", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "[]\n", r.stdout)
	require.Contains(t, r.stderr, `did you mean "imports"?`)
}

func TestFiltersNamingNothingOnPostgreSQL(t *testing.T) {
	u, _ := pgtest.FreshSchema(t)
	withJobs(t, u, Import{File: "a.csv"})
	r := lq(t, "", "requeue", u, "--all", "--yes", "--kind", "imprt")
	require.Equal(t, exitError, r.code, r.stdout)
	require.Contains(t, r.stderr, `no job of kind "imprt"; did you mean "import"?`)
	r = lq(t, "", "requeue", u, "--all", "--dry-run", "--queue", "imprts")
	require.Equal(t, exitError, r.code, r.stdout)
	require.Contains(t, r.stderr, `did you mean "imports"?`)
	r = lq(t, "", "requeue", u, "--all", "--dry-run", "--queue", "imports", "--kind", "import")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "would requeue 0 dead letters")
}

func TestMigrateSaysWhatItLeftAndCountsInGoodEnglish(t *testing.T) {
	path := withJobs(t, filepath.Join(t.TempDir(), "app.db"), SendEmail{To: "a"})
	require.Equal(t, 0, lq(t, "", "pause", path, "default").code)
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER); CREATE TABLE customers (id INTEGER PRIMARY KEY)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	u, _ := pgtest.FreshSchema(t)
	r := lq(t, "", "migrate", path, u)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "moved 1 job from")
	require.Contains(t, r.stdout, "0 dead letters, 0 completed, 0 cancelled, 0 attempt records; 1 paused queue, 0 schedules, ")
	require.NotContains(t, r.stdout, "1 paused queues")
	require.Contains(t, r.stdout, `left alone in `+path+`: application tables "customers", "orders" (only the queue's lq_* tables move`)

	r = lq(t, "", "migrate", path, u, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	require.Equal(t, []any{"customers", "orders"}, got["left_tables"])

	// A file of the queue's tables only says so.
	plain := scheduleFile(t)
	u2, _ := pgtest.FreshSchema(t)
	r = lq(t, "", "migrate", plain, u2)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "holds no tables besides the queue's")
}

func TestBackupKeepsTheFileMode(t *testing.T) {
	fx := newFixture(t)
	for _, mode := range []os.FileMode{0o644, 0o640} {
		require.NoError(t, os.Chmod(fx.path, mode))
		dest := filepath.Join(t.TempDir(), "copy.db")
		r := lq(t, "", "backup", fx.path, dest)
		require.Equal(t, 0, r.code, r.stderr)
		st, err := os.Stat(dest)
		require.NoError(t, err)
		require.Equal(t, mode, st.Mode().Perm())
	}
}
