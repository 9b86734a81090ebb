package litequeue

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/litequeue/litequeue/internal/sqlite"
)

// A queue's options (Options) and its named queues' configurations
// (QueueConfig), with their defaults and validation.

// Defaults of Options and QueueConfig fields left zero.
const (
	DefaultConcurrency       = 10
	DefaultVisibilityTimeout = 30 * time.Second
	DefaultBusyTimeout       = 5 * time.Second
	DefaultPollInterval      = 200 * time.Millisecond
	DefaultClaimBatch        = 400
	DefaultMaxPayloadBytes   = 1 << 20
	DefaultCleanupInterval   = time.Minute
	DefaultHeartbeatInterval = 10 * time.Second
	DefaultProcessRetention  = time.Hour
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
	// OnCancel, when set, is called for each job of this queue that Cancel
	// or CancelJobs cancels (pending, scheduled or running) and returns a
	// follow-up job (nil for none) that is enqueued in the same transaction
	// that cancels the job: both happen or neither, as with OnDead, so
	// business state waiting on the job hears that it will never run. A
	// job is cancelled once, so OnCancel is asked once per job (a cancel
	// the store runs again after a conflict reuses the first answer).
	// cancelled describes the job as the cancel leaves it: State cancelled,
	// its payload, attempt count, priority, key, CreatedAt and FinishedAt
	// (the cancel's time). OnCancel runs inside the cancelling transaction,
	// on the goroutine that called Cancel: it must not block nor use the
	// queue. Only the Queue that cancels asks it: a cancel made by a
	// process without this QueueConfig (lqinspect, another program)
	// enqueues no follow-up. A follow-up that does not validate, or an
	// OnCancel that panics, is logged and the job is cancelled without it;
	// one whose idempotency key is held by a live job is not enqueued
	// again; one that is reports EventEnqueued once the cancel committed,
	// after the job's EventCancelled when that is reported at once.
	OnCancel func(cancelled JobInfo) (Job, *EnqueueOptions)
	// CompletedRetention, DeadRetention and CancelledRetention replace the
	// Options fields of the same names for this queue's jobs: zero uses
	// Options' value, KeepForever keeps the jobs until deleted by hand, and
	// KeepNone (CompletedRetention only) deletes the queue's jobs when they
	// succeed even when Options.CompletedRetention keeps others'. Every
	// process started on the same database should configure the same
	// retention: each one's maintenance deletes by its own configuration.
	CompletedRetention time.Duration
	DeadRetention      time.Duration
	CancelledRetention time.Duration
	// MaxSnoozes is how many times one job may Snooze (see Snooze) before
	// a further snooze counts as a failed attempt. Zero or negative means
	// DefaultMaxSnoozes (100). Requeueing a dead letter resets the count.
	MaxSnoozes int
	// Limits are the queue's flow-control limits across every process on
	// the database (see QueueLimits). Open stores them when any is set; a
	// zero Limits leaves the stored ones alone (Queue.SetLimits changes
	// them live).
	Limits QueueLimits
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
	// 10ms of the Clock (or in twice the time its last claim took, when
	// that is longer, up to 50ms), measured as they run, each at most
	// ClaimBatch, and at least one job while they start one per 50ms; it
	// claims the next allowance while one still waits, so that the claim
	// overlaps the handlers' work. Fast handlers get large claims (fewer
	// statements, and on PostgreSQL fewer round trips and commits, per
	// job), while a queue whose jobs take longer holds little or nothing
	// ahead — jobs are not kept leased in one process while another has
	// free workers, and a crash costs few jobs that had not started (their
	// attempt was counted at claim): once the rate is measured, about 20ms
	// of work (100ms behind slow claims) or one job each for two handler
	// slots, whichever is more, and never more than 2 × ClaimBatch. A queue's first
	// claim, before any rate is known, takes its free handler slots and
	// about as many again (two allowances of half its slots, each at most
	// ClaimBatch).
	ClaimBatch int
	// CompletedRetention keeps succeeded jobs, in state completed, for this
	// long before they are deleted. Default 0: a job is deleted when it
	// succeeds. KeepForever keeps them until deleted by hand. A queue's
	// QueueConfig.CompletedRetention replaces it for that queue.
	CompletedRetention time.Duration
	// DeadRetention deletes dead letters this long after they died, and
	// CancelledRetention cancelled jobs this long after their cancel, with
	// their history, in the started queue's maintenance (transactions of
	// at most 1,000 jobs). Default 0: kept until deleted by hand
	// (DeleteJobs, PurgeCancelled, lqinspect purge), as is KeepForever. A
	// queue's QueueConfig.DeadRetention and CancelledRetention replace them
	// for that queue.
	DeadRetention      time.Duration
	CancelledRetention time.Duration
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

	// HeartbeatInterval is how often a started queue writes its heartbeat
	// to its row of the processes registry (Queue.Processes). A process
	// whose heartbeat is older than DeadAfterBeats intervals is shown dead.
	// Zero means DefaultHeartbeatInterval; negative is an error.
	HeartbeatInterval time.Duration
	// ProcessRetention is how long the row of a dead process (one that
	// stopped without Stop, as after a kill -9) stays in the registry
	// after its last heartbeat; the heartbeats of the live processes
	// delete it then. Zero means DefaultProcessRetention; negative is an
	// error.
	ProcessRetention time.Duration
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
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.ProcessRetention == 0 {
		c.ProcessRetention = DefaultProcessRetention
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
		if qc.CompletedRetention < 0 && qc.CompletedRetention != KeepNone {
			return fmt.Errorf("litequeue: Options.Queues[%q].CompletedRetention is negative (%s); use KeepNone to keep none", qc.Name, qc.CompletedRetention)
		}
		if qc.DeadRetention < 0 || qc.CancelledRetention < 0 {
			return fmt.Errorf("litequeue: Options.Queues[%q]: DeadRetention (%s) and CancelledRetention (%s) may not be negative; use 0 for Options' value or KeepForever",
				qc.Name, qc.DeadRetention, qc.CancelledRetention)
		}
		if err := qc.Limits.validate(qc.Name); err != nil {
			return fmt.Errorf("litequeue: Options.Queues[%q].Limits: %w", qc.Name, err)
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
	if o.DeadRetention < 0 || o.CancelledRetention < 0 {
		return fmt.Errorf("litequeue: Options.DeadRetention (%s) and CancelledRetention (%s) may not be negative; use 0 to keep the jobs", o.DeadRetention, o.CancelledRetention)
	}
	if o.HeartbeatInterval < 0 || o.ProcessRetention < 0 {
		return fmt.Errorf("litequeue: Options.HeartbeatInterval (%s) and ProcessRetention (%s) may not be negative; use 0 for the defaults (%s, %s)",
			o.HeartbeatInterval, o.ProcessRetention, DefaultHeartbeatInterval, DefaultProcessRetention)
	}
	return nil
}

// errListenURLOnSQLite is the SQLite Open's and New's refusal of
// Options.ListenURL.
var errListenURLOnSQLite = errors.New("litequeue: Options.ListenURL is for queues on PostgreSQL (package postgres); a queue file has no listening connection, leave it empty")

func (o *Options) sqliteOptions() sqlite.Options {
	return sqlite.Options{BusyTimeout: o.BusyTimeout, Synchronous: o.Durability.synchronous(),
		Pragmas: o.Pragmas, ReadOnly: o.ReadOnly, Logger: o.Logger}
}
