package litequeue

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// fileState is a file's digest plus the names in its directory, to prove an
// Open that failed changed nothing: not the file, and no -wal, -shm or
// -journal left beside it.
type fileState struct {
	sum   [32]byte
	names []string
}

func snapshotFile(t *testing.T, path string) fileState {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return fileState{sum: sha256.Sum256(b), names: dirNames(t, filepath.Dir(path))}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// requireOpenRefused opens path read-write and read-only, requires both to
// fail with want (and a message containing each of msgs), and the file and
// its directory to be unchanged.
func requireOpenRefused(t *testing.T, path string, want error, msgs ...string) {
	t.Helper()
	before := snapshotFile(t, path)
	for _, ro := range []bool{false, true} {
		q, err := Open(path, &Options{ReadOnly: ro})
		if err == nil {
			q.Close()
			t.Fatalf("Open(ReadOnly=%v) of %s succeeded; want an error", ro, path)
		}
		if want != nil {
			require.ErrorIs(t, err, want, "ReadOnly=%v", ro)
		}
		for _, m := range msgs {
			require.Contains(t, err.Error(), m, "ReadOnly=%v", ro)
		}
		require.Contains(t, err.Error(), path, "the error names the file")
		after := snapshotFile(t, path)
		require.Equal(t, before.sum, after.sum, "Open(ReadOnly=%v) changed the file", ro)
		if ro {
			// A read-only connection to a WAL file cannot remove the
			// empty -wal and the -shm that SQLite makes beside it; removing
			// them ourselves could race a process opening the file.
			after.names = withoutEmptyWAL(t, path, after.names)
		}
		require.Equal(t, before.names, after.names, "Open(ReadOnly=%v) left files beside the file", ro)
	}
}

// withoutEmptyWAL drops path's -shm and an empty -wal from names.
func withoutEmptyWAL(t *testing.T, path string, names []string) []string {
	t.Helper()
	var out []string
	for _, n := range names {
		full := filepath.Join(filepath.Dir(path), n)
		switch full {
		case path + "-shm":
			continue
		case path + "-wal":
			st, err := os.Stat(full)
			require.NoError(t, err)
			require.Zero(t, st.Size(), "a read-only open wrote to the WAL")
			continue
		}
		out = append(out, n)
	}
	return out
}

// newQueueFile makes a valid queue file holding a few jobs, closed.
func newQueueFile(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "q.db")
	q, err := Open(path, nil)
	require.NoError(t, err)
	for i := range 50 {
		_, err := q.Enqueue(context.Background(), Resize{N: i}, nil)
		require.NoError(t, err)
	}
	require.NoError(t, q.Close())
	return path
}

func TestOpenDirectoryIsRefused(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(dir, nil)
	require.Error(t, err)
	require.Contains(t, err.Error(), "is a directory")
	require.Empty(t, dirNames(t, dir), "Open created files in the directory")
	_, err = Open(dir, &Options{ReadOnly: true})
	require.ErrorContains(t, err, "is a directory")
}

func TestOpenInMissingDirectorySaysSo(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "missing", "q.db")
	_, err := Open(path, nil)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.ErrorContains(t, err, "directory")
	require.ErrorContains(t, err, filepath.Join(dir, "missing"))
	require.Empty(t, dirNames(t, dir), "Open created something")
	_, err = Open(path, &Options{ReadOnly: true})
	require.ErrorIs(t, err, fs.ErrNotExist)
}

// An empty file is an empty SQLite database, and what a process killed
// inside its first Open leaves: Open makes it a new queue. Read-only, there
// is nothing to read, and the file stays untouched.
func TestOpenEmptyFileMakesANewQueue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	require.NoError(t, os.WriteFile(path, nil, 0o644))
	_, err := Open(path, &Options{ReadOnly: true})
	require.ErrorIs(t, err, ErrNotLitequeue)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Zero(t, st.Size(), "a read-only Open wrote to the empty file")
	q, err := Open(path, nil)
	require.NoError(t, err)
	_, err = q.Enqueue(context.Background(), SendEmail{To: "a"}, nil)
	require.NoError(t, err)
	require.NoError(t, q.Close())
	checkInvariants(t, path)
}

func TestOpenRandomBytesIsRefused(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	b := make([]byte, 64<<10)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	path := filepath.Join(t.TempDir(), "q.db")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	requireOpenRefused(t, path, ErrNotSQLite, "SQLite header")
}

func TestOpenSQLiteHeaderThenGarbageIsRefused(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	b := make([]byte, 8192)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	copy(b, "SQLite format 3\x00")
	path := filepath.Join(t.TempDir(), "q.db")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	requireOpenRefused(t, path, ErrNotSQLite)
}

func TestOpenTruncatedQueueFileIsRefused(t *testing.T) {
	path := newQueueFile(t, t.TempDir())
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Greater(t, st.Size(), int64(4096), "the queue file should span several pages")
	for _, size := range []int64{100, 4096 + 1000, st.Size() - 4096} {
		t.Run(strconv.FormatInt(size, 10)+"_bytes", func(t *testing.T) {
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			p := filepath.Join(t.TempDir(), "q.db")
			require.NoError(t, os.WriteFile(p, b[:size], 0o644))
			requireOpenRefused(t, p, ErrCorrupt)
		})
	}
}

func TestOpenOtherApplicationsFileIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users (name) VALUES ('ann')`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	requireOpenRefused(t, path, ErrNotLitequeue, "another application")
}

func TestOpenNewerSchemaIsRefused(t *testing.T) {
	path := newQueueFile(t, t.TempDir())
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE lq_meta SET value = '99' WHERE key = 'schema_version'`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	requireOpenRefused(t, path, ErrSchemaTooNew, "version 99")
}

