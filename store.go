package litequeue

import (
	"bytes"
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// SchemaVersion is the version of the queue file format this build writes.
// Open migrates older files up to it and refuses newer ones with
// ErrSchemaTooNew.
const SchemaVersion = 3

// formatName is stored in lq_meta to tell a litequeue file from another
// application's SQLite file.
const formatName = "litequeue"

//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	sql     string
}

// migrations returns the embedded migrations in version order. File names
// start with the zero-padded version number: 0001_init.sql.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("litequeue: bad migration file name %q", e.Name())
		}
		b, err := migrationFS.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// execer is what the store's statements run on: a dedicated connection inside
// a transaction, or the application's *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// sqliteHeader is the first 16 bytes of every SQLite 3 database file.
var sqliteHeader = []byte("SQLite format 3\x00")

// openHook, when set (only by tests), is called at each step of preparing a
// queue file, so a test can kill the process at that step. It is nil in
// production and costs one comparison per step of Open.
var openHook func(step string)

// openStep calls openHook at a named step of Open.
func openStep(step string) {
	if openHook != nil {
		openHook(step)
	}
}

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
	if st.Size() == 0 {
		return checkWritable(name, readOnly)
	}
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("litequeue: open %s: %w", name, err)
	}
	defer f.Close()
	head := make([]byte, len(sqliteHeader))
	if _, err := io.ReadFull(f, head); err != nil || !bytes.Equal(head, sqliteHeader) {
		return fmt.Errorf("litequeue: open %s: %w (its first bytes are not the SQLite header)", name, ErrNotSQLite)
	}
	return checkWritable(name, readOnly)
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
		return fmt.Errorf("litequeue: open %s: the file is not writable (%v); open it with Options.ReadOnly to inspect it: %w", name, err, ErrReadOnly)
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
	for _, p := range []string{
		fmt.Sprintf("busy_timeout(%d)", o.BusyTimeout.Milliseconds()),
		"foreign_keys(1)",
		"synchronous(" + o.Durability.synchronous() + ")",
	} {
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

// identify tells whether db holds a litequeue schema, and its version.
// version is 0 for a database with no litequeue tables; foreign reports
// whether the database holds other tables.
func identify(ctx context.Context, db execer) (version int, foreign bool, err error) {
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_schema WHERE type = 'table'`)
	if err != nil {
		return 0, false, classifyOpenError(err)
	}
	hasMeta := false
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return 0, false, err
		}
		switch {
		case name == "lq_meta":
			hasMeta = true
		case strings.HasPrefix(name, "lq_"), strings.HasPrefix(name, "sqlite_"):
		default:
			foreign = true
		}
	}
	if err := rows.Close(); err != nil {
		return 0, false, classifyOpenError(err)
	}
	if !hasMeta {
		return 0, foreign, nil
	}
	var format, ver string
	err = db.QueryRowContext(ctx, `SELECT
		(SELECT value FROM lq_meta WHERE key = 'format'),
		(SELECT value FROM lq_meta WHERE key = 'schema_version')`).Scan(&format, &ver)
	if err != nil || format != formatName {
		return 0, foreign, fmt.Errorf("%w: its lq_meta table does not name the litequeue format", ErrNotLitequeue)
	}
	version, err = strconv.Atoi(ver)
	if err != nil || version < 1 {
		return 0, foreign, fmt.Errorf("%w: unreadable schema version %q", ErrNotLitequeue, ver)
	}
	return version, foreign, nil
}

// onReadOnlyMedia reports whether a read-only open of name failed because
// SQLite could not create the -shm of a WAL file, and no -wal exists: the
// directory takes no new files, so no writer can have the file open.
func onReadOnlyMedia(name string, err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_CANTOPEN {
		return false
	}
	_, werr := os.Stat(name + "-wal")
	return errors.Is(werr, fs.ErrNotExist)
}

// classifyOpenError turns the driver's "not a database" into ErrNotSQLite
// and "malformed" into ErrCorrupt.
func classifyOpenError(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_NOTADB:
			return fmt.Errorf("%w (%v)", ErrNotSQLite, err)
		case sqlite3.SQLITE_CORRUPT:
			return fmt.Errorf("%w (%v)", ErrCorrupt, err)
		}
	}
	return err
}

// migrate brings the schema from version `from` up to SchemaVersion in one
// IMMEDIATE transaction on conn.
func migrate(ctx context.Context, conn *sql.Conn, from int) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	return runTx(ctx, ctx, conn, func(tx execer) error {
		// Re-check inside the write lock: another process may have migrated.
		cur, _, err := identify(ctx, tx)
		if err != nil {
			return err
		}
		if cur > SchemaVersion {
			return fmt.Errorf("%w: file has version %d, this build knows up to %d", ErrSchemaTooNew, cur, SchemaVersion)
		}
		for _, m := range ms {
			if m.version <= cur {
				continue
			}
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return fmt.Errorf("litequeue: migration %d: %w", m.version, err)
			}
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO lq_meta (key, value) VALUES ('format', ?), ('schema_version', ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, formatName, strconv.Itoa(SchemaVersion))
		openStep("schema-written")
		return err
	})
}

// runTx runs fn inside BEGIN IMMEDIATE … COMMIT on conn, rolling back when fn
// or the commit fails. BEGIN is retried while the database stays busy beyond
// the busy timeout, until wait ends; ctx is for the statements.
func runTx(wait, ctx context.Context, conn execer, fn func(tx execer) error) error {
	if err := beginImmediate(wait, conn); err != nil {
		return err
	}
	if err := fn(conn); err != nil {
		rollback(conn)
		return err
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		rollback(conn)
		return err
	}
	return nil
}

func beginImmediate(ctx context.Context, conn execer) error {
	for {
		_, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE")
		if err == nil {
			return nil
		}
		// Still locked after a whole busy timeout (the driver's busy handler
		// already slept), or interrupted by ctx while waiting: keep waiting
		// while the caller's context allows.
		if ctx.Err() != nil {
			return fmt.Errorf("litequeue: database stayed locked by another connection: %w (%v)", context.Cause(ctx), err)
		}
		if !isBusy(err) {
			return err
		}
	}
}

func rollback(conn execer) {
	// A failed COMMIT may already have rolled back; the error is expected then.
	_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
}

// classifyWriteError marks SQLite's "database or disk is full" as
// ErrStorageFull, its I/O errors as ErrStorageIO and "the database file has
// moved" as ErrFileReplaced.
func classifyWriteError(err error) error {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch {
	case se.Code()&0xff == sqlite3.SQLITE_FULL:
		return fmt.Errorf("%w: %w", ErrStorageFull, err)
	case se.Code() == sqlite3.SQLITE_READONLY_DBMOVED:
		return fmt.Errorf("%w: %w", ErrFileReplaced, err)
	case se.Code()&0xff == sqlite3.SQLITE_IOERR:
		return fmt.Errorf("%w: %w", ErrStorageIO, err)
	}
	return err
}

// Storage faults a write can meet besides a full disk (ErrStorageFull).
var (
	// ErrStorageIO: the operating system reported an I/O error while the
	// queue wrote or synced its file (a failing disk, a lost network
	// mount). The call's transaction was rolled back: nothing of it was
	// written, and what was committed before is kept. Retry once the
	// device works again; the queue needs no reopen.
	ErrStorageIO = errors.New("litequeue: I/O error on the queue file")
	// ErrFileReplaced: the queue file was removed, renamed or replaced by
	// another file while a queue made by Open had it open. The queue then
	// writes nothing, so no job goes into a file that no one can open
	// again: every write fails with this error. Put the file back under its
	// name to go on, or Close the queue and Open the path again.
	ErrFileReplaced = errors.New("litequeue: the queue file was removed or replaced while open")
)

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

// check fails with ErrFileReplaced when the path no longer names the file
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
		return fmt.Errorf("%w: %s was removed or renamed; nothing of this call was written: put the file back to go on, or Close the queue and Open the path again", ErrFileReplaced, f.path)
	case err == nil && !os.SameFile(st, f.st):
		return fmt.Errorf("%w: %s was replaced by another file; nothing of this call was written: Close the queue and Open the path again", ErrFileReplaced, f.path)
	}
	return nil
}

// isBusy reports SQLITE_BUSY and SQLITE_LOCKED (and their extended codes).
func isBusy(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		c := se.Code() & 0xff
		return c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED
	}
	return false
}

// writeOp is one unit of work for the writer. It runs inside the writer's
// transaction, under its own savepoint when it shares the transaction with
// others, so its failure rolls back only its own changes.
type writeOp struct {
	ctx  context.Context
	fn   func(ctx context.Context, tx execer) error
	done chan error
	noTx bool // run on the connection outside any transaction (reads)
	// after, when set, runs on the writer once fn's changes committed,
	// before later transactions: claims hand their jobs to the workers in
	// commit order this way.
	after func()
}

// completion is a finished job whose success is written in the next batch.
type completion struct {
	id     int64
	lease  int64
	queue  string
	kind   string
	at     int64           // when the handler returned
	notify func(err error) // nil: committed; ErrLeaseLost: stale; else the commit failed
}

// writer is the single writer of a queue: one goroutine owning one
// connection that commits whatever is waiting — enqueues, claims, failures,
// lease extensions and batched completions — in one transaction (group
// commit), so concurrent writers share an fsync instead of each paying one.
type writer struct {
	conn *sql.Conn
	ops  chan *writeOp

	mu          sync.Mutex
	completions []completion
	completeFn  func(ctx context.Context, tx execer, cs []completion) ([]error, error)
	kick        chan struct{}

	stmtMu sync.Mutex
	stmts  map[string]*sql.Stmt

	// file is the queue file's identity, checked before every commit; nil
	// for New.
	file atomic.Pointer[fileIdentity]

	quit chan struct{}
	done chan struct{}
}

// maxGroup bounds how many operations share one transaction.
const maxGroup = 512

func newWriter(conn *sql.Conn, completeFn func(ctx context.Context, tx execer, cs []completion) ([]error, error)) *writer {
	w := &writer{
		conn:       conn,
		stmts:      map[string]*sql.Stmt{},
		ops:        make(chan *writeOp, maxGroup),
		completeFn: completeFn,
		kick:       make(chan struct{}, 1),
		quit:       make(chan struct{}),
		done:       make(chan struct{}),
	}
	go w.loop()
	return w
}

// stmt returns query prepared once on the writer's connection. Only ops
// running in the writer call it.
func (w *writer) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	w.stmtMu.Lock()
	defer w.stmtMu.Unlock()
	if s, ok := w.stmts[query]; ok {
		return s, nil
	}
	s, err := w.conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	w.stmts[query] = s
	return s, nil
}

// maxCachedStmts bounds the writer's prepared statements. The queue's own
// statements are constant text and far fewer; a query beyond the bound runs
// unprepared.
const maxCachedStmts = 64

// cached runs statements on the writer's connection through statements
// prepared once, so SQLite parses each of the queue's queries once per
// connection instead of once per call. Every op and every BEGIN, SAVEPOINT
// and COMMIT of the writer runs through it.
type cached struct{ w *writer }

func (c cached) prepared(ctx context.Context, query string) (*sql.Stmt, error) {
	c.w.stmtMu.Lock()
	s, ok := c.w.stmts[query]
	full := len(c.w.stmts) >= maxCachedStmts
	c.w.stmtMu.Unlock()
	if ok {
		return s, nil
	}
	if full {
		return nil, nil
	}
	return c.w.stmt(ctx, query)
}

func (c cached) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	s, err := c.prepared(ctx, query)
	if err != nil || s == nil {
		return c.w.conn.ExecContext(ctx, query, args...)
	}
	return s.ExecContext(ctx, args...)
}

func (c cached) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	s, err := c.prepared(ctx, query)
	if err != nil || s == nil {
		return c.w.conn.QueryContext(ctx, query, args...)
	}
	return s.QueryContext(ctx, args...)
}

func (c cached) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	s, err := c.prepared(ctx, query)
	if err != nil || s == nil {
		return c.w.conn.QueryRowContext(ctx, query, args...)
	}
	return s.QueryRowContext(ctx, args...)
}

// do runs fn in the writer and waits for its transaction to commit. The
// returned error is fn's, or the commit's.
func (w *writer) do(ctx context.Context, fn func(ctx context.Context, tx execer) error) error {
	return w.submit(&writeOp{ctx: ctx, fn: fn, done: make(chan error, 1)})
}

// doAfter is do, and runs after on the writer once fn's changes committed
// (see writeOp.after). after must not wait for the writer.
func (w *writer) doAfter(ctx context.Context, fn func(ctx context.Context, tx execer) error, after func()) error {
	return w.submit(&writeOp{ctx: ctx, fn: fn, done: make(chan error, 1), after: after})
}

// read runs fn on the writer's connection outside any transaction, between
// two commits. The poller reads PRAGMA data_version this way: on the
// writer's connection it changes only for other connections' commits.
func (w *writer) read(ctx context.Context, fn func(ctx context.Context, tx execer) error) error {
	return w.submit(&writeOp{ctx: ctx, fn: fn, done: make(chan error, 1), noTx: true})
}

func (w *writer) submit(op *writeOp) error {
	ctx := op.ctx
	select {
	case w.ops <- op:
	case <-w.quit:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-op.done:
		return err
	case <-w.done:
		// The writer stopped; it answers every op it took before stopping.
		select {
		case err := <-op.done:
			return err
		default:
			return ErrClosed
		}
	}
}

// complete queues a success for the next batch without waiting.
func (w *writer) complete(c completion) {
	w.mu.Lock()
	w.completions = append(w.completions, c)
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// pendingCompletions reports how many successes wait to be written.
func (w *writer) pendingCompletions() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.completions)
}

// close writes everything already queued, then stops the writer.
func (w *writer) close() {
	select {
	case <-w.quit:
	default:
		close(w.quit)
	}
	<-w.done
	w.stmtMu.Lock()
	for _, s := range w.stmts {
		s.Close()
	}
	w.stmts = nil
	w.stmtMu.Unlock()
}

func (w *writer) loop() {
	defer close(w.done)
	batch := make([]*writeOp, 0, maxGroup)
	for {
		batch = batch[:0]
		select {
		case op := <-w.ops:
			batch = append(batch, op)
		case <-w.kick:
		case <-w.quit:
			// Drain what is left, then stop.
			for {
				batch = batch[:0]
				w.gather(&batch)
				if len(batch) == 0 && w.pendingCompletions() == 0 {
					return
				}
				w.commit(batch)
			}
		}
		w.gather(&batch)
		w.commit(batch)
	}
}

// gather adds every op already waiting, up to maxGroup.
func (w *writer) gather(batch *[]*writeOp) {
	for len(*batch) < maxGroup {
		select {
		case op := <-w.ops:
			*batch = append(*batch, op)
		default:
			return
		}
	}
}

func (w *writer) commit(all []*writeOp) {
	batch := all[:0:0]
	for _, op := range all {
		if op.noTx {
			op.done <- op.fn(op.ctx, w.conn)
		} else {
			batch = append(batch, op)
		}
	}
	w.mu.Lock()
	cs := w.completions
	w.completions = nil
	w.mu.Unlock()
	if len(batch) == 0 && len(cs) == 0 {
		return
	}
	ctx := context.Background()
	errs := make([]error, len(batch))
	var results []error
	shared := len(batch)+len(cs) > 1
	wait, stopWait := waitContext(batch, len(cs) > 0)
	defer stopWait()
	err := runTx(wait, ctx, cached{w}, func(tx execer) error {
		for i, op := range batch {
			if err := op.ctx.Err(); err != nil {
				errs[i] = err
				continue
			}
			errs[i] = runOp(op, tx, shared)
			if errs[i] != nil && !shared {
				return errs[i] // roll back the lone op's partial changes
			}
		}
		if len(cs) > 0 {
			var err error
			if results, err = w.completeFn(ctx, tx, cs); err != nil {
				return err
			}
		}
		// Commit only into the file the queue opened.
		return w.file.Load().check()
	})
	if err != nil && !shared && len(batch) == 1 && errs[0] != nil {
		// A lone op's own failure rolled the transaction back; report it.
		err = nil
	}
	// Completions are reported before the ops are answered, so that an op
	// that waits for them (Stop's final flush) returns after their events.
	for i, c := range cs {
		if c.notify == nil {
			continue
		}
		if err != nil {
			c.notify(err)
		} else {
			c.notify(results[i])
		}
	}
	for i, op := range batch {
		if err == nil && errs[i] == nil && op.after != nil {
			op.after()
		}
	}
	for i, op := range batch {
		if err != nil {
			op.done <- err
		} else {
			op.done <- errs[i]
		}
	}
}

// waitContext returns the context under which a batch waits for the write
// lock: it ends once every op of the batch has given up (its context ended,
// with that context's cause), so a caller's deadline bounds its wait for a
// lock another process holds, and nothing is written after it gave up. With
// completions to write it never ends: they have no caller to give up.
func waitContext(ops []*writeOp, completions bool) (context.Context, func()) {
	if completions || len(ops) == 0 {
		return context.Background(), func() {}
	}
	wait, cancel := context.WithCancelCause(context.Background())
	var left atomic.Int64
	left.Store(int64(len(ops)))
	stops := make([]func() bool, len(ops))
	for i, op := range ops {
		stops[i] = context.AfterFunc(op.ctx, func() {
			if left.Add(-1) == 0 {
				cancel(context.Cause(op.ctx))
			}
		})
	}
	return wait, func() {
		for _, stop := range stops {
			stop()
		}
		cancel(nil)
	}
}

// runOp runs one op; shared says other ops share the transaction, so the op
// gets a savepoint that isolates its failure.
func runOp(op *writeOp, tx execer, shared bool) error {
	if !shared {
		return op.fn(op.ctx, tx)
	}
	if _, err := tx.ExecContext(op.ctx, "SAVEPOINT lq_op"); err != nil {
		return err
	}
	if err := op.fn(op.ctx, tx); err != nil {
		_, _ = tx.ExecContext(context.Background(), "ROLLBACK TO lq_op")
		_, _ = tx.ExecContext(context.Background(), "RELEASE lq_op")
		return err
	}
	_, err := tx.ExecContext(op.ctx, "RELEASE lq_op")
	return err
}
