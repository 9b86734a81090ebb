package litequeue

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/litequeue/litequeue/internal/kitlink"
	"github.com/litequeue/litequeue/internal/sqlite"
	"github.com/litequeue/litequeue/internal/store"
)

// Job is a unit of work: any JSON-encodable type with a Kind. The kind names
// the handler that runs it and is stored with the job, so it must stay stable
// across releases.
//
// A job type may also implement
//
//	QueueName() string          // the queue it goes to; default "default"
//	RetryPolicy() *RetryPolicy  // its own policy; nil means "use the queue's"
//	Timeout() time.Duration     // its attempts' timeout: > 0 replaces QueueConfig.Timeout, < 0 means none, 0 the queue's
//	UniqueOptions() *UniqueOptions // uniqueness of its jobs (see UniqueOptions); nil for none
//
// Kind and QueueName are called on the zero value by Register, so implement
// them on a value receiver and return constants.
type Job interface {
	Kind() string
}

type queueNamer interface{ QueueName() string }

type retryPolicer interface{ RetryPolicy() *RetryPolicy }

// DefaultQueue is the queue of a job type without a QueueName method.
const DefaultQueue = "default"

// Limits on names and keys, in bytes. A kind, queue or schedule name is
// valid UTF-8 of letters, marks, digits, punctuation, symbols and inner
// spaces: no control, format (such as U+202E) or other invisible
// character, and no space at either end. A key is valid UTF-8 without NUL.
// Anything else is refused with ErrInvalidJob.
const (
	MaxNameLen = 128 // kind and queue names
	MaxKeyLen  = 512 // idempotency keys
)

// Defaults of Options and QueueConfig fields left zero.
const (
	DefaultConcurrency       = 10
	DefaultVisibilityTimeout = 30 * time.Second
	DefaultBusyTimeout       = 5 * time.Second
	DefaultPollInterval      = 200 * time.Millisecond
	DefaultClaimBatch        = 400
	DefaultMaxPayloadBytes   = 1 << 20
	DefaultCleanupInterval   = time.Minute
)

// Durability says what a committed write survives.
type Durability int

const (
	// DurabilityFull (the default) syncs every commit to stable storage
	// (SQLite synchronous=FULL; on macOS also fullfsync, as fsync there
	// leaves the drive's cache unflushed): an Enqueue that returned nil
	// survives a power cut or an OS crash. With New, the application's own
	// commits (EnqueueTx, CompleteTx) are as durable as its connections'
	// synchronous setting, SQLite's default being FULL.
	DurabilityFull Durability = iota
	// DurabilityProcess (synchronous=NORMAL in WAL mode) survives the death
	// of the process. A power cut or an OS crash may lose the commits made
	// since the WAL was last synced to the device — SQLite syncs it at each
	// checkpoint, once the WAL holds wal_autocheckpoint pages (1000, about
	// 4 MB: a few hundred commits, which a quiet queue may take long to
	// reach), and at Close — and no more: what
	// survives is every commit up to some point, never a later commit
	// without an earlier one nor a completion without its transaction's
	// other writes, and the file is never corrupted. Faster on slow disks.
	// docs/edge.md says how the power-cut test proves both levels.
	DurabilityProcess
)

func (d Durability) synchronous() string {
	if d == DurabilityProcess {
		return "NORMAL"
	}
	return "FULL"
}

// Strategy is a queue's custom, error-aware retry strategy (BullMQ's
// backoffStrategy). It runs after a failed attempt that still has attempts
// left and is neither Permanent nor RetryAfter; it sees the failure and
// returns the decision, and may refuse to retry. f.Default holds what the
// policy's backoff would decide, so a strategy can return it unchanged for
// errors it does not care about.
type Strategy func(f Failure) RetryDecision

// Failure describes a failed attempt to a Strategy.
type Failure struct {
	Attempt int           // the failed attempt, 1 for the first try
	Err     error         // what the handler returned
	Job     JobInfo       // the job (payload as JSON)
	Policy  RetryPolicy   // the policy in force for the job
	Default RetryDecision // the policy's own decision
}