func TestOpenReadOnlyInspectsWithoutChangingTheFile(t *testing.T) {
	path := newQueueFile(t, t.TempDir())
	before := snapshotFile(t, path)
	q, err := Open(path, &Options{ReadOnly: true})
	require.NoError(t, err)
	stats, err := q.Stats(context.Background())
	require.NoError(t, err)
	require.Len(t, stats, 1)
	require.Equal(t, 50, stats[0].Ready)
	jobs, err := q.Jobs(context.Background(), JobFilter{Limit: -1})
	require.NoError(t, err)
	require.Len(t, jobs, 50)
	_, err = q.Job(context.Background(), jobs[0].ID)
	require.NoError(t, err)
	_, err = q.Enqueue(context.Background(), Resize{}, nil)
	require.ErrorIs(t, err, ErrReadOnly)
	_, err = q.PurgeDead(context.Background(), DeadFilter{})
	require.ErrorIs(t, err, ErrReadOnly)
	require.ErrorIs(t, q.Start(context.Background()), ErrReadOnly)
	require.NoError(t, q.Close())
	after := snapshotFile(t, path)
	require.Equal(t, before.sum, after.sum, "a read-only queue changed the file")
	require.Equal(t, before.names, withoutEmptyWAL(t, path, after.names))
}

// mountTmpfs mounts a tmpfs of the given options on a new directory and
// unmounts it when the test ends. It skips the test, saying why, when the
// test cannot mount (not root, or no mount permission in a container).
func mountTmpfs(t *testing.T, opts string) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs for this test (it needs root; CI runs as root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

func remount(t *testing.T, dir, opts string) {
	t.Helper()
	out, err := exec.Command("mount", "-o", "remount,"+opts, dir).CombinedOutput()
	require.NoError(t, err, "remount %s: %s", opts, out)
}

// readOnlyDir returns a directory this process cannot write into, holding
// whatever fill puts there first. Permission bits do not stop root, so as
// root it is a tmpfs remounted read-only; otherwise a directory of mode 0555.
func readOnlyDir(t *testing.T, fill func(dir string)) string {
	t.Helper()
	if os.Geteuid() != 0 {
		dir := t.TempDir()
		fill(dir)
		require.NoError(t, os.Chmod(dir, 0o555))
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		return dir
	}
	dir := mountTmpfs(t, "size=8m")
	fill(dir)
	remount(t, dir, "ro")
	return dir
}

func TestOpenInReadOnlyDirectorySaysSo(t *testing.T) {
	dir := readOnlyDir(t, func(string) {})
	path := filepath.Join(dir, "q.db")
	_, err := Open(path, nil)
	require.Error(t, err)
	require.ErrorContains(t, err, "read-only")
	require.ErrorContains(t, err, dir)
	require.Empty(t, dirNames(t, dir))
}

func TestOpenReadOnlyFileSaysSoAndCanBeInspected(t *testing.T) {
	var path string
	dir := readOnlyDir(t, func(dir string) { path = newQueueFile(t, dir) })
	_ = dir
	before := snapshotFile(t, path)
	_, err := Open(path, nil)
	require.Error(t, err)
	require.ErrorIs(t, err, ErrReadOnly)
	require.ErrorContains(t, err, "ReadOnly")
	require.Equal(t, before, snapshotFile(t, path))

	q, err := Open(path, &Options{ReadOnly: true})
	require.NoError(t, err)
	stats, err := q.Stats(context.Background())
	require.NoError(t, err)
	require.Equal(t, 50, stats[0].Ready)
	require.NoError(t, q.Close())
	require.Equal(t, before, snapshotFile(t, path))
}

// TestListenURLIsRefusedOnSQLite: Options.ListenURL names a PostgreSQL
// listening connection; the SQLite Open and New refuse it and say so, and
// Open creates no file.
func TestListenURLIsRefusedOnSQLite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "q.db")
	opts := &Options{ListenURL: "postgres://db.internal:5432/app"}
	_, err := Open(path, opts)
	require.ErrorContains(t, err, "ListenURL is for queues on PostgreSQL")
	require.Empty(t, dirNames(t, dir), "the refused Open left a file")

	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	defer db.Close()
	_, err = New(db, opts)
	require.ErrorContains(t, err, "ListenURL is for queues on PostgreSQL")
	var n int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM sqlite_master`).Scan(&n))
	require.Zero(t, n, "the refused New created tables")
}

// TestNewWithBackendChecksItsOptions: NewWithBackend validates opts as Open
// does, and takes Options.ReadOnly only with a backend opened read-only.
func TestNewWithBackendChecksItsOptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	_, st, err := openStore(path, nil)
	require.NoError(t, err)
	_, err = NewWithBackend(st, &Options{ReadOnly: true})
	require.ErrorContains(t, err, "Options.ReadOnly needs a store opened read-only")
	_, err = NewWithBackend(st, &Options{CompletedRetention: -1})
	require.ErrorContains(t, err, "CompletedRetention is negative")
	q, err := NewWithBackend(st, nil)
	require.NoError(t, err)
	require.NoError(t, q.Close())

	_, ro, err := openStore(path, &Options{ReadOnly: true})
	require.NoError(t, err)
	q, err = NewWithBackend(ro, &Options{ReadOnly: true})
	require.NoError(t, err)
	_, err = q.Enqueue(context.Background(), SendEmail{To: "a"}, nil)
	require.ErrorIs(t, err, ErrReadOnly)
	require.NoError(t, q.Close())
}
