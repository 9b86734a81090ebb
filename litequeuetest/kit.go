// Package litequeuetest runs litequeue handlers in tests, deterministically
// and fast: a real queue on a real SQLite file in t.TempDir(), a mock clock
// that the kit moves from one due time to the next, and seeded jitter, so a
// job goes through its real retry schedule — hours of backoff, a timeout, a
// dead letter — in milliseconds of real time.
//
// The pieces:
//
//   - New makes a Kit: Kit.Queue (register handlers on it) and Kit.Clock.
//     Everything is closed when the test ends, and goroutines left behind
//     fail the test.
//   - Kit.Drain runs every due job through the registered handlers and moves
//     the clock to each next due time until nothing is due or scheduled;
//     Kit.Next does one such step; Kit.Settle drives one job until it
//     succeeds or dies.
//   - Kit.Advance moves the clock through a span of time as it passes for
//     a running process: every job due and every schedule occurrence on
//     the way runs on time.
//   - Kit.WaitFor and Kit.Wait wait (in real time, bounded) for an event;
//     Kit.History and Kit.Events report what happened.
//   - Work runs one handler call synchronously, without a queue, with a real
//     Delivery; RequireEnqueued and RequireNotEnqueued check what a piece of
//     code enqueued.
//   - Fault injection proves handlers idempotent and callers careful:
//     Kit.DeliverTwice and Kit.DeliverEachTwice deliver a job again after
//     its first success (a CompleteTx handler's, after a crash before its
//     commit), Kit.LoseOutcome loses the process between a
//     handler's return and the commit of its outcome, Kit.FailWrites makes
//     the store fail writes as on a full disk.
//
// The kit drives the queue only through what production code runs: the
// workers, the dispatcher's Clock timers and the store. Nothing is stubbed;
// an injected fault takes the path the real failure takes from the point
// where it strikes.
package litequeuetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/kitlink"
	"github.com/litequeue/litequeue/internal/store"
	"go.uber.org/goleak"
)

// Epoch is the time a Kit's clock starts at: a fixed, realistic date, so
// that due times, ages and retry schedules in a test are the same on every
// run and read like real ones.
var Epoch = time.Date(2026, time.March, 2, 9, 0, 0, 0, time.UTC)

// Defaults of the Kit's bounds.
const (
	// DefaultTimeout bounds, in real time, how long the kit waits for the
	// queue's goroutines to make progress.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxAttempts bounds how many handler calls one Drain or Settle
	// may start.
	DefaultMaxAttempts = 10_000
)

// ErrLimit is returned (wrapped) by Drain and Settle when they reach
// Kit.MaxAttempts handler calls: a job that enqueues itself forever, or a
// retry policy of very many attempts.
var ErrLimit = errors.New("litequeuetest: attempt limit reached")

// ErrStuck is returned (wrapped) when jobs stay ready or running for
// Kit.Timeout of real time without any event: a handler that blocks (for
// example on a context whose timeout only the mock clock can end — advance
// Kit.Clock), or a job claimed by nobody.
var ErrStuck = errors.New("litequeuetest: no progress")

// Kit is a queue under test: a real Queue on a file in t.TempDir(), driven
// by a mock clock.
type Kit struct {
	// Queue is the queue under test. Register handlers on it before the kit
	// starts it (Start, or the first Drain, Next or Settle).
	Queue *litequeue.Queue
	// Clock is the queue's clock, at Epoch when New returns (unless the
	// Options gave a *clock.Mock of their own). Advance it by hand, or let
	// Drain, Next and Settle move it to each next due time.
	Clock *clock.Mock
	// Path is the queue file; "" for a Kit made by NewDB.
	Path string
	// Timeout bounds every wait of the kit, in real time, for the queue to
	// make progress. Default DefaultTimeout (10s).
	Timeout time.Duration
	// MaxAttempts bounds the handler calls of one Drain or Settle. Default
	// DefaultMaxAttempts.
	MaxAttempts int

	t      testing.TB
	userFn func(litequeue.Event)

	mu      sync.Mutex
	events  []litequeue.Event
	changed chan struct{} // closed and replaced at every event
	started bool
	// open counts, per job, the attempts started whose outcome event has
	// not come yet: the queue commits an outcome, then reports it, so the
	// file may look quiet a moment before the event arrives.
	open  map[int64]int
	openN int
	// ticks counts events, lost outcomes and failed writes: progress.
	ticks int

	faults  faults     // armed by LoseOutcome, DeliverTwice, DeliverEachTwice
	writes  writeFault // armed by FailWrites
	lost    []kitlink.Outcome
	orphans map[int64]int // job -> the attempt whose outcome was lost, while its row may still be running under that attempt's lease
	early   map[int64]int // job -> lost outcomes of started attempts whose EventStarted is not recorded yet
}