// QueueConfig configures one named queue. Make one with NewQueueConfig and
// change the fields you need; zero fields mean the documented defaults.
type QueueConfig struct {
	// Name of the queue. Required.
	Name string
	// Retry is the queue's retry policy, used for every job that has no
	// RetryPolicy method of its own (or whose method returns nil).
	// NewQueueConfig sets it to DefaultRetryPolicy(): one attempt, no
	// retries. THE TRAP: unless you set Retry, the first failure of a job is
	// final and it goes straight to the dead letters. ExponentialRetry(3) is
	// a sensible start.
	Retry RetryPolicy
	// Concurrency is the number of handlers of this queue that run at once
	// in this process. Default DefaultConcurrency (10).
	Concurrency int
	// Timeout bounds one attempt: the handler's context is cancelled when it
	// passes, and the attempt counts as failed. Zero means no timeout. A job
	// type's Timeout method (see Job) replaces it for that type.
	Timeout time.Duration
	// VisibilityTimeout is the lease a claim takes. The queue extends it
	// while the handler runs (every third of it); if the process dies the
	// job becomes claimable again once it lapses. When the Clock passes a
	// lease before its extension ran (a mock clock moved past it in one
	// step, a process stalled), another process may take the job, but this
	// one never does: its claims extend their own lapsed leases first.
	// Default DefaultVisibilityTimeout (30s).
	VisibilityTimeout time.Duration
	// Strategy, when set, decides retries after failures that have
	// attempts left (see Strategy). Nil uses the policy's backoff.
	Strategy Strategy
	// OnDead, when set, is called when a job of this queue gives up for
	// good (its attempts are used up, it failed permanently, a Strategy
	// refused it, or its last attempt was lost with its process) and
	// returns a follow-up job (nil for none) that is enqueued in the same
	// transaction that makes the job a dead letter: both happen or
	// neither, even across a crash, so business state waiting on the job
	// (an order left "pending") always hears of its end — handle the
	// follow-up kind to update it, with its own retries. dead describes the
	// job as the dead letter will be: State dead, its payload, attempt
	// count, last error (the final failure's, as stored), DeadReason,
	// FinishedAt, and Attempts, the history ending with the final attempt.
	// cause is the final failure. OnDead runs on the worker's goroutine
	// before the write (after one read of the job's row) and must not
	// block. A follow-up that does not validate, or an OnDead that panics,
	// is logged and the job is dead-lettered without it. A follow-up whose
	// idempotency key is held by a live job is not enqueued again; one that
	// is reports EventEnqueued once the burial committed. Nil means no
	// follow-up.
	OnDead func(dead JobInfo, cause error) (Job, *EnqueueOptions)
	// MaxSnoozes is how many times one job may Snooze (see Snooze) before
	// a further snooze counts as a failed attempt. Zero or negative means
	// DefaultMaxSnoozes (100). Requeueing a dead letter resets the count.
	MaxSnoozes int
}

// NewQueueConfig returns the default configuration of a queue: one attempt
// and no backoff (DefaultRetryPolicy — such a queue never retries), the
// default concurrency and visibility timeout, no job timeout, no strategy.
func NewQueueConfig(name string) QueueConfig {
	return QueueConfig{Name: name, Retry: DefaultRetryPolicy()}
}

func (c QueueConfig) withDefaults() QueueConfig {
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.VisibilityTimeout <= 0 {
		c.VisibilityTimeout = DefaultVisibilityTimeout
	}
	return c
}

