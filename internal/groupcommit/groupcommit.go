// Package groupcommit is the write loop the queue's stores share (group
// commit): callers submit operations and wait; one goroutine gathers every
// operation already waiting, together with the successes queued since the
// last batch, and hands them to the store's commit function as one batch, so
// that concurrent writers share one transaction and one durable commit
// instead of each paying one.
//
// The store supplies what a batch means (SQLite: one transaction on its one
// connection, a savepoint per operation; PostgreSQL: one pipelined round trip
// on a pooled connection); this package owns submitting, waiting, the queue of
// successes, batching, the number of batches in flight and shutting down.
package groupcommit

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// Op is one submitted operation: the store's Work, the caller's context, and
// the outcome the commit function reports in Err.
type Op[W any] struct {
	Ctx  context.Context
	Work W
	// Err is the operation's outcome, set by the commit function; the
	// caller of Submit receives it once the batch is done.
	Err  error
	done chan error
}

// Commit commits one batch: ops in the order they were taken (possibly none)
// and cs, the successes queued since the last batch (possibly none; never both
// empty). It sets each op's Err; the writer answers the ops after it returns.
// It must not submit to its own writer.
type Commit[W any] func(ops []*Op[W], cs []store.Completion)

// Options shape a Writer's batches.
type Options struct {
	// MaxGroup bounds how many ops share one batch (default 256).
	MaxGroup int
	// Slots bounds the batches committing at once (default 1). With one,
	// batches commit one after the other, in the order they were gathered;
	// with more, a batch may start while earlier ones still commit, each on
	// its own goroutine.
	Slots int
	// Gather bounds how long a batch waits, yielding, for the callers that
	// the last commit answered to submit again, so that they share this
	// batch instead of waiting for the next one. A batch waits only while
	// it has fewer ops than the last one had callers (a lone caller never
	// waits); 0 never waits.
	Gather time.Duration
}

// Writer runs one store's writes: one goroutine that commits whatever is
// waiting as one batch.
type Writer[W any] struct {
	opts   Options
	commit Commit[W]
	ops    chan *Op[W]
	kick   chan struct{}

	mu          sync.Mutex
	completions []store.Completion

	slots    chan struct{}
	inflight sync.WaitGroup
	last     atomic.Int64 // callers at the last batch: its ops and those queued behind it
	// lead is held, with one slot, by whoever commits a batch: the loop,
	// or a lone caller committing its own op (see Submit).
	lead sync.Mutex

	quit chan struct{}
	done chan struct{}
}

// New starts a writer that commits through commit.
func New[W any](opts Options, commit Commit[W]) *Writer[W] {
	if opts.MaxGroup <= 0 {
		opts.MaxGroup = 256
	}
	opts.Slots = max(opts.Slots, 1)
	w := &Writer[W]{
		opts:   opts,
		commit: commit,
		ops:    make(chan *Op[W], opts.MaxGroup),
		kick:   make(chan struct{}, 1),
		slots:  make(chan struct{}, opts.Slots),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	go w.loop()
	return w
}

// Submit hands o to the writer and waits until its batch is done, then
// returns o.Err. It returns o.Ctx's error if the context ends before the
// writer took o, and store.ErrClosed once the writer is closed (an op the
// writer took before closing is still committed and answered).
//
// With one slot, a caller that finds the writer idle — nothing committing,
// nothing waiting, and a lone caller in the last batch, so nobody to wait
// for — commits its op itself, on its own goroutine, sparing the hand-over
// to the writer's goroutine and back.
func (w *Writer[W]) Submit(o *Op[W]) error {
	o.done = make(chan error, 1)
	if w.opts.Slots == 1 && w.last.Load() <= 1 && len(w.ops) == 0 && w.lead.TryLock() {
		defer w.lead.Unlock()
		select {
		case <-w.quit:
			return store.ErrClosed
		default:
		}
		if err := o.Ctx.Err(); err != nil {
			return err
		}
		w.run([]*Op[W]{o})
		w.last.Store(1 + int64(len(w.ops)))
		return <-o.done
	}
	select {
	case w.ops <- o:
		w.wake()
	case <-w.quit:
		return store.ErrClosed
	case <-o.Ctx.Done():
		return o.Ctx.Err()
	}
	select {
	case err := <-o.done:
		return err
	case <-w.done:
		// The writer stopped; it answers every op it took before stopping.
		select {
		case err := <-o.done:
			return err
		default:
			return store.ErrClosed
		}
	}
}

// Complete queues a success for the next batch without waiting; its Notify
// reports the outcome.
func (w *Writer[W]) Complete(c store.Completion) {
	w.mu.Lock()
	w.completions = append(w.completions, c)
	w.mu.Unlock()
	w.wake()
}

// Pending reports how many successes wait for a batch.
func (w *Writer[W]) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.completions)
}