// leak bookkeeping: goroutines are checked only for a kit whose life did
// not overlap another kit's (tests run with t.Parallel share the process).
var live struct {
	sync.Mutex
	kits map[*Kit]*bool // kit -> overlapped
}

// New returns a Kit: a queue opened with opts (nil means defaults) on a new
// file in t.TempDir(), with these filled in when opts leaves them zero:
// Clock, a *clock.Mock set to Epoch (a Clock that is not a *clock.Mock
// fails the test); Rand, a source with a fixed seed, so jitter is the same
// on every run; HeartbeatInterval, a century, so the queue registers itself
// at Start (Queue.Processes) and writes no heartbeat after. Options.OnEvent, when set, is called for every event after
// the kit records it. Every other option keeps its meaning and default.
//
// New makes the file itself (Kit.Path). For code that keeps its own tables
// beside the queue (EnqueueTx, CompleteTx), NewDB runs the kit on the
// application's own *sql.DB instead.
//
// When the test ends the queue is stopped and closed, and — unless another
// Kit lived at the same time (parallel tests) — any goroutine started
// during the kit's life and still running fails the test: a handler that
// ignores its context, or a goroutine a handler started and left.
func New(t testing.TB, opts *litequeue.Options) *Kit {
	t.Helper()
	path := filepath.Join(t.TempDir(), "queue.db")
	k := newKit(t, "New", opts, func(o *litequeue.Options, f kitlink.Faults) (*litequeue.Queue, error) {
		return root.Open(path, o, f)
	})
	k.Path = path
	return k
}

// NewDB returns a Kit whose queue keeps its tables in db, the application's
// own database, as litequeue.New does in production: the application's
// tables and the queue share one file, so a test passes its transactions on
// db to EnqueueTx and CompleteTx and they commit (or roll back) with the
// application's writes. db is opened with the "sqlite" driver
// (modernc.org/sqlite), with a busy timeout and at least two connections
// (see litequeue.New); the kit does not close it. Options are filled in as
// by New, and the kit behaves as New's in every other way (faults, Drain,
// the leak check when the test ends). A nil db fails the test.
func NewDB(t testing.TB, db *sql.DB, opts *litequeue.Options) *Kit {
	t.Helper()
	if db == nil {
		t.Fatalf("litequeuetest.NewDB: nil *sql.DB; pass the application's database, opened with sql.Open(%q, ...)", "sqlite")
	}
	return newKit(t, "NewDB", opts, func(o *litequeue.Options, f kitlink.Faults) (*litequeue.Queue, error) {
		return root.New(db, o, f)
	})
}

// kitHeartbeat is the kit's Options.HeartbeatInterval when left zero: in
// effect, never.
const kitHeartbeat = 100 * 365 * 24 * time.Hour

