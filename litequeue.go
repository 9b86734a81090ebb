package litequeue

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/benbjohnson/clock"
)

// Job is a unit of work: any JSON-encodable type with a Kind. The kind names
// the handler that runs it and is stored with the job, so it must stay stable
// across releases.
//
// A job type may also implement
//
//	QueueName() string          // the queue it goes to; default "default"
//	RetryPolicy() *RetryPolicy  // its own policy; nil means "use the queue's"
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

// Limits on names and keys, in bytes.
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
	DefaultClaimBatch        = 100
	DefaultMaxPayloadBytes   = 1 << 20
	DefaultCleanupInterval   = time.Minute
)

// Durability says what a committed write survives.
type Durability int

const (
	// DurabilityFull (the default) syncs every commit to stable storage
	// (SQLite synchronous=FULL): an Enqueue that returned nil survives a
	// power cut or an OS crash.
	DurabilityFull Durability = iota
	// DurabilityProcess (synchronous=NORMAL in WAL mode) survives the death
	// of the process but may lose the last commits to a power cut or an OS
	// crash. The file is never corrupted either way. Faster on slow disks.
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
	// passes, and the attempt counts as failed. Zero means no timeout.
	Timeout time.Duration
	// VisibilityTimeout is the lease a claim takes. The queue extends it
	// while the handler runs; if the process dies the job becomes claimable
	// again once it lapses. Default DefaultVisibilityTimeout (30s).
	VisibilityTimeout time.Duration
	// Strategy, when set, decides retries after failures that have
	// attempts left (see Strategy). Nil uses the policy's backoff.
	Strategy Strategy
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
	// PollInterval is how often the queue checks (with PRAGMA data_version,
	// a cheap read) whether another connection or process changed the file,
	// to pick up jobs it did not enqueue itself. In-process enqueues and due
	// times wake workers at once regardless. Default DefaultPollInterval
	// (200ms); negative disables polling.
	PollInterval time.Duration
	// ClaimBatch is the most jobs one claim statement takes. Default
	// DefaultClaimBatch (100). A queue claims at most its free handler slots
	// plus this many, so jobs wait leased in memory only briefly.
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
	// the log records) for metrics. It is called synchronously from the
	// queue's goroutines and must not block.
	OnEvent func(Event)
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

// Queue is a job queue on one SQLite file. It is safe for concurrent use.
type Queue struct {
	opts  Options
	clock Clock
	log   *slog.Logger

	db    *sql.DB // reads (and, from New, the application's pool)
	wdb   *sql.DB // the writer's own pool, from Open
	owned bool    // Open made db and wdb; Close closes them
	wconn *sql.Conn
	w     *writer // nil when read-only

	randMu sync.Mutex
	rnd    *rand.Rand

	leaseSeq atomic.Int64
	cleanup  *alarm // when the next retained completed job expires

	mu       sync.Mutex
	handlers map[string]*handler // by kind
	configs  map[string]QueueConfig
	run      *runState // non-nil while started
	closed   bool
}

// Open opens the queue file at name, creating it (and its schema) if it does
// not exist. A nil opts means defaults. Open refuses, leaving the file
// untouched: a directory, a path whose directory is missing (fs.ErrNotExist)
// or read-only (each error says so), a file this process cannot write
// (ErrReadOnly: open it with Options.ReadOnly to inspect it), a file that is
// not SQLite (ErrNotSQLite), a damaged one such as a
// truncated queue file (ErrCorrupt), another application's SQLite file
// (ErrNotLitequeue), and a file of a newer schema version (ErrSchemaTooNew).
// An older schema is migrated. The file is put in WAL mode.
//
// An empty (0-byte) file, and a SQLite file with no tables at all, open as a
// new queue: that is what a process killed inside its first Open leaves (the
// schema is created in one transaction, so it is there whole or not at all).
func Open(name string, opts *Options) (*Queue, error) {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	if err := checkFile(name, o.ReadOnly); err != nil {
		return nil, err
	}
	ctx := context.Background()
	rdb, err := sql.Open("sqlite", dsn(name, &o, true))
	if err != nil {
		return nil, err
	}
	rdb.SetMaxOpenConns(4)
	if o.ReadOnly {
		version, foreign, err := identify(ctx, rdb)
		if err != nil && onReadOnlyMedia(name, err) {
			// A WAL file on read-only media with no -wal beside it: no
			// process can be writing it, so read it as immutable (SQLite
			// cannot make the -shm it would otherwise need).
			rdb.Close()
			if rdb, err = sql.Open("sqlite", dsn(name, &o, true)+"&immutable=1"); err != nil {
				return nil, err
			}
			rdb.SetMaxOpenConns(4)
			version, foreign, err = identify(ctx, rdb)
		}
		if err == nil {
			err = checkVersion(version, foreign)
		}
		if err != nil {
			rdb.Close()
			return nil, fmt.Errorf("litequeue: open %s: %w", name, err)
		}
		return newQueue(o, rdb, nil, true, nil), nil
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
		err = explainOpenError(name, statErr == nil, classifyOpenError(err))
	} else {
		openStep("created")
		err = prepareFile(ctx, conn, true)
	}
	if err != nil {
		if conn != nil {
			conn.Close()
		}
		wdb.Close()
		rdb.Close()
		return nil, fmt.Errorf("litequeue: open %s: %w", name, err)
	}
	id, err := newFileIdentity(name)
	if err != nil {
		conn.Close()
		wdb.Close()
		rdb.Close()
		return nil, fmt.Errorf("litequeue: open %s: %w", name, err)
	}
	q := newQueue(o, rdb, wdb, true, conn)
	q.w.file.Store(id)
	return q, nil
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
	if db.Stats().MaxOpenConnections == 1 {
		return nil, errors.New("litequeue: New: db allows one open connection; the queue's writer holds one, so allow at least two (db.SetMaxOpenConns)")
	}
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, wrapf("litequeue: New: %w", err)
	}
	// The connection is as db's DSN made it: its busy timeout is what the
	// application's connections have.
	var appBusy int64
	if err := conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&appBusy); err != nil {
		conn.Close()
		return nil, fmt.Errorf("litequeue: New: PRAGMA busy_timeout: %w", err)
	}
	if appBusy <= 0 {
		conn.Close()
		return nil, errors.New(`litequeue: New: db's connections have busy_timeout 0, so the application's writes would fail at once with SQLITE_BUSY whenever the queue writes; open db with a busy timeout, e.g. sql.Open("sqlite", "file:app.db?_pragma=busy_timeout(5000)")`)
	}
	for _, p := range []string{
		fmt.Sprintf("PRAGMA busy_timeout = %d", o.BusyTimeout.Milliseconds()),
		"PRAGMA foreign_keys = ON",
		"PRAGMA synchronous = " + o.Durability.synchronous(),
	} {
		if _, err := conn.ExecContext(ctx, p); err != nil {
			conn.Close()
			return nil, wrapf("litequeue: New: %s: %w", p, err)
		}
	}
	if err := prepareFile(ctx, conn, false); err != nil {
		conn.Close()
		return nil, wrapf("litequeue: New: %w", err)
	}
	return newQueue(o, db, nil, false, conn), nil
}

