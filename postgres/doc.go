// Package postgres runs litequeue queues on PostgreSQL: the same Queue API,
// delivery contract and behaviour suite as a queue file, for services that
// outgrow one machine.
//
//	q, err := postgres.Open(ctx, "postgres://app@db.internal/app", opts) // instead of litequeue.Open(path, opts)
//
// Open manages its own connection pool; New uses an application's *sql.DB
// opened with pgx's database/sql driver, so that Queue.EnqueueTx and
// Delivery.CompleteTx work on the application's transactions. A transaction
// on another database than the queue's is refused with ErrOtherDatabase,
// nothing written (checked in the statement that notifies or completes, so
// at no extra round trip, except for unique jobs: one per transaction).
//
// # Tables
//
// The queue's tables (lq_jobs, lq_attempts, lq_meta, lq_history, lq_queues,
// lq_schedules, lq_schedule_events) live in the first schema of the
// connection's search_path — public unless the URL sets search_path —
// beside the application's tables, with one function, lq_claim, that this
// version does not call (it stays for older versions that share the
// schema). Open creates or
// migrates them (embedded, numbered migrations, under an advisory lock, one
// transaction) and refuses, writing nothing, a schema whose lq_jobs another
// application owns (litequeue.ErrNotLitequeue) or that a newer build
// migrated (litequeue.ErrSchemaTooNew).
// A database whose schema only its owner or a migration tool may change
// applies MigrationSQL (or `lqinspect schema`) itself; the queue's role then
// needs only to read and write rows, and Open creates nothing.
//
// # How it works
//
// All times come from the queue's Clock, never from the server's now().
// A claim is one statement after the pause lock, in one round trip: per
// priority level, most urgent first, and per kind the process handles, a
// range of the index of live rows by (queue, priority, kind, due time),
// FOR UPDATE SKIP LOCKED, merged in due order, so no two workers of any number of
// processes get one job; it counts the attempt and sets the lease in the
// same statement, and every later write for the
// delivery is conditional on the lease. Writes are grouped: three writer
// goroutines (claims, enqueues, outcomes of deliveries) each send whatever
// is waiting as one pipelined batch — one round trip, one implicit
// transaction, one commit — and claims hand their jobs over in commit order.
// Inserts, releases, retries and requeues NOTIFY the schema's channel in
// their transaction; each queue LISTENs on a connection of its own, falls
// back to polling every Options.PollInterval while that connection is down,
// and reconnects with backoff; while it listens, a second (or five poll
// intervals) without a notification also makes it look for work, since a
// silently dead connection can lose one. Each time it listens it sends
// itself a probe notification from another connection; when nothing
// arrives (a pooler in transaction mode passes no notification on) it logs
// a warning and polls every PollInterval until one does. Options.ListenURL
// (OpenWith, NewWith) gives the listening connection a URL of its own — the database reached
// directly — while everything else goes through the pool. A batch whose
// connection was lost before it could commit is sent again on a new
// connection, and so is a read whose connection the server ended while it
// ran (pg_terminate_backend, a restart): once, after a ping that drops the
// pool's dead connections.
//
// # Caveats
//
// Every operation costs at least one network round trip; one-at-a-time
// enqueues are bound by the server's commit latency. Options.BusyTimeout and
// Options.Pragmas are SQLite settings and are ignored; Options.Durability
// DurabilityProcess means synchronous_commit=off in each of the queue's own
// write transactions (set per transaction, so it works through a pooler).
// Under DurabilityFull a transaction that only claims commits without
// waiting for the WAL flush: a server crash can undo a claim (its jobs are
// pending again, the attempt not counted), never an enqueue or an outcome,
// and no outcome of a job can outlive the loss of its claim.
package postgres