// newKit makes a Kit whose queue open makes with the options and hooks it
// is given; fn names the caller in failures.
func newKit(t testing.TB, fn string, opts *litequeue.Options, open func(*litequeue.Options, kitlink.Faults) (*litequeue.Queue, error)) *Kit {
	t.Helper()
	var o litequeue.Options
	if opts != nil {
		o = *opts
	}
	if o.ReadOnly {
		t.Fatalf("litequeuetest.%s: Options.ReadOnly makes a queue that cannot run jobs", fn)
	}
	k := &Kit{t: t, Timeout: DefaultTimeout, MaxAttempts: DefaultMaxAttempts, changed: make(chan struct{}), userFn: o.OnEvent}
	switch c := o.Clock.(type) {
	case nil:
		k.Clock = clock.NewMock()
		k.Clock.Set(Epoch)
	case *clock.Mock:
		k.Clock = c
	default:
		t.Fatalf("litequeuetest.%s: Options.Clock is a %T; leave it nil or pass a *clock.Mock", fn, o.Clock)
	}
	o.Clock = k.Clock
	if o.Rand == nil {
		o.Rand = rand.New(rand.NewPCG(1, 2))
	}
	if o.HeartbeatInterval == 0 {
		// One process: its registry row (Queue.Processes) is written at
		// Start and not again, so that a heartbeat timer does not step a
		// Clock.Add of hours through every interval on the way.
		o.HeartbeatInterval = kitHeartbeat
	}
	o.OnEvent = k.record
	ignore := goleak.IgnoreCurrent()
	overlapped := new(bool)
	live.Lock()
	if live.kits == nil {
		live.kits = map[*Kit]*bool{}
	}
	for _, other := range live.kits {
		*other, *overlapped = true, true
	}
	live.kits[k] = overlapped
	live.Unlock()

	k.writes.notify = k.tick
	q, err := open(&o, kitlink.Faults{
		Wrap: func(s store.Backend) store.Backend { return wrapStore(s, &k.writes, k.crashTx) },
		Drop: k.drop,
		Lost: k.noteLost,
	})
	if err != nil {
		t.Fatalf("litequeuetest.%s: %v", fn, err)
	}
	k.Queue = q
	t.Cleanup(func() {
		k.reportUnusedFaults()
		k.ClearFaults()
		ctx, cancel := context.WithTimeout(context.Background(), k.timeout())
		defer cancel()
		if err := q.Stop(ctx); err != nil {
			t.Errorf("litequeuetest: stopping the queue: %v", err)
		}
		if ctx.Err() != nil {
			t.Errorf("litequeuetest: a handler was still running %s after the test ended; it ignores its context", k.timeout())
		}
		if err := q.Close(); err != nil {
			t.Errorf("litequeuetest: closing the queue: %v", err)
		}
		live.Lock()
		delete(live.kits, k)
		check := !*overlapped
		live.Unlock()
		if check {
			if err := goleak.Find(ignore); err != nil {
				t.Errorf("litequeuetest: goroutines still running after the queue closed (a handler that ignores its context, or a goroutine it started): %v", err)
			}
		}
	})
	return k
}

func (k *Kit) timeout() time.Duration {
	if k.Timeout > 0 {
		return k.Timeout
	}
	return DefaultTimeout
}

func (k *Kit) maxAttempts() int {
	if k.MaxAttempts > 0 {
		return k.MaxAttempts
	}
	return DefaultMaxAttempts
}

func (k *Kit) record(e litequeue.Event) {
	k.mu.Lock()
	k.events = append(k.events, e)
	switch e.Type {
	case litequeue.EventStarted:
		if k.early[e.JobID] > 0 { // the attempt's outcome was lost already
			k.early[e.JobID]--
			break
		}
		if k.open == nil {
			k.open = map[int64]int{}
		}
		k.open[e.JobID]++
		k.openN++
	case litequeue.EventSucceeded, litequeue.EventRetrying, litequeue.EventDead, litequeue.EventStale, litequeue.EventReleased,
		litequeue.EventSnoozed, litequeue.EventCancelled:
		// The attempt's outcome. (EventCancelled of a job that was not
		// running closes nothing: it has no open attempt.)
		if k.open[e.JobID] > 0 {
			k.open[e.JobID]--
			k.openN--
		}
	}
	k.changedLocked()
	k.mu.Unlock()
	if k.userFn != nil {
		k.userFn(e)
	}
}

// since returns the events from index i on, the number of events, and a
// channel closed at the next event.
func (k *Kit) since(i int) ([]litequeue.Event, int, <-chan struct{}) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.events[i:]), len(k.events), k.changed
}

// Events returns every event of the queue so far, oldest first.
func (k *Kit) Events() []litequeue.Event {
	ev, _, _ := k.since(0)
	return ev
}

// History returns the events of job id so far, oldest first: enqueued,
// then for each attempt started and succeeded, retrying or dead, and any
// requeue. Unlike Queue.Job it covers a job whose success deleted it.
func (k *Kit) History(id int64) []litequeue.Event {
	var out []litequeue.Event
	for _, e := range k.Events() {
		if e.JobID == id {
			out = append(out, e)
		}
	}
	return out
}

// Start starts the queue's workers, if the kit has not started them yet.
// Register every handler first. Drain, Next and Settle call it.
func (k *Kit) Start() {
	k.t.Helper()
	if err := k.start(); err != nil {
		k.t.Fatal(err)
	}
}

func (k *Kit) start() error {
	k.mu.Lock()
	started := k.started
	k.started = true
	k.mu.Unlock()
	if started {
		return nil
	}
	if err := k.Queue.Start(context.Background()); err != nil && !errors.Is(err, litequeue.ErrAlreadyStarted) {
		return fmt.Errorf("litequeuetest: starting the queue: %w", err)
	}
	return nil
}