func checkVersion(version int, foreign bool) error {
	switch {
	case version > SchemaVersion:
		return fmt.Errorf("%w: file has version %d, this build knows up to %d; upgrade litequeue", ErrSchemaTooNew, version, SchemaVersion)
	case version == 0 && foreign:
		return fmt.Errorf("%w: it holds tables of another application and no litequeue schema", ErrNotLitequeue)
	case version == 0:
		return fmt.Errorf("%w: it holds no litequeue schema", ErrNotLitequeue)
	}
	return nil
}

// prepareFile checks what conn's database holds, then switches it to WAL and
// migrates it. Nothing is written before the checks pass. own says the file
// belongs to the queue alone (Open), so other applications' tables are
// refused.
func prepareFile(ctx context.Context, conn *sql.Conn, own bool) error {
	version, foreign, err := identify(ctx, conn)
	if err != nil {
		return err
	}
	openStep("identified")
	if version > SchemaVersion {
		return checkVersion(version, foreign)
	}
	if own && version == 0 && foreign {
		return checkVersion(version, foreign)
	}
	var mode string
	if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
		return classifyOpenError(err)
	}
	openStep("wal")
	if version < SchemaVersion {
		err := migrate(ctx, conn, version)
		openStep("migrated")
		return err
	}
	return nil
}

