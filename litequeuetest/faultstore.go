package litequeuetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/store"
)

// writeFault is what Kit.FailWrites armed: the error the next writes fail
// with, and how many.
type writeFault struct {
	mu     sync.Mutex
	err    error  // nil: writes pass
	left   int    // writes still to fail; < 0: every write
	armed  int    // the n of the last FailWrites
	failed int    // writes failed since the last FailWrites
	total  int    // writes failed since New
	notify func() // called (without mu) after each failed write
}

// arm makes the next n writes fail with err (every write if n < 0; none if
// n == 0 or err is nil).
func (w *writeFault) arm(err error, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n == 0 || err == nil {
		w.err, w.left, w.armed, w.failed = nil, 0, 0, 0
		return
	}
	w.err, w.left, w.armed, w.failed = injected(err), n, n, 0
}

// fail returns the error the current write fails with, or nil.
func (w *writeFault) fail() error {
	w.mu.Lock()
	err := w.err
	if err != nil {
		w.failed++
		w.total++
		if w.left > 0 {
			w.left--
			if w.left == 0 {
				w.err = nil
			}
		}
	}
	notify := w.notify
	w.mu.Unlock()
	if err != nil && notify != nil {
		notify()
	}
	return err
}

// count reports whether every write fails until the fault is cleared, and
// how many writes failed since New.
func (w *writeFault) count() (always bool, total int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err != nil && w.left < 0, w.total
}

// unused describes a write fault that failed fewer writes than it was
// armed for ("" if none).
func (w *writeFault) unused() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.err == nil:
		return ""
	case w.left > 0:
		return fmt.Sprintf("Kit.FailWrites armed %d failing writes but only %d happened", w.armed, w.failed)
	case w.failed == 0:
		return "Kit.FailWrites armed every write to fail but the queue wrote nothing"
	}
	return ""
}

// sqliteText is the text SQLite gives, per storage fault, after the
// queue's sentinel (see internal/sqlite's classifyWriteError).
var sqliteText = []struct {
	err  error
	text string
}{
	{litequeue.ErrStorageFull, "database or disk is full (13)"},
	{litequeue.ErrStorageIO, "disk I/O error (10)"},
	{litequeue.ErrFileReplaced, "attempt to write a readonly database (1032)"},
}

// injected is the error an injected write fault returns: err, wrapped as
// the SQLite store wraps the driver's error for it, and marked as
// injected.
func injected(err error) error {
	for _, s := range sqliteText {
		if errors.Is(err, s.err) {
			return fmt.Errorf("%w: %s [injected by litequeuetest]", err, s.text)
		}
	}
	return fmt.Errorf("%w [injected by litequeuetest]", err)
}

// faultStore is the store of a Kit's queue: the SQLite store, with every
// write first asking the kit's write fault whether it fails. A failing
// write changes nothing in the file, as a write that hits a full disk is
// rolled back. Reads pass through (they are promoted from the embedded
// store; faultstore_test.go checks that every write is listed here).
type faultStore struct {
	store.Backend
	w *writeFault
	// crashTx, if set, may crash an attempt at its CompleteTx (see
	// Kit.DeliverTwice): it rolls tx back and returns the error.
	crashTx func(ctx context.Context, tx *sql.Tx, l store.Lease) error
}

// wrapStore returns the fault store over s. The queue asks its store for
// optional interfaces: the fault store has each that s has, so that a
// queue under the kit behaves like one without it. The transaction watcher
// (EnqueueTx's events wait for the caller's commit) only reads, and passes
// through.
func wrapStore(s store.Backend, w *writeFault, crashTx func(ctx context.Context, tx *sql.Tx, l store.Lease) error) store.Backend {
	f := &faultStore{Backend: s, w: w, crashTx: crashTx}
	if tw, ok := s.(store.TxWatcher); ok {
		return &watchingFaultStore{faultStore: f, TxWatcher: tw}
	}
	return f
}

// watchingFaultStore is the fault store over a store that watches
// transactions.
type watchingFaultStore struct {
	*faultStore
	store.TxWatcher
}

// ReadOnly passes through: whether the store below was opened read-only.
func (f *faultStore) ReadOnly() bool {
	ro, ok := f.Backend.(interface{ ReadOnly() bool })
	return ok && ro.ReadOnly()
}