// Wait waits for the next event that match accepts — one emitted after
// the call; an earlier one does not count (look for those in Events, or
// use WaitFor) — and returns it. It fails with ctx's error, or with
// ErrStuck after Kit.Timeout of real time.
func (k *Kit) Wait(ctx context.Context, match func(litequeue.Event) bool) (litequeue.Event, error) {
	_, from, _ := k.since(0)
	return k.waitFrom(ctx, from, match)
}

// waitFrom waits for the first event from index from on that match
// accepts.
func (k *Kit) waitFrom(ctx context.Context, from int, match func(litequeue.Event) bool) (litequeue.Event, error) {
	timer := time.NewTimer(k.timeout())
	defer timer.Stop()
	for {
		evs, n, changed := k.since(from)
		for _, e := range evs {
			if match(e) {
				return e, nil
			}
		}
		from = n
		select {
		case <-changed:
		case <-ctx.Done():
			return litequeue.Event{}, ctx.Err()
		case <-timer.C:
			return litequeue.Event{}, fmt.Errorf("%w: no matching event within %s of real time; events so far:\n%s", ErrStuck, k.timeout(), describe(k.Events()))
		}
	}
}

// WaitFor waits for the first event of type typ for job id (0: any job),
// and returns it; it fails the test after Kit.Timeout of real time. Events
// that came before the call count.
func (k *Kit) WaitFor(typ litequeue.EventType, id int64) litequeue.Event {
	k.t.Helper()
	e, err := k.waitFrom(context.Background(), 0, func(e litequeue.Event) bool {
		return e.Type == typ && (id == 0 || e.JobID == id)
	})
	if err != nil {
		k.t.Fatalf("litequeuetest: waiting for %q of job %d: %v", typ, id, err)
	}
	return e
}

// DrainResult reports what a Drain (or Next) did.
type DrainResult struct {
	Ran       int           // handler calls started
	Succeeded int           // successes committed
	Retried   int           // failures that scheduled another attempt
	Died      int           // jobs that became dead letters
	Lost      int           // attempts whose outcome was never written, so no event reports it (see LostIDs)
	Elapsed   time.Duration // how far the kit moved the clock
	// Unhandled counts the live jobs left whose queue and kind no
	// registered handler serves (a typo in a queue name, a kind registered
	// in another process): Drain cannot run them.
	Unhandled int
	// Events are the events of the drain, oldest first.
	Events []litequeue.Event

	lostIDs []int64
}

// Dead returns the ids of the jobs that died during the drain.
func (r DrainResult) Dead() []int64 { return r.ids(litequeue.EventDead) }

// SucceededIDs returns the ids of the jobs that succeeded during the drain.
func (r DrainResult) SucceededIDs() []int64 { return r.ids(litequeue.EventSucceeded) }

func (r DrainResult) ids(typ litequeue.EventType) []int64 {
	var out []int64
	for _, e := range r.Events {
		if e.Type == typ {
			out = append(out, e.JobID)
		}
	}
	return out
}

// LostIDs returns the ids of the jobs whose attempts' outcomes were lost
// during the drain — by LoseOutcome, DeliverTwice or DeliverEachTwice —
// one per lost attempt, in the order they were lost. Each job came back
// when its lease ended. (An outcome whose write failed, FailWrites, is not
// lost: the queue keeps it and writes it again.)
func (r DrainResult) LostIDs() []int64 { return r.lostIDs }

func (k *Kit) result(m mark, unhandled int) DrainResult {
	evs, _, _ := k.since(m.events)
	r := DrainResult{Elapsed: k.Clock.Now().Sub(m.t0), Unhandled: unhandled, Events: evs}
	k.mu.Lock()
	for _, o := range k.lost[m.lost:] {
		r.lostIDs = append(r.lostIDs, o.ID)
	}
	k.mu.Unlock()
	r.Lost = len(r.lostIDs)
	for _, e := range evs {
		switch e.Type {
		case litequeue.EventStarted:
			r.Ran++
		case litequeue.EventSucceeded:
			r.Succeeded++
		case litequeue.EventRetrying:
			r.Retried++
		case litequeue.EventDead:
			r.Died++
		}
	}
	return r
}

// nudge is how long the kit waits for an event before it wakes the
// queue's dispatchers itself (Queue.Notify): a safety net, for example
// after a claim failed and the dispatcher waits on a mock-clock timer.
const nudge = 20 * time.Millisecond