func newQueue(o Options, db, wdb *sql.DB, owned bool, conn *sql.Conn) *Queue {
	q := &Queue{
		opts:     o,
		clock:    o.Clock,
		log:      o.Logger,
		db:       db,
		wdb:      wdb,
		owned:    owned,
		wconn:    conn,
		rnd:      o.Rand,
		handlers: map[string]*handler{},
		configs:  map[string]QueueConfig{},
		cleanup:  newAlarm(o.Clock),
	}
	for _, qc := range o.Queues {
		q.configs[qc.Name] = qc.withDefaults()
	}
	q.leaseSeq.Store(rand.Int64N(1 << 40))
	if conn != nil {
		q.w = newWriter(conn, q.writeCompletions)
	}
	return q
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
// handlers are waited for), writes the pending completions and closes the
// database handles the queue opened. Close on a closed queue returns nil.
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
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cleanup.stop()
	if q.w != nil {
		q.w.close()
	}
	if q.owned {
		// The readers first, so that the writer's connection is the last
		// one this process has on the file.
		errs = append(errs, q.db.Close())
		if q.w != nil {
			errs = append(errs, checkpointOnClose(q.wconn))
		}
	}
	if q.wconn != nil {
		errs = append(errs, q.wconn.Close())
	}
	if q.owned && q.wdb != nil {
		errs = append(errs, q.wdb.Close())
	}
	return errors.Join(errs...)
}

func (q *Queue) writable() error {
	q.mu.Lock()
	closed := q.closed
	q.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if q.w == nil {
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
	// priority. Times beyond year 2262 are rejected.
	RunAt time.Time
	// Priority orders due jobs of a queue: lower runs first. Default 0;
	// negative values run before the default.
	Priority int
	// Key is an idempotency key, at most MaxKeyLen bytes. Enqueuing with the
	// key of a job that is still pending, scheduled or running enqueues
	// nothing and returns that job's id with a *DuplicateError
	// (errors.Is(err, ErrDuplicate)). Once that job succeeded or died the
	// key is free again. Empty means no key.
	Key string
	// Queue overrides the job type's QueueName. Empty means the job's own.
	Queue string
}

// newJob is a validated, encoded job ready to insert.
type newJob struct {
	queue, kind string
	priority    int
	visibleAt   int64
	runAt       int64
	createdAt   int64
	payload     []byte
	key         string
}

func validName(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty %s name", ErrInvalidJob, what)
	case len(s) > MaxNameLen:
		return fmt.Errorf("%w: %s name is %d bytes, longer than %d", ErrInvalidJob, what, len(s), MaxNameLen)
	case !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("%w: %s name %q holds invalid UTF-8 or control characters", ErrInvalidJob, what, s)
	}
	return nil
}

// jobQueue returns the queue a job of this type goes to by default.
func jobQueue(j Job) string {
	if qn, ok := j.(queueNamer); ok {
		return qn.QueueName()
	}
	return DefaultQueue
}

// minRunAt and maxRunAt bound the times an int64 of Unix nanoseconds holds.
var (
	minRunAt = time.Unix(0, -1<<63)
	maxRunAt = time.Unix(0, 1<<63-1)
)

