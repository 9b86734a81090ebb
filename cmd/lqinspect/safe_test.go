package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/benbjohnson/clock"
	"github.com/litequeue/litequeue"
	"github.com/stretchr/testify/require"
)

// Hostile text as a queue file from elsewhere (or an old one) may hold it:
// a window-title escape, colours, carriage return + erase-line, an OSC 52
// clipboard write, a bidirectional override, C1 controls (8-bit CSI), a
// byte that is not UTF-8.
const (
	hostileName   = "q\x1b]0;pwned\x07\u202Eevil\u0085\xff"
	hostileKey    = "k\x1b]52;c;cHduZWQ=\x07\u202E\u009b31m"
	hostileError  = "boom\r\x1b[2Kall good\x1b[32m\nsecond line\u009b2J\xff\tend"
	hostileReason = "permanent\x1b[8m hidden"
)

// hostileFile is a queue file holding hostile text in every field lqinspect
// prints: job 1 a dead letter whose queue, kind, error, reason and attempt
// history are hostile; job 2 a ready job with a hostile key and payload; a
// schedule with a hostile name and history.
func hostileFile(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hostile.db")
	mock := clock.NewMock()
	mock.Set(t0)
	q, err := litequeue.Open(path, &litequeue.Options{Clock: mock, PollInterval: -1})
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, SendEmail{To: "a"}, nil)
	require.NoError(t, err)
	_, err = q.Enqueue(ctx, SendEmail{To: "b\u202Egpj.exe\u0085"}, &litequeue.EnqueueOptions{Key: hostileKey})
	require.NoError(t, err)
	_, err = q.RegisterSchedule(ctx, litequeue.Schedule{Name: "nightly", Cron: "30 2 * * *", Job: Ping{}})
	require.NoError(t, err)
	require.NoError(t, q.Close())

	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	finished := t0.Add(time.Minute).UnixNano()
	_, err = db.Exec(`UPDATE lq_jobs SET queue = ?, kind = ?, state = 3, attempt = 2, last_error = ?, dead_reason = ?,
		attempted_at = ?, finished_at = ? WHERE id = 1`, hostileName, hostileName, hostileError, hostileReason, finished, finished)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO lq_attempts (job_id, attempt, started_at, finished_at, error, decision, delay)
		VALUES (1, 1, ?, ?, ?, 'retry', 5000000000), (1, 2, ?, ?, ?, 'give_up', 0)`,
		finished-1e9, finished-5e8, hostileError+strings.Repeat(" long", 40), finished-2e8, finished, hostileError)
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE lq_schedules SET name = ?, tz = ?`, hostileName, "UTC")
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE lq_schedule_events SET schedule = ?, detail = ?`, hostileName, hostileError)
	require.NoError(t, err)
	return path
}

// requireTerminalSafe fails when out holds anything a terminal acts on or
// that hides text: it must be valid UTF-8 of printable runes, spaces and
// newlines.
func requireTerminalSafe(t *testing.T, out string, args []string) {
	t.Helper()
	require.True(t, utf8.ValidString(out), "%v: output is not valid UTF-8: %q", args, out)
	for i, r := range out {
		if r != '\n' && r != ' ' && !unicode.IsPrint(r) {
			t.Fatalf("%v: output holds %U at byte %d: %q", args, r, i, out)
		}
	}
}

func TestStoredTextIsEscapedForTheTerminal(t *testing.T) {
	path := hostileFile(t)
	for _, args := range [][]string{
		{"jobs", path}, {"dead", path}, {"show", path, "1"}, {"show", path, "2"}, {"stats", path},
		{"schedules", path}, {"schedules", path, "history", hostileName},
		{"jobs", path, "--json"}, {"dead", path, "--json"}, {"show", path, "1", "--json"}, {"show", path, "2", "--json"},
		{"stats", path, "--json"}, {"schedules", path, "--json"}, {"schedules", path, "--json", "history", hostileName},
		{"jobs", path, "--queue", hostileName},
	} {
		r := lq(t, "", args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		requireTerminalSafe(t, r.stdout, args)
		requireTerminalSafe(t, r.stderr, args)
	}

	// The escapes are visible: the reader sees what the text holds.
	r := lq(t, "", "show", path, "1")
	for _, want := range []string{`q\x1b]0;pwned\x07\u202eevil\u0085\xff`, `boom\r\x1b[2Kall good\x1b[32m`, `second line\u009b2J\xff\tend`,
		`permanent\x1b[8m hidden`} {
		require.Contains(t, r.stdout, want)
	}
	r = lq(t, "", "show", path, "2")
	require.Contains(t, r.stdout, `k\x1b]52;c;cHduZWQ=\x07\u202e\u009b31m`)
	require.Contains(t, r.stdout, `b\u202egpj.exe\u0085`)

	// JSON stays JSON and says the same (a byte that is not UTF-8 reads
	// back as U+FFFD, as encoding/json writes it).
	r = lq(t, "", "jobs", path, "--json")
	var jobs []litequeue.JobInfo
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &jobs))
	require.Len(t, jobs, 2)
	require.Equal(t, hostileKey, jobs[0].Key)
	require.Equal(t, strings.ToValidUTF8(hostileName, "\uFFFD"), jobs[1].Queue)
	require.Equal(t, strings.ToValidUTF8(hostileError, "\uFFFD"), jobs[1].LastError)
}

// Every cell of a table is one line of printable runes, so the columns
// stay aligned whatever the stored text holds.
func TestTablesStayAlignedWithHostileText(t *testing.T) {
	path := hostileFile(t)
	for _, args := range [][]string{{"jobs", path}, {"dead", path}, {"stats", path}} {
		r := lq(t, "", args...)
		require.Equal(t, 0, r.code, r.stderr)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		header := []rune(lines[0])
		var starts []int
		for i := 1; i < len(header); i++ {
			if header[i] != ' ' && header[i-1] == ' ' && i > 1 && header[i-2] == ' ' {
				starts = append(starts, i)
			}
		}
		require.NotEmpty(t, starts)
		for _, line := range lines[1:] {
			row := []rune(line)
			for _, s := range starts {
				require.Greater(t, len(row), s, "%v: row %q is shorter than the header", args, line)
				require.Equal(t, ' ', row[s-1], "%v: column at %d is misaligned in %q", args, s, line)
				require.NotEqual(t, ' ', row[s], "%v: column at %d is misaligned in %q", args, s, line)
			}
		}
	}
}

// Error messages and notes are escaped too: a path or a name given on the
// command line is printed as visible text.
func TestErrorsAreEscapedForTheTerminal(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "q\x1b]0;pwned\x07.db")
	r := lq(t, "", "stats", path)
	require.Equal(t, exitError, r.code)
	requireTerminalSafe(t, r.stderr, nil)
	require.Contains(t, r.stderr, `q\x1b]0;pwned\x07.db: no such file`)

	// The flag package's own messages quote the argument as given.
	r = lq(t, "", "stats", path, "--\x1b]0;pwned\x07")
	require.Equal(t, exitUsage, r.code)
	_, ok := terminalSafe(r.stderr, "\n\t") // the usage text is tab-indented
	require.True(t, ok, r.stderr)
	require.Contains(t, r.stderr, `flag provided but not defined: -\x1b]0;pwned\x07`)
}

// show prints every attempt's error whole, every line of it, in its column.
func TestShowPrintsAttemptErrorsWhole(t *testing.T) {
	path := hostileFile(t)
	r := lq(t, "", "show", path, "1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, strings.Repeat(" long", 40))
	_, attempts, ok := strings.Cut(r.stdout, "failed attempts:\n")
	require.True(t, ok, r.stdout)
	lines := strings.Split(strings.TrimSuffix(attempts, "\n"), "\n")
	col := strings.Index(lines[0], "ERROR")
	require.Len(t, lines, 5, "a header and two lines per attempt: %q", attempts)
	for _, line := range lines[1:] {
		require.GreaterOrEqual(t, len([]rune(line)), col)
		require.NotEqual(t, ' ', []rune(line)[col], "error lines start in the ERROR column: %q", line)
	}
	require.True(t, strings.HasPrefix(string([]rune(lines[2])[col:]), `second line\u009b2J\xff\tend`), lines[2])
}