// quiet waits until no handled job is ready or running, and returns the
// queue's load then. A job whose outcome was lost and whose row is still
// running under that attempt's lease is not running: it is due at the
// lease's end (Load.Next).
func (k *Kit) quiet(ctx context.Context) (kitlink.Load, error) {
	deadline := time.Now().Add(k.timeout())
	_, failedAtStart := k.writes.count()
	for {
		seen, changed := k.progress()
		l, err := root.Load(ctx, k.Queue)
		if err != nil {
			return l, err
		}
		if err := k.orphaned(ctx, &l); err != nil {
			return l, err
		}
		// OnEvent runs on its own goroutine: every event emitted before the
		// load was read (a started attempt's above all) is recorded before
		// the open attempts are counted.
		if err := k.Queue.FlushEvents(ctx); err != nil {
			return l, err
		}
		k.mu.Lock()
		open := k.openN
		k.mu.Unlock()
		if l.Busy == 0 && open == 0 {
			return l, nil
		}
		// An attempt whose outcome the queue keeps because its write
		// failed is open, but no handler runs for it any more.
		if always, failed := k.writes.count(); always && open <= l.Unwritten && failed > failedAtStart {
			return l, fmt.Errorf("%w: %d jobs are due or wait for their outcome to be written, but every write fails (Kit.FailWrites with n < 0), so the queue can neither claim them nor record them; call Kit.ClearFaults first",
				ErrStuck, l.Busy)
		}
		t := time.NewTimer(nudge)
		select {
		case <-changed:
		case <-t.C:
			k.Queue.Notify()
		case <-ctx.Done():
			t.Stop()
			return l, ctx.Err()
		}
		t.Stop()
		if n, _ := k.progress(); n != seen {
			deadline = time.Now().Add(k.timeout())
		} else if time.Now().After(deadline) {
			return l, fmt.Errorf("%w: %d jobs stayed ready or running (%d attempts without an outcome) for %s of real time with no event; a handler blocks (on a context only the mock clock can end? advance Kit.Clock) — events so far:\n%s",
				ErrStuck, l.Busy, open, k.timeout(), describe(k.Events()))
		}
	}
}

// Next runs what is due now; if nothing is, it first moves the clock to
// the next due time of a handled job. It returns once no handled job is
// ready or running. A queue with nothing due or scheduled is left as it
// is (Elapsed 0, Ran 0).
func (k *Kit) Next(ctx context.Context) (DrainResult, error) {
	m := k.mark()
	if err := k.start(); err != nil {
		return DrainResult{}, err
	}
	l, err := k.quiet(ctx)
	if err == nil && k.countSince(m.events, litequeue.EventStarted) == 0 && l.HasNext {
		k.Clock.Set(l.Next.In(k.Clock.Now().Location()))
		l, err = k.quiet(ctx)
	}
	return k.result(m, l.Unhandled), err
}

// mark is where a Drain, Next or Settle began: the number of events and of
// lost outcomes then, and the clock's time.
type mark struct {
	events, lost int
	t0           time.Time
}

func (k *Kit) mark() mark {
	k.mu.Lock()
	defer k.mu.Unlock()
	return mark{events: len(k.events), lost: len(k.lost), t0: k.Clock.Now()}
}

