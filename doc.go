// Package litequeue is an embedded, in-process job queue that keeps its jobs,
// retries and dead letters in one SQLite file: pure Go (modernc.org/sqlite),
// no cgo, no server. Package postgres runs the same queue on PostgreSQL.
//
// # Basics
//
// Open a queue file (or call New on the application's own SQLite *sql.DB),
// register a typed handler per job type, start the workers and enqueue:
//
//	q, err := litequeue.Open("app-queue.db", &litequeue.Options{
//		Queues: []litequeue.QueueConfig{{Name: "default", Retry: litequeue.ExponentialRetry(3)}},
//	})
//	litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[SendEmail]) error { … })
//	err = q.Start(ctx)
//	id, err := q.Enqueue(ctx, SendEmail{To: "a@example.com"}, nil)
//
// Example is the whole program. A job is any JSON-encodable type with a Kind
// method (see Job); its payload is stored as JSON, and its id is its identity
// for life: through retries, dead letters and requeues. A handler returns nil
// for success or an error for a failed attempt; Permanent, RetryAfter and
// Snooze steer what happens next. Stop stops the workers gracefully and Close
// closes the queue.
//
// # Delivery
//
// Workers claim due jobs by priority, then by the time each became due, under
// a lease that is extended while the handler runs; every write of a delivery
// is conditional on its lease. Delivery is at least once: a handler runs
// again only when its process died or lost the lease mid-attempt. The attempt
// count is stored with the job and counted at claim, so a job whose last
// attempt died with its process becomes a dead letter instead of looping.
// All writes of a process are committed by one writer, which groups
// concurrent writes into one transaction.
//
// # Retries
//
// After a failure the queue gives up when the attempts are used up or the
// error is Permanent, waits RetryAfter's delay, asks the queue's Strategy,
// or else follows the RetryPolicy's Backoff. A job that gives up becomes a
// dead letter, kept with its history until requeued or purged.
//
// # Time
//
// Every time the queue reads comes from Options.Clock, including the "now"
// written into SQL. Tests pass clock.NewMock() and advance it through a retry
// schedule instead of sleeping; Options.Rand makes jitter reproducible.
// Package litequeuetest does that for a test's handlers.
//
// # Other packages
//
// Package postgres opens the same queue on PostgreSQL; package web serves a
// dashboard; packages under metrics feed Prometheus and OpenTelemetry from
// Options.OnEvent; the lqinspect command inspects and operates a queue from
// the shell. The repository's README and docs directory describe the
// guarantees, with the tests that prove them, and the design.
//
// # Caveats
//
// A queue whose QueueConfig sets no Retry policy does not retry at all: the
// first failure is final (see RetryPolicy). Handlers must be idempotent, since
// a job whose process died before its success was committed runs again.
// SQLite has one writer at a time: several processes can share a file, but
// they take turns at the write lock. A queue claims a little work ahead of its
// handlers (see Options.ClaimBatch), and a crash uses up those jobs' attempts.
// Handlers that ignore their context keep running after Stop returns; their
// results are dropped. Copy a live queue file with Queue.Backup, not with a
// file copy: recent commits live in its -wal file.
package litequeue