// Options configures a Queue. A nil *Options, and every zero field, means the
// documented default.
type Options struct {
	// Clock is the time source for everything the queue does. Default: the
	// real clock. Tests pass clock.NewMock().
	Clock Clock
	// Rand is the random source for retry jitter. The queue serializes its
	// use. Default: a source seeded from the runtime's random generator.
	// Seed it (rand.New(rand.NewPCG(1, 2))) for reproducible schedules.
	Rand *rand.Rand
	// Logger receives a record for every state change of a job, with the
	// constant keys of the Log* constants. Default: discard.
	Logger *slog.Logger
	// Queues configures named queues. A queue not listed gets
	// NewQueueConfig(name) — which does not retry.
	Queues []QueueConfig
	// Durability of commits. Default DurabilityFull.
	Durability Durability
	// BusyTimeout is how long a statement waits for another connection's
	// lock before the store retries. Default DefaultBusyTimeout (5s).
	BusyTimeout time.Duration
	// PollInterval paces how a started queue notices that another
	// connection or process changed the file, to pick up jobs it did not
	// enqueue itself (in-process enqueues and due times wake workers at
	// once regardless). On SQLite the queue reads PRAGMA data_version (a
	// cheap read) when the operating system reports a change to the file
	// or its WAL (a few ms after the other commit), and every
	// 50×PollInterval (10s) without one, in case a change went unreported
	// (a file shared with a VM or container host); where the system gives
	// no notifications, and on Windows (where they can come late), it reads
	// it every PollInterval. So an idle queue on Linux, macOS or the BSDs
	// does not wake up every PollInterval. Default DefaultPollInterval
	// (200ms); negative disables watching. On PostgreSQL the queue LISTENs
	// instead: PollInterval is its poll while the listening connection is
	// down or hears nothing (not even its own probe: a pooler in
	// transaction mode), and while it listens the queue still looks for
	// work after 5×PollInterval (at least a second) without a notification,
	// in case one was lost. Negative disables both.
	PollInterval time.Duration
	// ClaimBatch is the most jobs one claim statement takes. Default
	// DefaultClaimBatch (400). A queue holds claimed beyond its busy
	// handlers up to two allowances of about what its handlers start in
	// 50ms of the Clock, measured as they run, each at most ClaimBatch, and
	// claims the next allowance while one still waits, so that the claim
	// overlaps the handlers' work. Fast handlers get large claims (fewer
	// statements, and on PostgreSQL fewer round trips and commits, per
	// job), while a queue whose jobs take longer holds little or nothing
	// ahead — jobs are not kept leased in one process while another has
	// free workers, and a crash costs few jobs that had not started (their
	// attempt was counted at claim): once the rate is measured, about 100ms
	// of work at most, and never more than 2 × ClaimBatch. A queue's first
	// claim, before any rate is known, takes its free handler slots and
	// about as many again (two allowances of half its slots, each at most
	// ClaimBatch).
	ClaimBatch int
	// CompletedRetention keeps succeeded jobs, in state completed, for this
	// long before they are deleted. Default 0: a job is deleted when it
	// succeeds.
	CompletedRetention time.Duration
	// MaxPayloadBytes is the largest encoded job accepted by Enqueue; larger
	// ones fail with ErrInvalidJob. Default DefaultMaxPayloadBytes (1 MiB);
	// negative means no limit.
	MaxPayloadBytes int
	// OnEvent, when set, receives every state change of a job (the same as
	// the log records) for metrics. It runs on a goroutine of its own, one
	// event at a time in the order the queue emitted them (so a job's
	// events arrive in order), never on the queue's writer or workers: a
	// slow hook does not slow the queue. Stop and Close return after every
	// event emitted before them was handed to it.
	OnEvent func(Event)
	// EventBuffer is how many events may wait for OnEvent. When the hook
	// falls that far behind, further events are dropped — counted by
	// Queue.DroppedEvents and reported in the log — rather than slowing the
	// queue. Default DefaultEventBuffer (4096).
	EventBuffer int
	// ReadOnly opens the file read-only, for inspection: writes fail with
	// ErrReadOnly and the file must exist. Open only.
	ReadOnly bool
	// StrictQueues makes Start fail with ErrQueueConfig when a queue that
	// has handlers has no entry in Queues (so it would run with
	// NewQueueConfig's defaults, which never retry — often a typo in a queue
	// name), or when an entry of Queues names a queue that no registered
	// handler uses. Default false: Start logs a warning and reports an
	// EventConfigWarning for each instead.
	StrictQueues bool
	// Pragmas are extra per-connection SQLite pragmas in modernc.org/sqlite
	// _pragma syntax, e.g. "cache_size(-20000)". Open only. Default none.
	// A pragma named here replaces the queue's own setting of it:
	// "synchronous(NORMAL)" overrides Durability, "busy_timeout(…)"
	// BusyTimeout. Queue.Pragmas reads back the values in effect.
	Pragmas []string
	// ProgressInterval is the least time between two writes of one job's
	// progress (Delivery.SetProgress): reports in between are coalesced,
	// the latest winning, and the last one of an attempt is always written.
	// Default DefaultProgressInterval (1s); zero or negative means the
	// default.
	ProgressInterval time.Duration
	// ListenURL is for queues on PostgreSQL: postgres.Open and postgres.New
	// take it as postgres.Options.ListenURL (see there). The SQLite Open
	// and New refuse it.
	//
	// Deprecated: Use postgres.Options.ListenURL with postgres.OpenWith or
	// postgres.NewWith.
	ListenURL string
}

