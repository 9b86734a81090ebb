package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"

	"github.com/litequeue/litequeue/internal/store"
)

// writeOp is one unit of work for the writer. It runs inside the writer's
// transaction, under its own savepoint when it shares the transaction with
// others, so its failure rolls back only its own changes.
type writeOp struct {
	ctx  context.Context
	fn   func(ctx context.Context, tx Execer) error
	done chan error
	noTx bool // run on the connection outside any transaction (reads)
	// after, when set, runs on the writer once fn's changes committed,
	// before later transactions: claims hand their jobs to the workers in
	// commit order this way.
	after func()
}

// writer is the single writer of a queue: one goroutine owning one
// connection that commits whatever is waiting — enqueues, claims, failures,
// lease extensions and batched completions — in one transaction (group
// commit), so concurrent writers share an fsync instead of each paying one.
type writer struct {
	conn *sql.Conn
	ops  chan *writeOp

	mu          sync.Mutex
	completions []store.Completion
	completeFn  func(ctx context.Context, tx Execer, cs []store.Completion) ([]error, error)
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

func newWriter(conn *sql.Conn, completeFn func(ctx context.Context, tx Execer, cs []store.Completion) ([]error, error)) *writer {
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
func (w *writer) do(ctx context.Context, fn func(ctx context.Context, tx Execer) error) error {
	return w.submit(&writeOp{ctx: ctx, fn: fn, done: make(chan error, 1)})
}

// doAfter is do, and runs after on the writer once fn's changes committed
// (see writeOp.after). after must not wait for the writer.
func (w *writer) doAfter(ctx context.Context, fn func(ctx context.Context, tx Execer) error, after func()) error {
	return w.submit(&writeOp{ctx: ctx, fn: fn, done: make(chan error, 1), after: after})
}

// read runs fn on the writer's connection outside any transaction, between
// two commits. The poller reads PRAGMA data_version this way: on the
// writer's connection it changes only for other connections' commits.
func (w *writer) read(ctx context.Context, fn func(ctx context.Context, tx Execer) error) error {
	return w.submit(&writeOp{ctx: ctx, fn: fn, done: make(chan error, 1), noTx: true})
}

func (w *writer) submit(op *writeOp) error {
	ctx := op.ctx
	select {
	case w.ops <- op:
	case <-w.quit:
		return store.ErrClosed
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
			return store.ErrClosed
		}
	}
}

// complete queues a success for the next batch without waiting.
func (w *writer) complete(c store.Completion) {
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
	err := runTx(wait, ctx, cached{w}, func(tx Execer) error {
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
		if c.Notify == nil {
			continue
		}
		if err != nil {
			c.Notify(err)
		} else {
			c.Notify(results[i])
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
func runOp(op *writeOp, tx Execer, shared bool) error {
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
