package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"

	"github.com/litequeue/litequeue/internal/groupcommit"
	"github.com/litequeue/litequeue/internal/sqlitefile"
	"github.com/litequeue/litequeue/internal/store"
)

// writeOp is one unit of work for the writer. It runs inside the writer's
// transaction, under its own savepoint when it shares the transaction with
// others, so its failure rolls back only its own changes.
type writeOp struct {
	fn   func(ctx context.Context, tx Execer) error
	noTx bool // run on the connection outside any transaction (reads)
	// after, when set, runs on the writer once fn's changes committed,
	// before later transactions: claims hand their jobs to the workers in
	// commit order this way.
	after func()
}

// writer is the single writer of a queue: one goroutine owning one
// connection that commits whatever is waiting — enqueues, claims, failures,
// lease extensions and batched completions — in one transaction (group
// commit, internal/groupcommit), so concurrent writers share an fsync instead
// of each paying one.
type writer struct {
	conn       *sql.Conn
	gc         *groupcommit.Writer[writeOp]
	completeFn func(ctx context.Context, tx Execer, cs []store.Completion) ([]error, error)

	stmtMu sync.Mutex
	stmts  map[string]*sql.Stmt

	// countsLowered is countingTx.lowered of the writer's transactions
	// (counts.go); only the writer's goroutine touches it.
	countsLowered int

	// file is the queue file's identity, checked before every commit; nil
	// for New.
	file atomic.Pointer[fileIdentity]
}

// maxGroup bounds how many operations share one transaction.
const maxGroup = 512

func newWriter(conn *sql.Conn, completeFn func(ctx context.Context, tx Execer, cs []store.Completion) ([]error, error)) *writer {
	w := &writer{
		conn:       conn,
		stmts:      map[string]*sql.Stmt{},
		completeFn: completeFn,
	}
	w.gc = groupcommit.New(groupcommit.Options{MaxGroup: maxGroup}, w.commit)
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
func (w *writer) do(ctx context.Context, fn func(ctx context.Context, tx Execer) error) error {
	return w.gc.Submit(&groupcommit.Op[writeOp]{Ctx: ctx, Work: writeOp{fn: fn}})
}

// doAfter is do, and runs after on the writer once fn's changes committed
// (see writeOp.after). after must not wait for the writer.
func (w *writer) doAfter(ctx context.Context, fn func(ctx context.Context, tx Execer) error, after func()) error {
	return w.gc.Submit(&groupcommit.Op[writeOp]{Ctx: ctx, Work: writeOp{fn: fn, after: after}})
}

// read runs fn on the writer's connection outside any transaction, between
// two commits. The poller reads PRAGMA data_version this way: on the
// writer's connection it changes only for other connections' commits.
func (w *writer) read(ctx context.Context, fn func(ctx context.Context, tx Execer) error) error {
	return w.gc.Submit(&groupcommit.Op[writeOp]{Ctx: ctx, Work: writeOp{fn: fn, noTx: true}})
}

// complete queues a success for the next batch without waiting.
func (w *writer) complete(c store.Completion) { w.gc.Complete(c) }

// close writes everything already queued, then stops the writer.
func (w *writer) close() {
	w.gc.Close()
	w.stmtMu.Lock()
	for _, s := range w.stmts {
		s.Close()
	}
	w.stmts = nil
	w.stmtMu.Unlock()
}

// commit runs one batch: the reads first, then the completions and every
// other op in one transaction.
func (w *writer) commit(all []*groupcommit.Op[writeOp], cs []store.Completion) {
	batch := all[:0:0]
	for _, op := range all {
		if op.Work.noTx {
			op.Err = op.Work.fn(op.Ctx, w.conn)
		} else {
			batch = append(batch, op)
		}
	}
	if len(batch) == 0 && len(cs) == 0 {
		return
	}
	ctx := context.Background()
	errs := make([]error, len(batch))
	var results []error
	shared := len(batch)+len(cs) > 1
	wait, stopWait := waitContext(batch, len(cs) > 0)
	defer stopWait()
	err := sqlitefile.RunTx(wait, cached{w}, func(stx Execer) error {
		tx := &countingTx{Execer: stx, lowered: &w.countsLowered}
		// The completions go first: they were queued before the ops, and a
		// claim of the same batch must find a completed job gone, not take
		// a job whose lease a mock clock (or a stall) let lapse while its
		// success waited here.
		if len(cs) > 0 {
			var err error
			if results, err = w.completeFn(ctx, tx, cs); err != nil {
				return err
			}
		}
		for i, op := range batch {
			if err := op.Ctx.Err(); err != nil {
				errs[i] = err
				continue
			}
			errs[i] = runOp(op, tx, shared)
			if errs[i] != nil && !shared {
				return errs[i] // roll back the lone op's partial changes
			}
		}
		// The counts of what the ops moved (counts.go), once.
		if err := tx.flush(ctx); err != nil {
			return err
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
	groupcommit.Notify(cs, results, err)
	for i, op := range batch {
		if err == nil && errs[i] == nil && op.Work.after != nil {
			op.Work.after()
		}
	}
	for i, op := range batch {
		if err != nil {
			op.Err = err
		} else {
			op.Err = errs[i]
		}
	}
}

// waitContext returns the context under which a batch waits for the write
// lock: it ends once every op of the batch has given up (its context ended,
// with that context's cause), so a caller's deadline bounds its wait for a
// lock another process holds, and nothing is written after it gave up. With
// completions to write it never ends: they have no caller to give up.
func waitContext(ops []*groupcommit.Op[writeOp], completions bool) (context.Context, func()) {
	if completions || len(ops) == 0 || !cancellable(ops) {
		return context.Background(), func() {}
	}
	wait, cancel := context.WithCancelCause(context.Background())
	var left atomic.Int64
	left.Store(int64(len(ops)))
	stops := make([]func() bool, len(ops))
	for i, op := range ops {
		stops[i] = context.AfterFunc(op.Ctx, func() {
			if left.Add(-1) == 0 {
				cancel(context.Cause(op.Ctx))
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

// cancellable reports whether any of ops can be cancelled. When none can,
// the transaction's context is one that never ends: the driver then runs
// each statement without a goroutine watching for a cancel.
func cancellable(ops []*groupcommit.Op[writeOp]) bool {
	for _, op := range ops {
		if op.Ctx.Done() != nil {
			return true
		}
	}
	return false
}

// runOp runs one op; shared says other ops share the transaction, so the op
// gets a savepoint that isolates its failure (and its changes of the counts
// go with it).
func runOp(op *groupcommit.Op[writeOp], tx *countingTx, shared bool) error {
	if !shared {
		return op.Work.fn(op.Ctx, tx)
	}
	if _, err := tx.ExecContext(op.Ctx, "SAVEPOINT lq_op"); err != nil {
		return err
	}
	mark := tx.mark()
	if err := op.Work.fn(op.Ctx, tx); err != nil {
		tx.truncate(mark)
		_, _ = tx.ExecContext(context.Background(), "ROLLBACK TO lq_op")
		_, _ = tx.ExecContext(context.Background(), "RELEASE lq_op")
		return err
	}
	_, err := tx.ExecContext(op.Ctx, "RELEASE lq_op")
	return err
}