func (o *Options) withDefaults() Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.Clock == nil {
		c.Clock = clock.New()
	}
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.BusyTimeout <= 0 {
		c.BusyTimeout = DefaultBusyTimeout
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.ClaimBatch <= 0 {
		c.ClaimBatch = DefaultClaimBatch
	}
	if c.MaxPayloadBytes == 0 {
		c.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if c.EventBuffer <= 0 {
		c.EventBuffer = DefaultEventBuffer
	}
	return c
}

func (o *Options) validate() error {
	seen := map[string]bool{}
	for _, qc := range o.Queues {
		if err := validName("queue", qc.Name); err != nil {
			return fmt.Errorf("litequeue: Options.Queues: %w", err)
		}
		if seen[qc.Name] {
			return fmt.Errorf("litequeue: Options.Queues: queue %q configured twice", qc.Name)
		}
		seen[qc.Name] = true
		if qc.Retry.MaxAttempts < 0 {
			return fmt.Errorf("litequeue: Options.Queues[%q].Retry.MaxAttempts is %d; use 1 or more", qc.Name, qc.Retry.MaxAttempts)
		}
		if qc.Concurrency < 0 {
			return fmt.Errorf("litequeue: Options.Queues[%q].Concurrency is %d; use 0 for the default (%d) or a positive number", qc.Name, qc.Concurrency, DefaultConcurrency)
		}
		if qc.Timeout < 0 {
			return fmt.Errorf("litequeue: Options.Queues[%q].Timeout is negative (%s); use 0 for no timeout", qc.Name, qc.Timeout)
		}
		if qc.VisibilityTimeout < 0 {
			return fmt.Errorf("litequeue: Options.Queues[%q].VisibilityTimeout is negative (%s); use 0 for the default (%s)", qc.Name, qc.VisibilityTimeout, DefaultVisibilityTimeout)
		}
	}
	if o.Durability != DurabilityFull && o.Durability != DurabilityProcess {
		return fmt.Errorf("litequeue: Options.Durability %d is not DurabilityFull or DurabilityProcess", o.Durability)
	}
	if o.CompletedRetention < 0 {
		return fmt.Errorf("litequeue: Options.CompletedRetention is negative (%s)", o.CompletedRetention)
	}
	return nil
}

// errListenURLOnSQLite is the SQLite Open's and New's refusal of
// Options.ListenURL.
var errListenURLOnSQLite = errors.New("litequeue: Options.ListenURL is for queues on PostgreSQL (package postgres); a queue file has no listening connection, leave it empty")

// Queue is a job queue on one SQLite file. It is safe for concurrent use.
type Queue struct {
	opts  Options
	clock Clock
	log   *slog.Logger

	store    store.Backend
	lite     *sqlite.Store // the SQLite store, nil on other backends
	readOnly bool

	randMu sync.Mutex
	rnd    *rand.Rand

	leaseSeq atomic.Int64
	cleanup  *alarm     // when the next retained completed job expires
	events   *eventPump // nil without Options.OnEvent
	hist     *history   // the per-minute history's counts in memory; nil on a read-only queue (history.go)
	// listeners are told every event, in order, in the goroutine that
	// emits it; they must not block.
	listeners []func(Event)
	// scheduleRound, when set (by tests), is told the clock time of each
	// finished scheduler round, the next wake-up it set (zero: none) and
	// how many wakes had been asked for when it began.
	scheduleRound atomic.Pointer[func(now, next time.Time, wakes uint64)]
	gate          enqueueGate // orders a job's EventEnqueued before its EventStarted (enqueue_order.go)
	txs           txEnqueues  // jobs enqueued in transactions not yet seen to commit (enqueue_tx.go)

	mu       sync.Mutex
	handlers map[string]*handler // by kind
	configs  map[string]QueueConfig
	run      *runState // non-nil while started
	closed   bool

	middleware []Middleware // see Use
	hubOnce    sync.Once
	hub        *hub // WatchProgress's watchers (progress.go)

	faults kitlink.Faults // the test kit's outcome hooks, Drop and Lost (testsupport.go); zero otherwise
}

// Open opens the queue file at name, creating it (and its schema) if it does
// not exist. A nil opts means defaults. Open refuses, leaving the file
// untouched: a directory, a FIFO, device or other file that is not a regular
// file (refused before it is opened, as is such a -wal or -shm beside the
// file), a path whose directory is missing (fs.ErrNotExist)
// or read-only (each error says so), a file this process cannot write
// (ErrReadOnly: open it with Options.ReadOnly to inspect it), a file that is
// not SQLite (ErrNotSQLite), a damaged one such as a
// truncated queue file (ErrCorrupt), another application's SQLite file
// (ErrNotLitequeue), a file of a newer schema version (ErrSchemaTooNew), a
// file whose queue tables are not the tables its schema's migrations made
// (views, other columns, triggers: ErrNotLitequeue naming the object), and,
// unless Options.ReadOnly, a file whose jobs were moved to PostgreSQL
// (ErrMoved, a *MovedError). An older schema is migrated. The file is put in
// WAL mode.
//
// An empty (0-byte) file, and a SQLite file with no tables at all, open as a
// new queue: that is what a process killed inside its first Open leaves (the
// schema is created in one transaction, so it is there whole or not at all).
func Open(name string, opts *Options) (*Queue, error) {
	o, st, err := openStore(name, opts)
	if err != nil {
		return nil, err
	}
	return newQueue(o, st, st, o.ReadOnly), nil
}

// openStore checks opts and opens the SQLite store of Open; it returns
// opts with their defaults.
func openStore(name string, opts *Options) (Options, *sqlite.Store, error) {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return o, nil, err
	}
	if o.ListenURL != "" {
		return o, nil, errListenURLOnSQLite
	}
	st, err := sqlite.Open(name, o.sqliteOptions())
	if err != nil {
		return o, nil, wrapf("%w", err)
	}
	return o, st, nil
}

// New returns a queue that keeps its tables (named lq_*) in the application's
// own SQLite database db, opened with the modernc.org/sqlite driver ("sqlite").
// Use it to enqueue inside the application's transactions (EnqueueTx) and to
// complete a job in the same transaction as the handler's writes
// (Delivery.CompleteTx).
//
// The queue keeps one connection of db for its writer, so db must allow at
// least two open connections. db's connections must have a busy timeout, so
// that the application's own writes wait for the queue's instead of failing
// at once with SQLITE_BUSY: New refuses a db whose connections have
// busy_timeout 0 (SQLite's default) and says how to set it, for example
// "file:app.db?_pragma=busy_timeout(5000)". New puts the file in WAL mode.
// Close does not close db.
func New(db *sql.DB, opts *Options) (*Queue, error) {
	if db == nil {
		return nil, errors.New("litequeue: New: nil *sql.DB")
	}
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.ReadOnly {
		return nil, errors.New("litequeue: New: Options.ReadOnly applies to Open only")
	}
	if o.ListenURL != "" {
		return nil, errListenURLOnSQLite
	}
	st, err := sqlite.New(db, o.sqliteOptions())
	if err != nil {
		return nil, wrapf("%w", err)
	}
	return newQueue(o, st, st, false), nil
}

