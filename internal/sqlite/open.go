// Package sqlite is litequeue's SQLite store: every SQL text the queue runs
// on a SQLite file lives in this package or in the file format's
// (internal/sqlitefile), behind internal/store.Backend. It owns opening and
// checking files, the single writer goroutine with group commit, and the
// SQL of every operation.
package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/litequeue/litequeue/internal/sqlitefile"
	"github.com/litequeue/litequeue/internal/store"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// sqliteHeader is the first 16 bytes of every SQLite 3 database file.
var sqliteHeader = []byte("SQLite format 3\x00")

// checkFile refuses, without opening it as a database (and so without changing
// it), a path that is a directory or a file that is not SQLite. A missing
// file is fine unless readOnly. An empty (0-byte) file is fine: to SQLite it
// is an empty database, and it is what a process killed inside its first
// Open leaves behind, between creating the file and writing its first page.
func checkFile(name string, readOnly bool) error {
	st, err := os.Stat(name)
	if errors.Is(err, fs.ErrNotExist) {
		if readOnly {
			return fmt.Errorf("litequeue: open %s read-only: file does not exist: %w", name, fs.ErrNotExist)
		}
		dir := filepath.Dir(name)
		if dst, err := os.Stat(dir); err != nil {
			return fmt.Errorf("litequeue: open %s: cannot create the file: directory %s: %w", name, dir, err)
		} else if !dst.IsDir() {
			return fmt.Errorf("litequeue: open %s: cannot create the file: %s is not a directory", name, dir)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("litequeue: open %s: %w", name, err)
	}
	if st.IsDir() {
		return fmt.Errorf("litequeue: open %s: is a directory, not a queue file; pass the path of a file inside it", name)
	}
	if err := checkRegular(name, name, st); err != nil {
		return err
	}
	// SQLite opens the -wal and -shm beside the file too.
	for _, suffix := range []string{"-wal", "-shm"} {
		if cst, err := os.Stat(name + suffix); err == nil {
			if err := checkRegular(name, name+suffix, cst); err != nil {
				return err
			}
		}
	}
	if st.Size() == 0 {
		return checkWritable(name, readOnly)
	}
	// O_NONBLOCK: should the path be swapped for a FIFO since the Stat, the
	// open returns instead of waiting for a writer; Fstat then refuses it.
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("litequeue: open %s: %w", name, err)
	}
	defer f.Close()
	if fst, err := f.Stat(); err != nil {
		return fmt.Errorf("litequeue: open %s: %w", name, err)
	} else if err := checkRegular(name, name, fst); err != nil {
		return err
	}
	head := make([]byte, len(sqliteHeader))
	if _, err := io.ReadFull(f, head); err != nil || !bytes.Equal(head, sqliteHeader) {
		return fmt.Errorf("litequeue: open %s: %w (its first bytes are not the SQLite header)", name, store.ErrNotSQLite)
	}
	return checkWritable(name, readOnly)
}

// checkRegular refuses a path that is not a regular file (a FIFO, a device,
// a socket) before anything opens it: open(2) of a FIFO waits for a writer
// for ever, deaf to signals, and a device is no database. A symbolic link
// to a regular file is fine (st follows it). path is name or its -wal or
// -shm.
func checkRegular(name, path string, st os.FileInfo) error {
	m := st.Mode()
	if m.IsRegular() {
		return nil
	}
	what := "not a regular file"
	switch {
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO)"
	case m&fs.ModeDevice != 0, m&fs.ModeCharDevice != 0:
		what = "a device"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	case m.IsDir():
		what = "a directory"
	}
	if path == name {
		return fmt.Errorf("litequeue: open %s: is %s, not a regular file; a queue file is one", name, what)
	}
	return fmt.Errorf("litequeue: open %s: %s is %s, not a regular file; a queue file's -wal and -shm are regular files: remove it", name, path, what)
}