// Queued reports how many submitted ops wait for the writer to take them.
func (w *Writer[W]) Queued() int { return len(w.ops) }

// Close commits everything already submitted or queued, then stops the
// writer. Later calls return at once.
func (w *Writer[W]) Close() {
	select {
	case <-w.quit:
	default:
		close(w.quit)
	}
	<-w.done
}

func (w *Writer[W]) loop() {
	defer close(w.done)
	defer w.inflight.Wait()
	batch := make([]*Op[W], 0, 8)
	for {
		select {
		case <-w.kick:
		case <-w.quit:
			// Commit what is left, then stop; no caller commits its own op
			// from now on.
			w.inflight.Wait()
			w.lead.Lock()
			for {
				batch = batch[:0]
				w.gather(&batch)
				if len(batch) == 0 && w.Pending() == 0 {
					return
				}
				w.run(batch)
			}
		}
		if w.opts.Slots == 1 {
			w.lead.Lock()
			w.gatherWait()
			batch = batch[:0]
			w.gather(&batch)
			if w.run(batch) {
				w.last.Store(int64(len(batch) + len(w.ops)))
			}
			w.lead.Unlock()
		} else {
			// Wait for a free slot first: ops arriving meanwhile join this
			// batch.
			w.gatherWait()
			w.slots <- struct{}{}
			batch = batch[:0]
			w.gather(&batch)
			if len(batch) > 0 {
				w.last.Store(int64(len(batch) + len(w.ops)))
			}
			mine := append([]*Op[W](nil), batch...)
			w.inflight.Add(1)
			go func() {
				defer w.inflight.Done()
				defer func() { <-w.slots }()
				w.run(mine)
			}()
		}
		if len(w.ops) > 0 {
			w.wake() // more than one batch was waiting
		}
	}
}

// gatherWait lets the callers that the last batch answered, and are about
// to submit again, do so before the next batch is taken: once one op waits,
// it waits, yielding and at most Gather, until as many ops wait as the last
// batch had callers, or the writer closes. The wait is measured on the
// wall clock on purpose, not on the queue's Clock: it paces disk and network
// I/O and never decides anything about a job (a mock clock that does not
// move would make it spin forever).
func (w *Writer[W]) gatherWait() {
	if w.opts.Gather <= 0 || len(w.ops) == 0 {
		return
	}
	for deadline := time.Now().Add(w.opts.Gather); int64(len(w.ops)) < w.last.Load() && time.Now().Before(deadline); {
		select {
		case <-w.quit:
			return
		default:
		}
		runtime.Gosched()
	}
}

// wake makes the loop look for work.
func (w *Writer[W]) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// gather adds every op already waiting, up to MaxGroup.
func (w *Writer[W]) gather(batch *[]*Op[W]) {
	for len(*batch) < w.opts.MaxGroup {
		select {
		case o := <-w.ops:
			*batch = append(*batch, o)
		default:
			return
		}
	}
}

// run commits ops with the queued successes and answers the ops. It
// reports false when there was nothing to commit.
func (w *Writer[W]) run(ops []*Op[W]) bool {
	w.mu.Lock()
	cs := w.completions
	// The next batch's successes start with room for as many as this one
	// had, rather than growing from nothing again.
	w.completions = nil
	if len(cs) > 0 {
		w.completions = make([]store.Completion, 0, len(cs))
	}
	w.mu.Unlock()
	if len(ops) == 0 && len(cs) == 0 {
		return false
	}
	w.commit(ops, cs)
	for _, o := range ops {
		o.done <- o.Err
	}
	return true
}

// Notify reports a batch's outcome to its successes: err to every one when
// the batch failed, else each its own result (nil, or store.ErrLeaseLost for
// a success whose lease was gone). A commit function calls it before running
// its ops' hand-offs, so that whoever waits for a success's event sees it
// before the ops of its batch are answered.
func Notify(cs []store.Completion, results []error, err error) {
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
}