func (o *Options) sqliteOptions() sqlite.Options {
	return sqlite.Options{BusyTimeout: o.BusyTimeout, Synchronous: o.Durability.synchronous(),
		Pragmas: o.Pragmas, ReadOnly: o.ReadOnly, Logger: o.Logger}
}

// newQueue makes a queue on st; lite is st when it is the SQLite store.
func newQueue(o Options, st store.Backend, lite *sqlite.Store, readOnly bool) *Queue {
	q := &Queue{
		opts:     o,
		clock:    o.Clock,
		log:      o.Logger,
		store:    st,
		lite:     lite,
		readOnly: readOnly,
		rnd:      o.Rand,
		handlers: map[string]*handler{},
		configs:  map[string]QueueConfig{},
		cleanup:  newAlarm(o.Clock),
	}
	for _, qc := range o.Queues {
		q.configs[qc.Name] = qc.withDefaults()
	}
	if o.OnEvent != nil {
		q.events = newEventPump(o.OnEvent, o.EventBuffer, o.Logger)
	}
	if !readOnly {
		q.hist = newHistory(st, o.Logger)
		q.listeners = append(q.listeners, q.hist.record)
	}
	q.leaseSeq.Store(rand.Int64N(1 << 40))
	return q
}

// NewWithBackend returns a queue on b, a storage backend of this module
// (package postgres opens its queues with it); applications use Open, New or
// postgres.Open. A nil opts means defaults. Options.ReadOnly needs a backend
// opened read-only: the queue then refuses writes itself and keeps no
// history. NewWithBackend validates opts as Open does and starts nothing.
func NewWithBackend(b store.Backend, opts *Options) (*Queue, error) {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.ReadOnly {
		if ro, ok := b.(interface{ ReadOnly() bool }); !ok || !ro.ReadOnly() {
			return nil, errors.New("litequeue: Options.ReadOnly needs a store opened read-only")
		}
	}
	return newQueue(o, b, nil, o.ReadOnly), nil
}

// config returns the configuration of the named queue.
func (q *Queue) config(name string) QueueConfig {
	q.mu.Lock()
	defer q.mu.Unlock()
	if c, ok := q.configs[name]; ok {
		return c
	}
	return NewQueueConfig(name).withDefaults()
}

// Close stops the workers (as Stop with a context that never ends, so running
// handlers are waited for), writes the pending completions and the
// per-minute history's counts, and closes the database handles the queue
// opened. Close on a closed queue returns nil.
//
// A queue made by Open (not read-only) checkpoints the WAL into the file and
// truncates it before closing, so the .db file alone holds every job: it can
// be copied once Close returns. If another connection (another process)
// is reading the file at that moment the checkpoint does what it can
// without waiting, and the rest stays in the -wal until the next checkpoint.
func (q *Queue) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	running := q.run != nil
	q.mu.Unlock()
	var errs []error
	if running {
		errs = append(errs, q.Stop(context.Background()))
	}
	// Counts of events since the last flush (enqueues of a queue that never
	// started, or after Stop) go into the history before the store closes.
	_ = q.FlushHistory(context.Background())
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cleanup.stop()
	q.closeWatchers()
	q.closeTx(q.opts.BusyTimeout)
	errs = append(errs, q.store.Close())
	q.closeEvents()
	return errors.Join(errs...)
}

func (q *Queue) writable() error {
	q.mu.Lock()
	closed := q.closed
	q.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if q.readOnly {
		return ErrReadOnly
	}
	return nil
}

func (q *Queue) nextLease() int64 { return q.leaseSeq.Add(1) }

func (q *Queue) randDecide(p RetryPolicy, attempt int) RetryDecision {
	q.randMu.Lock()
	defer q.randMu.Unlock()
	return p.DecideRand(attempt, q.rnd)
}

// EnqueueOptions adjusts one enqueue. A nil *EnqueueOptions means none.
type EnqueueOptions struct {
	// Delay makes the job due Delay after now. Negative is an error
	// (ErrInvalidJob). Zero means now. Not together with RunAt.
	Delay time.Duration
	// RunAt makes the job due at RunAt. Zero means now. A time in the past
	// makes the job due at once, ordered by that time among jobs of its
	// priority; a time before 1970 counts as 1970-01-01 UTC, the earliest
	// due time the queue stores (such jobs run first, in id order, and show
	// that time). Times before 1678 or after 2262-04-11 (outside an int64 of
	// Unix nanoseconds) are refused with ErrInvalidJob.
	RunAt time.Time
	// Priority orders due jobs of a queue: lower runs first. Default 0;
	// negative values run before the default.
	Priority int
	// Key is an idempotency key, at most MaxKeyLen bytes of valid UTF-8
	// without NUL (ErrInvalidJob otherwise). Enqueuing with the
	// key of a job that is still pending, scheduled or running enqueues
	// nothing and returns that job's id with a *DuplicateError
	// (errors.Is(err, ErrDuplicate)). Once that job succeeded or died the
	// key is free again. Empty means no key.
	Key string
	// Queue overrides the job type's QueueName. Empty means the job's own.
	Queue string
	// Unique makes the job unique by kind and payload (see UniqueOptions),
	// overriding the job type's UniqueOptions method. Nil means the job
	// type's, if any. It works together with Key: the key is checked first.
	Unique *UniqueOptions
}

