// Package litequeue is an embedded, in-process job queue that keeps its jobs
// in one SQLite file: pure Go (modernc.org/sqlite), no cgo, no server.
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
// A job is any JSON-encodable type with a Kind method; its payload is stored
// as JSON. Its id is its identity for life: through retries, dead letters and
// requeues.
//
// # Delivery
//
// Workers claim due jobs by their visibility timestamp under a lease that is
// extended while the handler runs; every write of a delivery is conditional
// on its lease token. Delivery is at least once: a handler runs again only
// when its process died or lost the lease mid-attempt. The attempt count is
// stored with the job and checked again when it is claimed, so a job whose
// last attempt died with its process becomes a dead letter instead of looping.
//
// # Retries
//
// After a failure the queue gives up when the attempts are used up or the
// error is Permanent, waits RetryAfter's delay, asks the queue's Strategy,
// or else follows the RetryPolicy's Backoff. THE TRAP: a queue whose
// QueueConfig sets no Retry policy does not retry at all (see RetryPolicy).
//
// # Time
//
// Every time the queue reads comes from Options.Clock, including the "now"
// written into SQL. Tests pass clock.NewMock() and advance it through a retry
// schedule instead of sleeping; Options.Rand makes jitter reproducible.
//
// # Caveats
//
// SQLite has one writer at a time: several processes can share a file, but
// they take turns at the write lock. Handlers that ignore their context keep
// running after Stop returns; their results are dropped.
package litequeue