func (k *Kit) countSince(from int, typ litequeue.EventType) int {
	evs, _, _ := k.since(from)
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// Drain runs every due job through the registered handlers and moves the
// clock to each next due time, until no job of a registered handler is due,
// scheduled or running. Retries run on their real schedule, a snoozed job
// runs again at its snoozed due time (a job that snoozes forever ends as
// QueueConfig.MaxSnoozes says: its snoozes past the limit are failed
// attempts, until the retry policy gives up), and jobs that handlers
// enqueue run too. A job whose outcome was lost (LoseOutcome,
// DeliverTwice, a write failed by FailWrites) is due at the end of its
// lease, as its redelivery is. It starts the queue if the kit has not.
//
// Schedules: Drain first lets the scheduler enqueue the occurrences due at
// the clock's time (those a Clock.Add made due, as the schedule's Missed
// policy allows), and it stops at each occurrence on its way to a job's
// next due time, so that occurrences run on time instead of being jumped
// over and counted as missed. Schedules alone do not keep it going: it
// ends when no handled job is due, scheduled or running; Advance moves
// through a span of time, occurrences included.
//
// Drain is bounded: it stops with an error wrapping ErrLimit after
// Kit.MaxAttempts handler calls, and with ErrStuck when the queue makes no
// progress for Kit.Timeout of real time; the result reports what ran until
// then. Jobs whose queue and kind no registered handler serves are left
// alone and counted in DrainResult.Unhandled.
func (k *Kit) Drain(ctx context.Context) (DrainResult, error) {
	m := k.mark()
	if err := k.start(); err != nil {
		return DrainResult{}, err
	}
	for {
		if err := k.settleSchedules(ctx); err != nil {
			return k.result(m, 0), err
		}
		l, err := k.quiet(ctx)
		if err != nil {
			return k.result(m, l.Unhandled), err
		}
		if n := k.countSince(m.events, litequeue.EventStarted); n >= k.maxAttempts() {
			return k.result(m, l.Unhandled), fmt.Errorf("%w: Drain started %d handler calls (Kit.MaxAttempts)", ErrLimit, n)
		}
		if !l.HasNext {
			return k.result(m, l.Unhandled), nil
		}
		next := l.Next
		occ, ok, err := k.nextOccurrence(ctx)
		if err != nil {
			return k.result(m, l.Unhandled), err
		}
		if ok && occ.Before(next) {
			next = occ
		}
		k.Clock.Set(next.In(k.Clock.Now().Location()))
	}
}

// JobResult is how one job ended, as Settle reports it.
type JobResult struct {
	ID int64
	// Outcome is litequeue.EventSucceeded or litequeue.EventDead.
	Outcome litequeue.EventType
	// Attempts is the number of the last attempt.
	Attempts int
	// Elapsed is how far Settle moved the clock.
	Elapsed time.Duration
	// History is the job's events since New, oldest first.
	History []litequeue.Event
	// Job is the stored job after it ended: a dead letter with its attempt
	// history, or a completed job kept by Options.CompletedRetention. Zero
	// when the success deleted it.
	Job litequeue.JobInfo
}

// Settle drives job id until it succeeds or dies, moving the clock through
// its retries as Drain does (other due jobs run too), and returns how it
// ended. It fails if the job is not found and has no end among the events,
// if the queue runs out of work before the job ends (its queue and kind
// have no handler here), or at the bounds of Drain.
func (k *Kit) Settle(ctx context.Context, id int64) (JobResult, error) {
	m := k.mark()
	from, t0 := m.events, m.t0
	if err := k.start(); err != nil {
		return JobResult{}, err
	}
	for {
		if e, ok := k.end(id); ok {
			r := JobResult{ID: id, Outcome: e.Type, Attempts: e.Attempt, Elapsed: k.Clock.Now().Sub(t0), History: k.History(id)}
			if j, err := k.Queue.Job(ctx, id); err == nil {
				r.Job = j
			} else if !errors.Is(err, litequeue.ErrNotFound) {
				return r, err
			}
			return r, nil
		}
		if n := k.countSince(from, litequeue.EventStarted); n >= k.maxAttempts() {
			return JobResult{ID: id}, fmt.Errorf("%w: Settle started %d handler calls (Kit.MaxAttempts) and job %d has not ended", ErrLimit, n, id)
		}
		r, err := k.Next(ctx)
		if err != nil {
			return JobResult{ID: id}, err
		}
		if r.Ran == 0 {
			if _, ok := k.end(id); ok {
				continue
			}
			j, err := k.Queue.Job(ctx, id)
			if err != nil {
				return JobResult{ID: id}, fmt.Errorf("litequeuetest: settle job %d: %w", id, err)
			}
			return JobResult{ID: id, Job: j}, fmt.Errorf("litequeuetest: settle job %d: nothing is left to run, and the job is %s in queue %q with kind %q: no handler registered here serves that queue and kind",
				id, j.State, j.Queue, j.Kind)
		}
	}
}

// end returns the event that ended job id's latest life (after its latest
// requeue), if any.
func (k *Kit) end(id int64) (litequeue.Event, bool) {
	var last litequeue.Event
	var ok bool
	for _, e := range k.History(id) {
		switch e.Type {
		case litequeue.EventSucceeded, litequeue.EventDead:
			last, ok = e, true
		case litequeue.EventRequeued, litequeue.EventEnqueued:
			ok = false
		}
	}
	return last, ok
}

// describe lists events one a line for failure messages.
func describe(evs []litequeue.Event) string {
	if len(evs) == 0 {
		return "  (none)"
	}
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "  %s job %d (%s/%s) attempt %d", e.Type, e.JobID, e.Queue, e.Kind, e.Attempt)
		if e.Delay != 0 {
			fmt.Fprintf(&b, " delay %s", e.Delay)
		}
		if e.Err != nil {
			fmt.Fprintf(&b, ": %v", e.Err)
		}
		b.WriteByte('\n')
	}
	return strings.TrimSuffix(b.String(), "\n")
}