// jobQueue returns the queue a job of this type goes to by default.
func jobQueue(j Job) string {
	if qn, ok := j.(queueNamer); ok {
		return qn.QueueName()
	}
	return DefaultQueue
}

// minRunAt and maxRunAt bound the times an int64 of Unix nanoseconds holds.
// earliestDue is the earliest due time the queue stores: a RunAt before it
// counts as it, so that every stored time lies between the Unix epoch and
// maxRunAt and any two differ by less than the longest time.Duration.
var (
	minRunAt    = time.Unix(0, -1<<63)
	maxRunAt    = time.Unix(0, 1<<63-1)
	earliestDue = time.Unix(0, 0)
)

func (q *Queue) prepare(job Job, o *EnqueueOptions) (store.NewJob, error) {
	if job == nil {
		return store.NewJob{}, fmt.Errorf("%w: nil job", ErrInvalidJob)
	}
	if o == nil {
		o = &EnqueueOptions{}
	}
	nj := store.NewJob{Kind: job.Kind(), Queue: o.Queue, Priority: o.Priority, Key: o.Key}
	if nj.Queue == "" {
		nj.Queue = jobQueue(job)
	}
	if err := validName("kind", nj.Kind); err != nil {
		return store.NewJob{}, err
	}
	if err := validName("queue", nj.Queue); err != nil {
		return store.NewJob{}, err
	}
	if err := validText("idempotency key", nj.Key, MaxKeyLen); err != nil {
		return store.NewJob{}, err
	}
	if o.Delay < 0 {
		return store.NewJob{}, fmt.Errorf("%w: negative delay %s; use 0 to run now", ErrInvalidJob, o.Delay)
	}
	if o.Delay != 0 && !o.RunAt.IsZero() {
		return store.NewJob{}, fmt.Errorf("%w: both Delay and RunAt are set; set one", ErrInvalidJob)
	}
	now := q.clock.Now()
	nj.CreatedAt = now.UnixNano()
	due := now
	switch {
	case !o.RunAt.IsZero():
		if o.RunAt.After(maxRunAt) || o.RunAt.Before(minRunAt) {
			return store.NewJob{}, fmt.Errorf("%w: RunAt %s is outside the years 1678–2262 that the queue can store", ErrInvalidJob, o.RunAt)
		}
		due = o.RunAt
		if due.Before(earliestDue) {
			due = earliestDue
		}
	case o.Delay > 0:
		if now.After(maxRunAt.Add(-o.Delay)) {
			return store.NewJob{}, fmt.Errorf("%w: delay %s runs past year 2262", ErrInvalidJob, o.Delay)
		}
		due = now.Add(o.Delay)
	}
	nj.VisibleAt = due.UnixNano()
	payload, err := json.Marshal(job)
	if err != nil {
		return store.NewJob{}, fmt.Errorf("%w: job of kind %q does not encode as JSON: %v", ErrInvalidJob, nj.Kind, err)
	}
	if q.opts.MaxPayloadBytes > 0 && len(payload) > q.opts.MaxPayloadBytes {
		return store.NewJob{}, fmt.Errorf("%w: job of kind %q encodes to %d bytes, over Options.MaxPayloadBytes (%d); store large data elsewhere and enqueue a reference",
			ErrInvalidJob, nj.Kind, len(payload), q.opts.MaxPayloadBytes)
	}
	if err := checkPayloadText(nj.Kind, job, payload); err != nil {
		return store.NewJob{}, err
	}
	nj.Payload = payload
	if err := prepareUnique(job, o, &nj); err != nil {
		return store.NewJob{}, err
	}
	return nj, nil
}