func (q *Queue) prepare(job Job, o *EnqueueOptions) (newJob, error) {
	if job == nil {
		return newJob{}, fmt.Errorf("%w: nil job", ErrInvalidJob)
	}
	if o == nil {
		o = &EnqueueOptions{}
	}
	nj := newJob{kind: job.Kind(), queue: o.Queue, priority: o.Priority, key: o.Key}
	if nj.queue == "" {
		nj.queue = jobQueue(job)
	}
	if err := validName("kind", nj.kind); err != nil {
		return newJob{}, err
	}
	if err := validName("queue", nj.queue); err != nil {
		return newJob{}, err
	}
	if len(nj.key) > MaxKeyLen {
		return newJob{}, fmt.Errorf("%w: idempotency key is %d bytes, longer than %d", ErrInvalidJob, len(nj.key), MaxKeyLen)
	}
	if o.Delay < 0 {
		return newJob{}, fmt.Errorf("%w: negative delay %s; use 0 to run now", ErrInvalidJob, o.Delay)
	}
	if o.Delay != 0 && !o.RunAt.IsZero() {
		return newJob{}, fmt.Errorf("%w: both Delay and RunAt are set; set one", ErrInvalidJob)
	}
	now := q.clock.Now()
	nj.createdAt = now.UnixNano()
	due := now
	switch {
	case !o.RunAt.IsZero():
		if o.RunAt.After(maxRunAt) || o.RunAt.Before(minRunAt) {
			return newJob{}, fmt.Errorf("%w: RunAt %s is outside the years 1678–2262 that the queue can store", ErrInvalidJob, o.RunAt)
		}
		due = o.RunAt
	case o.Delay > 0:
		if now.After(maxRunAt.Add(-o.Delay)) {
			return newJob{}, fmt.Errorf("%w: delay %s runs past year 2262", ErrInvalidJob, o.Delay)
		}
		due = now.Add(o.Delay)
	}
	nj.visibleAt = due.UnixNano()
	nj.runAt = nj.visibleAt
	payload, err := json.Marshal(job)
	if err != nil {
		return newJob{}, fmt.Errorf("%w: job of kind %q does not encode as JSON: %v", ErrInvalidJob, nj.kind, err)
	}
	if q.opts.MaxPayloadBytes > 0 && len(payload) > q.opts.MaxPayloadBytes {
		return newJob{}, fmt.Errorf("%w: job of kind %q encodes to %d bytes, over Options.MaxPayloadBytes (%d); store large data elsewhere and enqueue a reference",
			ErrInvalidJob, nj.kind, len(payload), q.opts.MaxPayloadBytes)
	}
	nj.payload = payload
	return nj, nil
}

const insertJobSQL = `INSERT INTO lq_jobs (queue, kind, priority, visible_at, run_at, created_at, payload, idem_key)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?)`

// insert writes one job on tx. With a key held by a live job it inserts
// nothing and returns that job's id and a *DuplicateError.
func insert(ctx context.Context, tx execer, nj *newJob, stmt *sql.Stmt) (int64, error) {
	var key any
	if nj.key != "" {
		key = nj.key
		var id int64
		err := tx.QueryRowContext(ctx, `SELECT id FROM lq_jobs WHERE idem_key = ? AND state IN (0, 1)`, nj.key).Scan(&id)
		if err == nil {
			return id, &DuplicateError{Key: nj.key, ID: id}
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return 0, err
		}
	}
	args := []any{nj.queue, nj.kind, nj.priority, nj.visibleAt, nj.runAt, nj.createdAt, nj.payload, key}
	var res sql.Result
	var err error
	if stmt != nil {
		res, err = stmt.ExecContext(ctx, args...)
	} else {
		res, err = tx.ExecContext(ctx, insertJobSQL, args...)
	}
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// Enqueue stores job and returns its id, which stays the job's identity
// through retries, dead letters and requeues. When Enqueue returns nil the job
// is committed with the queue's Durability. A nil opts means run now with
// priority 0 and no key.
//
// When the job's queue has an idle worker in this process, the enqueue's own
// transaction also claims the queue's most urgent due job and hands it to
// that worker — the new job itself unless an older or more urgent one is due
// — so a job may start before Enqueue returns; otherwise the queue's
// dispatcher is woken at once. Either way jobs start in priority, then
// due-time order.
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
	// A job due now, of a kind whose pool here is idle, is claimed in the
	// same transaction and handed straight to a worker.
	var direct *pool
	var d *delivery
	if nj.visibleAt <= nj.createdAt {
		q.mu.Lock()
		if q.run != nil {
			direct = q.run.reserveDirect(nj.queue, nj.kind)
		}
		q.mu.Unlock()
	}
	var id int64
	handed := true
	var after func()
	if direct != nil {
		// On the writer, in commit order with the dispatchers' claims.
		after = func() { handed = direct.handOff(d) }
	}
	err = q.w.doAfter(ctx, func(ctx context.Context, tx execer) error {
		var err error
		d = nil
		id, err = insert(ctx, tx, &nj, nil)
		if err == nil && direct != nil {
			d, err = direct.claimDirect(ctx, tx)
		}
		return err
	}, after)
	if direct != nil {
		direct.unreserve()
		if !handed {
			direct.release([]*delivery{d})
		}
	}
	if err != nil {
		var dup *DuplicateError
		if errors.As(err, &dup) {
			q.emit(Event{Type: EventDuplicate, JobID: dup.ID, Queue: nj.queue, Kind: nj.kind})
			return dup.ID, err
		}
		return 0, fmt.Errorf("litequeue: enqueue %s: %w", nj.kind, classifyWriteError(err))
	}
	q.emit(Event{Type: EventEnqueued, JobID: id, Queue: nj.queue, Kind: nj.kind, Delay: time.Duration(nj.visibleAt - nj.createdAt)})
	switch {
	case nj.visibleAt > nj.createdAt:
		q.dueAt(nj.queue, nj.kind, nj.visibleAt)
	case d == nil || d.id != id:
		// The job waits in the file: the hand-off took a more urgent one,
		// or none.
		q.wake(nj.queue)
	}
	return id, nil
}