// guarded runs the write do unless the write fault fails it: then it
// returns the fault's error, and do never reaches the store.
func guarded[T any](f *faultStore, do func() (T, error)) (T, error) {
	if err := f.w.fail(); err != nil {
		var zero T
		return zero, err
	}
	return do()
}

// guard is guarded for a write that returns only an error.
func (f *faultStore) guard(do func() error) error {
	if err := f.w.fail(); err != nil {
		return err
	}
	return do()
}

// Backup passes through: it writes another file, not the queue's.
func (f *faultStore) Backup(ctx context.Context, path string) error {
	b, ok := f.Backend.(store.Backuper)
	if !ok {
		return errors.New("litequeuetest: the store cannot back up")
	}
	return b.Backup(ctx, path)
}

func (f *faultStore) Pause(ctx context.Context, queue string, at int64) (bool, error) {
	return guarded(f, func() (bool, error) { return f.Backend.Pause(ctx, queue, at) })
}

func (f *faultStore) Resume(ctx context.Context, queue string) (bool, error) {
	return guarded(f, func() (bool, error) { return f.Backend.Resume(ctx, queue) })
}

func (f *faultStore) Cancel(ctx context.Context, ids []int64, now int64, hook store.CancelHook) ([]store.CancelledJob, error) {
	return guarded(f, func() ([]store.CancelledJob, error) { return f.Backend.Cancel(ctx, ids, now, hook) })
}

func (f *faultStore) PurgeCancelled(ctx context.Context, before int64) (int, error) {
	return guarded(f, func() (int, error) { return f.Backend.PurgeCancelled(ctx, before) })
}

func (f *faultStore) Snooze(ctx context.Context, s store.Snooze) error {
	return f.guard(func() error { return f.Backend.Snooze(ctx, s) })
}

func (f *faultStore) Report(ctx context.Context, r store.Report) error {
	return f.guard(func() error { return f.Backend.Report(ctx, r) })
}

func (f *faultStore) Insert(ctx context.Context, tx store.Tx, jobs []store.NewJob) (ids []int64, errs []error, err error) {
	err = f.guard(func() error { ids, errs, err = f.Backend.Insert(ctx, tx, jobs); return err })
	return ids, errs, err
}

func (f *faultStore) InsertFlow(ctx context.Context, tx store.Tx, jobs []store.NewJob, edges []store.Edge) (ids []int64, err error) {
	err = f.guard(func() error { ids, err = f.Backend.InsertFlow(ctx, tx, jobs, edges); return err })
	return ids, err
}

func (f *faultStore) InsertClaim(ctx context.Context, job store.NewJob, q store.ClaimQuery, handOff func([]store.Claimed)) (int64, error) {
	return guarded(f, func() (int64, error) { return f.Backend.InsertClaim(ctx, job, q, handOff) })
}

func (f *faultStore) Claim(ctx context.Context, q store.ClaimQuery, handOff func([]store.Claimed)) (int, error) {
	return guarded(f, func() (int, error) { return f.Backend.Claim(ctx, q, handOff) })
}

func (f *faultStore) Extend(ctx context.Context, leases []store.Lease, until int64) ([]int, error) {
	return guarded(f, func() ([]int, error) { return f.Backend.Extend(ctx, leases, until) })
}

func (f *faultStore) Release(ctx context.Context, leases []store.Lease, now int64) error {
	return f.guard(func() error { return f.Backend.Release(ctx, leases, now) })
}

// Complete reports a failing write through c.Notify, as the store reports a
// failed commit of queued successes.
func (f *faultStore) Complete(c store.Completion) {
	err := f.guard(func() error { f.Backend.Complete(c); return nil })
	if err != nil && c.Notify != nil {
		c.Notify(err)
	}
}

func (f *faultStore) CompleteTx(ctx context.Context, tx store.Tx, l store.Lease, keepAt int64) error {
	return f.guard(func() error {
		if f.crashTx != nil {
			if err := f.crashTx(ctx, tx.SQL(), l); err != nil {
				return err
			}
		}
		return f.Backend.CompleteTx(ctx, tx, l, keepAt)
	})
}

func (f *faultStore) Retry(ctx context.Context, r store.Retry) error {
	return f.guard(func() error { return f.Backend.Retry(ctx, r) })
}

func (f *faultStore) Bury(ctx context.Context, b store.Burial) error {
	return f.guard(func() error { return f.Backend.Bury(ctx, b) })
}