// Enqueue stores job and returns its id, which stays the job's identity
// through retries, dead letters and requeues. When Enqueue returns nil the job
// is committed with the queue's Durability. A nil opts means run now with
// priority 0 and no key.
//
// When the job's queue has an idle worker in this process, the enqueue's own
// transaction also claims the new job and hands it to that worker, unless an
// older or more urgent job is due (then a queue file's transaction claims
// that one instead, and a PostgreSQL queue's claims nothing), so a job may
// start before Enqueue returns; whenever the new job was not handed off, the
// queue's dispatcher is woken at once. Either way jobs start in priority,
// then due-time order.
//
// Errors: ErrInvalidJob (nothing written) when the job or opts are invalid;
// ErrStorageFull (nothing written) when the disk is full;
// a *DuplicateError (errors.Is ErrDuplicate) together with the existing job's
// id when opts.Key is held by a live job; ErrClosed, ErrReadOnly.
func (q *Queue) Enqueue(ctx context.Context, job Job, opts *EnqueueOptions) (int64, error) {
	if err := q.writable(); err != nil {
		return 0, err
	}
	nj, err := q.prepare(job, opts)
	if err != nil {
		return 0, err
	}
	// From the insert's commit on a worker may start the job; it waits for
	// this enqueue's EventEnqueued.
	q.gate.enter(nj)
	reported := false // by the hand-off, which closed the gate
	defer func() {
		if !reported {
			q.gate.leave(nj)
		}
	}()
	enqueued := Event{Type: EventEnqueued, Queue: nj.Queue, Kind: nj.Kind, Delay: time.Duration(nj.VisibleAt - nj.CreatedAt)}
	// A job due now, of a kind whose pool here is idle, is claimed in the
	// same transaction and handed straight to a worker.
	var direct *pool
	if nj.VisibleAt <= nj.CreatedAt {
		q.mu.Lock()
		if q.run != nil {
			direct = q.run.reserveDirect(nj.Queue, nj.Kind)
		}
		q.mu.Unlock()
	}
	var id int64
	var d *delivery
	if direct != nil {
		handed := true
		cq := direct.safeClaimQuery(1)
		id, err = q.store.InsertClaim(ctx, nj, cq, func(cs []store.Claimed) {
			// On the store's commit path, in commit order with the
			// dispatchers' claims.
			if len(cs) > 0 {
				d = direct.delivery(cs[0], cq)
				if cs[0].New && nj.Unique == nil {
					// The new job goes straight to a worker: it is
					// reported first, here, and its worker need not wait
					// for this goroutine.
					reported = true
					enqueued.JobID = d.id
					q.supersedeTx([]int64{d.id})
					q.emit(enqueued)
					q.gate.leave(nj)
				}
				q.claimedTx([]*delivery{d})
				handed = direct.handOff(d)
			}
		})
		direct.unreserve()
		if !handed {
			direct.release([]*delivery{d})
		}
	} else {
		var ids []int64
		var dups []error
		ids, dups, err = q.store.Insert(ctx, store.Tx{}, []store.NewJob{nj})
		if err == nil {
			id, err = ids[0], dups[0]
		}
	}
	if uid, uerr, handled := q.settleUnique(job, opts, &nj, id, err); handled {
		return uid, uerr
	}
	if err != nil {
		var dup *DuplicateError
		if errors.As(err, &dup) {
			q.emit(Event{Type: EventDuplicate, JobID: dup.ID, Queue: nj.Queue, Kind: nj.Kind})
			return dup.ID, err
		}
		return 0, wrapf("litequeue: enqueue %s: %w", nj.Kind, err)
	}
	if !reported {
		enqueued.JobID = id
		q.supersedeTx([]int64{id})
		q.emit(enqueued)
	}
	switch {
	case nj.VisibleAt > nj.CreatedAt:
		q.dueAt(nj.Queue, nj.Kind, nj.VisibleAt)
	case d == nil || d.id != id:
		// The job waits in the store: the hand-off took a more urgent one,
		// or none.
		q.wake(nj.Queue)
	}
	return id, nil
}

// EnqueueTx is Enqueue inside the application's transaction tx, on the
// database the queue was made with by New (the transactional outbox): the
// job exists if and only if tx commits. Workers of this process start the
// job promptly after the commit, with no call to Notify: EnqueueTx wakes the
// job's queue at once, and the wake-up's claim waits for the write lock that
// tx holds until it commits or rolls back (a rolled-back job is simply not
// found). Other processes notice the job promptly too (see
// Options.PollInterval).
//
// The job's EventEnqueued comes once the queue sees tx committed, and
// never for a tx that rolled back: when this process claims the job
// (before its EventStarted), or when a watcher of this queue finds out —
// on a queue file once tx has released the write lock, on PostgreSQL by
// tx's transaction id, which EnqueueTx reads on tx (one more statement),
// at least every PollInterval while tx is open.
func (q *Queue) EnqueueTx(ctx context.Context, tx *sql.Tx, job Job, opts *EnqueueOptions) (int64, error) {
	if tx == nil {
		return 0, ErrNoTx
	}
	if err := q.writable(); err != nil {
		return 0, err
	}
	nj, err := q.prepare(job, opts)
	if err != nil {
		return 0, err
	}
	ids, dups, err := q.store.Insert(ctx, store.SQLTx(tx), []store.NewJob{nj})
	if err == nil {
		if uid, uerr, handled := q.settleUnique(job, opts, &nj, ids[0], dups[0]); handled {
			return uid, uerr
		}
	}
	if err == nil && dups[0] != nil {
		return ids[0], dups[0]
	}
	if err != nil {
		return 0, wrapf("litequeue: enqueue %s: %w", nj.Kind, err)
	}
	id := ids[0]
	q.enqueuedTx(ctx, tx, []store.NewJob{nj}, ids, dups)
	// On SQLite tx holds the write lock from the insert until it ends, and a
	// claim begins with BEGIN IMMEDIATE: the claim this wakes runs after tx's
	// commit and sees the job, or after its rollback and finds nothing. On
	// PostgreSQL the commit's notification wakes the workers.
	q.wake(nj.Queue)
	return id, nil
}

// BatchItem is one job of EnqueueBatch with its options (nil for none).
type BatchItem struct {
	Job     Job
	Options *EnqueueOptions
}