// EnqueueTx is Enqueue inside the application's transaction tx, on the
// database the queue was made with by New (the transactional outbox): the
// job exists if and only if tx commits. Workers of this process start the
// job promptly after the commit, with no call to Notify: EnqueueTx wakes the
// job's queue at once, and the wake-up's claim waits for the write lock that
// tx holds until it commits or rolls back (a rolled-back job is simply not
// found). Other processes notice the job within Options.PollInterval.
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
	id, err := insert(ctx, tx, &nj, nil)
	if err != nil {
		var dup *DuplicateError
		if errors.As(err, &dup) {
			return dup.ID, err
		}
		return 0, wrapf("litequeue: enqueue %s: %w", nj.kind, classifyWriteError(err))
	}
	// tx holds the write lock from the insert until it ends, and a claim
	// begins with BEGIN IMMEDIATE: the claim this wakes runs after tx's
	// commit and sees the job, or after its rollback and finds nothing.
	q.wake(nj.queue)
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
	var ids []int64
	var dups []error
	err = q.w.do(ctx, func(ctx context.Context, tx execer) error {
		var err error
		ids, dups, err = insertBatch(ctx, tx, jobs)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("litequeue: enqueue batch: %w", classifyWriteError(err))
	}
	queues := map[string]bool{}
	for i, nj := range jobs {
		if dups[i] != nil {
			q.emit(Event{Type: EventDuplicate, JobID: ids[i], Queue: nj.queue, Kind: nj.kind})
			continue
		}
		if nj.visibleAt > nj.createdAt {
			q.dueAt(nj.queue, nj.kind, nj.visibleAt)
		} else {
			queues[nj.queue] = true
		}
		q.emit(Event{Type: EventEnqueued, JobID: ids[i], Queue: nj.queue, Kind: nj.kind, Delay: time.Duration(nj.visibleAt - nj.createdAt)})
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
	ids, dups, err := insertBatch(ctx, tx, jobs)
	if err != nil {
		return nil, wrapf("litequeue: enqueue batch: %w", classifyWriteError(err))
	}
	queues := map[string]bool{}
	for _, nj := range jobs {
		if !queues[nj.queue] {
			queues[nj.queue] = true
			q.wake(nj.queue) // as in EnqueueTx: the claim waits for tx to end
		}
	}
	return ids, errors.Join(dups...)
}

func (q *Queue) prepareBatch(items []BatchItem) ([]newJob, error) {
	jobs := make([]newJob, len(items))
	for i, it := range items {
		nj, err := q.prepare(it.Job, it.Options)
		if err != nil {
			return nil, fmt.Errorf("batch item %d: %w", i, err)
		}
		jobs[i] = nj
	}
	return jobs, nil
}

type preparer interface {
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// insertBatch writes jobs on tx. ids[i] is the id of jobs[i]; dups[i] is the
// *DuplicateError of an item whose key a live job (or an earlier item) holds,
// and which was therefore not inserted. err is any other failure: then the
// caller must not commit.
func insertBatch(ctx context.Context, tx execer, jobs []newJob) (ids []int64, dups []error, err error) {
	var stmt *sql.Stmt
	if p, ok := tx.(preparer); ok && len(jobs) > 1 {
		s, err := p.PrepareContext(ctx, insertJobSQL)
		if err != nil {
			return nil, nil, err
		}
		defer s.Close()
		stmt = s
	}
	ids = make([]int64, len(jobs))
	dups = make([]error, len(jobs))
	for i := 0; i < len(jobs); i++ {
		if k := keylessRun(jobs[i:]); k > 1 {
			if err := insertMany(ctx, tx, jobs[i:i+k], ids[i:i+k]); err != nil {
				return nil, nil, fmt.Errorf("batch items %d-%d: %w", i, i+k-1, err)
			}
			i += k - 1
			continue
		}
		id, err := insert(ctx, tx, &jobs[i], stmt)
		var dup *DuplicateError
		if errors.As(err, &dup) {
			dups[i] = fmt.Errorf("batch item %d: %w", i, err)
		} else if err != nil {
			return nil, nil, fmt.Errorf("batch item %d: %w", i, err)
		}
		ids[i] = id
	}
	return ids, dups, nil
}

// Notify wakes this process's idle workers to look for due jobs now, for
// example after another connection of this process wrote jobs without the
// queue (EnqueueTx and EnqueueBatchTx need no Notify). Without it they
// notice within Options.PollInterval.
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

// maxInsertRows is the most rows of one multi-row INSERT (8 parameters each).
const maxInsertRows = 256

// insertManySQL[k] inserts k keyless jobs in one statement, for k a power of
// two up to maxInsertRows: a handful of statement texts, each prepared once.
var insertManySQL = func() map[int]string {
	const row = "(?, ?, ?, ?, ?, ?, ?, NULL)"
	m := map[int]string{}
	for k := 2; k <= maxInsertRows; k *= 2 {
		m[k] = strings.TrimSuffix(insertJobSQL, "(?, ?, ?, ?, ?, ?, ?, ?)") + strings.Repeat(row+", ", k-1) + row + " RETURNING id"
	}
	return m
}()

// keylessRun returns how many of the leading jobs to insert in one multi-row
// INSERT: the largest power of two, up to maxInsertRows, of leading jobs
// without an idempotency key (a keyed job needs its duplicate check).
func keylessRun(jobs []newJob) int {
	n := 0
	for n < len(jobs) && n < maxInsertRows && jobs[n].key == "" {
		n++
	}
	k := 1
	for k*2 <= n {
		k *= 2
	}
	return k
}

// insertMany writes keyless jobs with one multi-row INSERT and stores their
// ids in ids. AUTOINCREMENT hands out ever larger ids in insertion order, and
// the rows are inserted in VALUES order, so the sorted returned ids are the
// jobs' ids in order.
func insertMany(ctx context.Context, tx execer, jobs []newJob, ids []int64) error {
	args := make([]any, 0, 7*len(jobs))
	for i := range jobs {
		nj := &jobs[i]
		args = append(args, nj.queue, nj.kind, nj.priority, nj.visibleAt, nj.runAt, nj.createdAt, nj.payload)
	}
	rows, err := tx.QueryContext(ctx, insertManySQL[len(jobs)], args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		if n == len(ids) {
			return fmt.Errorf("litequeue: multi-row insert returned more than %d ids", len(ids))
		}
		if err := rows.Scan(&ids[n]); err != nil {
			return err
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if n != len(ids) {
		return fmt.Errorf("litequeue: multi-row insert of %d jobs returned %d ids", len(ids), n)
	}
	slices.Sort(ids)
	return nil
}