// checkWritable refuses a file this process cannot write, unless readOnly:
// SQLite would silently open it read-only, and every write would fail later.
// Opening for writing writes nothing.
func checkWritable(name string, readOnly bool) error {
	if readOnly {
		return nil
	}
	w, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("litequeue: open %s: the file is not writable (%v); open it with Options.ReadOnly to inspect it: %w", name, err, store.ErrReadOnly)
	}
	return w.Close()
}

// explainOpenError makes the driver's "unable to open database file" say
// why, when the file did not exist before Open and its directory does not
// take new files.
func explainOpenError(name string, existed bool, err error) error {
	var se *sqlite.Error
	if existed || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_CANTOPEN {
		return err
	}
	dir := filepath.Dir(name)
	probe, perr := os.CreateTemp(dir, ".litequeue-probe-*")
	if perr != nil {
		return fmt.Errorf("cannot create the file: directory %s is read-only or not writable (%v): %w", dir, perr, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return err
}

// dsn builds the modernc.org/sqlite data source name for a queue file. Only
// connection-level pragmas go here: nothing that writes to the file, so a file
// can be checked before anything changes it.
func dsn(name string, o *Options, readOnly bool) string {
	v := url.Values{}
	// The driver runs _pragma values sorted by text, not in order, so a
	// user's pragma of the same name replaces the queue's own instead of
	// racing it: Options.Pragmas win.
	for _, p := range append([]string{
		fmt.Sprintf("busy_timeout(%d)", o.BusyTimeout.Milliseconds()),
		"foreign_keys(1)",
		// The schema of a file from elsewhere may call only SQLite's
		// innocuous functions from its views, triggers and indexes.
		"trusted_schema(0)",
	}, syncPragmas(runtime.GOOS, o.Synchronous)...) {
		if !slices.ContainsFunc(o.Pragmas, func(u string) bool { return pragmaName(u) == pragmaName(p) }) {
			v.Add("_pragma", p)
		}
	}
	for _, p := range o.Pragmas {
		v.Add("_pragma", p)
	}
	if readOnly {
		v.Set("mode", "ro")
	} else {
		v.Set("_txlock", "immediate")
	}
	return "file:" + (&url.URL{Path: name}).EscapedPath() + "?" + v.Encode()
}

// pragmaName returns the lower-case name of a _pragma value such as
// "synchronous(NORMAL)" or "synchronous = 1".
func pragmaName(p string) string {
	if i := strings.IndexAny(p, "(="); i >= 0 {
		p = p[:i]
	}
	return strings.ToLower(strings.TrimSpace(p))
}

// noShm reports whether a read-only open failed because SQLite could not
// create the -shm a WAL file needs (SQLITE_CANTOPEN, or SQLITE_READONLY and
// its extended codes such as SQLITE_READONLY_DIRECTORY): the directory
// takes no new files for this user.
func noShm(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	c := se.Code() & 0xff
	return c == sqlite3.SQLITE_CANTOPEN || c == sqlite3.SQLITE_READONLY
}

// readOnlyDirError explains a read-only open that failed for want of a
// -shm while a -wal exists: SQLite needs the -shm to read the -wal, and
// reading the file without its -wal would miss what the -wal holds.
func readOnlyDirError(name string, err error) error {
	return fmt.Errorf("%s-wal exists (a process has the queue open, or did not close it) and SQLite cannot create the -shm it needs to read it: this user may not write the directory %s; copy the file with its -wal into a directory you can write and inspect the copy, or run as a user who can write the directory (%w)",
		name, filepath.Dir(name), err)
}

// fileIdentity is the file a queue made by Open opened: its path and what
// the path named then (device and inode).
type fileIdentity struct {
	path string
	st   os.FileInfo
}

// newFileIdentity records what path names now.
func newFileIdentity(path string) (*fileIdentity, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	return &fileIdentity{path: path, st: st}, nil
}

// check fails with store.ErrFileReplaced when the path no longer names the file
// that was opened. A nil identity (New: the application's file) always
// passes, and so does a path that cannot be checked for another reason
// (SQLite's own write reports a real problem). One stat call.
func (f *fileIdentity) check() error {
	if f == nil {
		return nil
	}
	st, err := os.Stat(f.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s was removed or renamed; nothing of this call was written: put the file back to go on, or Close the queue and Open the path again", store.ErrFileReplaced, f.path)
	case err == nil && !os.SameFile(st, f.st):
		return fmt.Errorf("%w: %s was replaced by another file; nothing of this call was written: Close the queue and Open the path again", store.ErrFileReplaced, f.path)
	}
	return nil
}

// Options configures a SQLite store. The root package fills it from
// litequeue.Options; every field is required (no defaults here).
type Options struct {
	BusyTimeout time.Duration
	Synchronous string // FULL or NORMAL
	Pragmas     []string
	ReadOnly    bool
	Logger      *slog.Logger
}

// Open opens the queue file at name, creating it (and its schema) if it does
// not exist. It refuses, leaving the file untouched: a directory, a file that
// is not a regular file (a FIFO, a device; or such a -wal or -shm), a path
// whose directory is missing (fs.ErrNotExist) or read-only (each error says
// so), a file this process cannot write (store.ErrReadOnly), a file that is
// not SQLite (store.ErrNotSQLite), a damaged one (store.ErrCorrupt), another
// application's SQLite file (store.ErrNotLitequeue), and a file of a newer
// schema version (store.ErrSchemaTooNew), a file whose queue tables are not
// what its schema's migrations made (store.ErrNotLitequeue, naming the
// object), and, unless read-only, a file moved to PostgreSQL
// (*store.MovedError). An older schema is migrated. The file is put in WAL
// mode.
//
// An empty (0-byte) file, and a SQLite file with no tables at all, open as a
// new queue: that is what a process killed inside its first Open leaves (the
// schema is created in one transaction, so it is there whole or not at all).
func Open(name string, o Options) (*Store, error) {
	if err := checkFile(name, o.ReadOnly); err != nil {
		return nil, err
	}
	if err := checkLocalFS(name, o.ReadOnly); err != nil {
		return nil, err
	}
	ctx := context.Background()
	rdb, err := sql.Open("sqlite", dsn(name, &o, true))
	if err != nil {
		return nil, err
	}
	rdb.SetMaxOpenConns(4)
	if o.ReadOnly {
		version, foreign, err := sqlitefile.Identify(ctx, rdb)
		if err != nil && noShm(err) {
			_, werr := os.Stat(name + "-wal")
			switch {
			case errors.Is(werr, fs.ErrNotExist):
				// A WAL file with no -wal beside it (closed cleanly) in a
				// directory this user cannot write, or on read-only media:
				// no process has it open (the first to open it would make
				// a -wal), so read it as immutable, without the -shm that
				// SQLite cannot make. Nothing is written.
				rdb.Close()
				if rdb, err = sql.Open("sqlite", dsn(name, &o, true)+"&immutable=1"); err != nil {
					return nil, err
				}
				rdb.SetMaxOpenConns(4)
				version, foreign, err = sqlitefile.Identify(ctx, rdb)
			case werr == nil:
				err = readOnlyDirError(name, err)
			}
		}
		if err == nil {
			err = sqlitefile.CheckVersion(version, foreign)
		}
		if err == nil {
			err = sqlitefile.CheckShape(ctx, rdb, version, true)
		}
		if err != nil {
			rdb.Close()
			return nil, fmt.Errorf("litequeue: open %s: %w", name, err)
		}
		s := newStore(o, rdb, nil, true, nil)
		s.noMeta = version < metaVersion
		s.noProcs = version < procsVersion
		s.noFlow = version < flowVersion
		return s, nil
	}
	wdb, err := sql.Open("sqlite", dsn(name, &o, false))
	if err != nil {
		rdb.Close()
		return nil, err
	}
	wdb.SetMaxOpenConns(1)
	_, statErr := os.Stat(name)
	conn, err := wdb.Conn(ctx)
	if err != nil {
		err = explainOpenError(name, statErr == nil, sqlitefile.ClassifyOpenError(err))
	} else {
		sqlitefile.OpenStep("created")
		err = sqlitefile.Prepare(ctx, conn, true)
	}
	if err != nil {
		if conn != nil {
			conn.Close()
		}
		wdb.Close()
		rdb.Close()
		var moved *store.MovedError
		if errors.As(err, &moved) {
			moved.Path = name
			return nil, moved // its message names the file
		}
		return nil, fmt.Errorf("litequeue: open %s: %w", name, err)
	}
	id, err := newFileIdentity(name)
	if err != nil {
		conn.Close()
		wdb.Close()
		rdb.Close()
		return nil, fmt.Errorf("litequeue: open %s: %w", name, err)
	}
	s := newStore(o, rdb, wdb, true, conn)
	s.w.file.Store(id)
	return s, nil
}

// New returns a store that keeps its tables (named lq_*) in the
// application's own SQLite database db, opened with the modernc.org/sqlite
// driver ("sqlite"). It keeps one connection of db for its writer, so db must
// allow at least two open connections, and db's connections must have a busy
// timeout (New refuses busy_timeout 0 and says how to set it). New puts the
// file in WAL mode. Close does not close db.
func New(db *sql.DB, o Options) (*Store, error) {
	if db.Stats().MaxOpenConnections == 1 {
		return nil, errors.New("litequeue: New: db allows one open connection; the queue's writer holds one, so allow at least two (db.SetMaxOpenConns)")
	}
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("litequeue: New: %w", err)
	}
	// The connection is as db's DSN made it: its busy timeout is what the
	// application's connections have.
	var appBusy int64
	if err := conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&appBusy); err != nil {
		conn.Close()
		return nil, fmt.Errorf("litequeue: New: PRAGMA busy_timeout: %w", err)
	}
	if err := checkConnFS(ctx, conn); err != nil {
		conn.Close()
		return nil, err
	}
	if appBusy <= 0 {
		conn.Close()
		return nil, errors.New(`litequeue: New: db's connections have busy_timeout 0, so the application's writes would fail at once with SQLITE_BUSY whenever the queue writes; open db with a busy timeout, e.g. sql.Open("sqlite", "file:app.db?_pragma=busy_timeout(5000)")`)
	}
	for _, p := range append([]string{
		fmt.Sprintf("PRAGMA busy_timeout = %d", o.BusyTimeout.Milliseconds()),
		"PRAGMA foreign_keys = ON",
		"PRAGMA trusted_schema = OFF",
	}, pragmaStatements(syncPragmas(runtime.GOOS, o.Synchronous))...) {
		if _, err := conn.ExecContext(ctx, p); err != nil {
			conn.Close()
			return nil, fmt.Errorf("litequeue: New: %s: %w", p, err)
		}
	}
	if err := sqlitefile.Prepare(ctx, conn, false); err != nil {
		conn.Close()
		var moved *store.MovedError
		if errors.As(err, &moved) {
			moved.Path = "the database given to New"
			return nil, moved
		}
		return nil, fmt.Errorf("litequeue: New: %w", err)
	}
	return newStore(o, db, nil, false, conn), nil
}

// checkpointOnClose copies the WAL into the database file and truncates the
// WAL, so that the file alone holds everything committed. It does not wait
// for other connections: with a reader in another process the checkpoint
// copies what it can and the rest stays in the WAL, which is not an error.
func checkpointOnClose(conn *sql.Conn) error {
	ctx := context.Background()
	if _, err := conn.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
		return fmt.Errorf("litequeue: close: %w", err)
	}
	var busy, logFrames, done int
	err := conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logFrames, &done)
	if err != nil && !sqlitefile.IsBusy(err) {
		return fmt.Errorf("litequeue: close: checkpoint: %w", err)
	}
	return nil
}