// EnqueueBatch stores many jobs in one transaction: all of them or, on error,
// none. ids[i] is the id of items[i]. An item whose key is held by a live job
// (or by an earlier item of the batch) is not inserted; ids[i] is the holder's
// id and the returned error joins a *DuplicateError per such item — the rest
// of the batch is committed. Any other error (including an invalid item,
// reported with its index) commits nothing.
func (q *Queue) EnqueueBatch(ctx context.Context, items []BatchItem) ([]int64, error) {
	if err := q.writable(); err != nil {
		return nil, err
	}
	jobs, err := q.prepareBatch(items)
	if err != nil {
		return nil, err
	}
	q.gate.enter(jobs...)
	defer q.gate.leave(jobs...)
	ids, dups, err := q.store.Insert(ctx, store.Tx{}, jobs)
	if err != nil {
		return nil, wrapf("litequeue: enqueue batch: %w", err)
	}
	q.supersedeTx(ids)
	queues := map[string]bool{}
	for i, nj := range jobs {
		if uid, uerr, handled := q.settleUnique(items[i].Job, items[i].Options, &jobs[i], ids[i], dups[i]); handled {
			if uerr != dups[i] {
				dups[i] = fmt.Errorf("batch item %d: %w", i, uerr)
			}
			ids[i] = uid
			continue
		}
		if dups[i] != nil {
			q.emit(Event{Type: EventDuplicate, JobID: ids[i], Queue: nj.Queue, Kind: nj.Kind})
			continue
		}
		if nj.VisibleAt > nj.CreatedAt {
			q.dueAt(nj.Queue, nj.Kind, nj.VisibleAt)
		} else {
			queues[nj.Queue] = true
		}
		q.emit(Event{Type: EventEnqueued, JobID: ids[i], Queue: nj.Queue, Kind: nj.Kind, Delay: time.Duration(nj.VisibleAt - nj.CreatedAt)})
	}
	for name := range queues {
		q.wake(name)
	}
	return ids, errors.Join(dups...)
}

// EnqueueBatchTx is EnqueueBatch inside the application's transaction tx (see
// EnqueueTx): the jobs exist if and only if tx commits, and this process's
// workers start them promptly after the commit without a call to Notify.
func (q *Queue) EnqueueBatchTx(ctx context.Context, tx *sql.Tx, items []BatchItem) ([]int64, error) {
	if tx == nil {
		return nil, ErrNoTx
	}
	if err := q.writable(); err != nil {
		return nil, err
	}
	jobs, err := q.prepareBatch(items)
	if err != nil {
		return nil, err
	}
	ids, dups, err := q.store.Insert(ctx, store.SQLTx(tx), jobs)
	if err != nil {
		return nil, wrapf("litequeue: enqueue batch: %w", err)
	}
	for i := range jobs {
		if uid, uerr, handled := q.settleUnique(items[i].Job, items[i].Options, &jobs[i], ids[i], dups[i]); handled && uerr != dups[i] {
			ids[i], dups[i] = uid, fmt.Errorf("batch item %d: %w", i, uerr)
		}
	}
	q.enqueuedTx(ctx, tx, jobs, ids, dups)
	queues := map[string]bool{}
	for _, nj := range jobs {
		if !queues[nj.Queue] {
			queues[nj.Queue] = true
			q.wake(nj.Queue) // as in EnqueueTx: the claim waits for tx to end
		}
	}
	return ids, errors.Join(dups...)
}

func (q *Queue) prepareBatch(items []BatchItem) ([]store.NewJob, error) {
	jobs := make([]store.NewJob, len(items))
	for i, it := range items {
		nj, err := q.prepare(it.Job, it.Options)
		if err != nil {
			return nil, fmt.Errorf("batch item %d: %w", i, err)
		}
		jobs[i] = nj
	}
	return jobs, nil
}

// Notify wakes this process's idle workers to look for due jobs now, for
// example after another connection of this process wrote jobs without the
// queue (EnqueueTx and EnqueueBatchTx need no Notify). Without it they
// notice when the queue's watch for other connections' writes does (see
// Options.PollInterval).
func (q *Queue) Notify() {
	q.mu.Lock()
	run := q.run
	q.mu.Unlock()
	if run != nil {
		run.wakeAll()
	}
}

// wake tells the named queue's dispatcher (if running here) to claim.
func (q *Queue) wake(queue string) {
	q.mu.Lock()
	run := q.run
	q.mu.Unlock()
	if run != nil {
		run.wake(queue)
	}
}

// dueAt sets the wake-up of the named queue's dispatcher (if it runs here
// and handles kind) to claim at the Unix nanosecond due, unless it is set
// earlier: a delayed job starts on time without a dispatcher round trip.
func (q *Queue) dueAt(queue, kind string, due int64) {
	q.mu.Lock()
	run := q.run
	q.mu.Unlock()
	if run == nil {
		return
	}
	if p, ok := run.pools[queue]; ok && p.kinds[kind] {
		p.dueAt(time.Unix(0, due))
	}
}