func (f *faultStore) Expire(ctx context.Context, e store.Expiry) (int, error) {
	return guarded(f, func() (int, error) { return f.Backend.Expire(ctx, e) })
}

func (f *faultStore) PurgeCompleted(ctx context.Context, before int64) (int, error) {
	return guarded(f, func() (int, error) { return f.Backend.PurgeCompleted(ctx, before) })
}

func (f *faultStore) Requeue(ctx context.Context, ids []int64, now int64) ([]store.Moved, error) {
	return guarded(f, func() ([]store.Moved, error) { return f.Backend.Requeue(ctx, ids, now) })
}

func (f *faultStore) RequeueCancelled(ctx context.Context, ids []int64, now int64) ([]store.Moved, error) {
	return guarded(f, func() ([]store.Moved, error) { return f.Backend.RequeueCancelled(ctx, ids, now) })
}

func (f *faultStore) RunNow(ctx context.Context, id, now int64) (store.Moved, error) {
	return guarded(f, func() (store.Moved, error) { return f.Backend.RunNow(ctx, id, now) })
}

func (f *faultStore) UpsertSchedule(ctx context.Context, def store.Schedule, now int64, detail string) (s *store.Schedule, change store.ScheduleChange, err error) {
	err = f.guard(func() error { s, change, err = f.Backend.UpsertSchedule(ctx, def, now, detail); return err })
	return s, change, err
}

func (f *faultStore) Beat(ctx context.Context, p store.Process, pruneBefore int64) error {
	return f.guard(func() error { return f.Backend.Beat(ctx, p, pruneBefore) })
}

func (f *faultStore) Unregister(ctx context.Context, id int64) error {
	return f.guard(func() error { return f.Backend.Unregister(ctx, id) })
}

func (f *faultStore) RemoveSchedule(ctx context.Context, name string) error {
	return f.guard(func() error { return f.Backend.RemoveSchedule(ctx, name) })
}

func (f *faultStore) SetLimits(ctx context.Context, queue string, l store.Limits) (store.Limits, error) {
	return guarded(f, func() (store.Limits, error) { return f.Backend.SetLimits(ctx, queue, l) })
}

func (f *faultStore) PauseSchedule(ctx context.Context, name string, paused bool, next, now int64) error {
	return f.guard(func() error { return f.Backend.PauseSchedule(ctx, name, paused, next, now) })
}

func (f *faultStore) FireSchedule(ctx context.Context, fi store.Firing) (store.FireResult, error) {
	return guarded(f, func() (store.FireResult, error) { return f.Backend.FireSchedule(ctx, fi) })
}

func (f *faultStore) TriggerSchedule(ctx context.Context, name string, now int64, unique func(*store.Schedule, *store.NewJob) error) (id int64, queue, kind string, err error) {
	err = f.guard(func() error { id, queue, kind, err = f.Backend.TriggerSchedule(ctx, name, now, unique); return err })
	return id, queue, kind, err
}

func (f *faultStore) Bulk(ctx context.Context, op store.BulkOp, q store.JobQuery, before int64, n int, hook store.CancelHook) (store.BulkResult, error) {
	return guarded(f, func() (store.BulkResult, error) { return f.Backend.Bulk(ctx, op, q, before, n, hook) })
}

func (f *faultStore) AddHistory(ctx context.Context, counts []store.HistoryCount, pruneBefore int64) error {
	return f.guard(func() error { return f.Backend.AddHistory(ctx, counts, pruneBefore) })
}

// testing is the store below as the kit's store.Testing.
func (f *faultStore) testing() (store.Testing, error) {
	ts, ok := f.Backend.(store.Testing)
	if !ok {
		return nil, fmt.Errorf("litequeuetest: the store (%T) has no test-kit operations", f.Backend)
	}
	return ts, nil
}

// LoadOf passes through: it only reads.
func (f *faultStore) LoadOf(ctx context.Context, handled []store.Handled, now int64) (store.Load, error) {
	ts, err := f.testing()
	if err != nil {
		return store.Load{}, err
	}
	return ts.LoadOf(ctx, handled, now)
}

func (f *faultStore) InsertRunning(ctx context.Context, job store.NewJob, r store.RunningClaim) (int64, error) {
	return guarded(f, func() (int64, error) {
		ts, err := f.testing()
		if err != nil {
			return 0, err
		}
		return ts.InsertRunning(ctx, job, r)
	})
}

var _ store.Testing = (*faultStore)(nil)
