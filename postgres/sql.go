package postgres

import "strings"

// The store's statements, written with unqualified table names; queries()
// qualifies them with the queue's schema, so that they mean the queue's
// tables also on an application's transaction whose search_path differs.
const (
	// insertSQL inserts a batch of jobs from parallel arrays in their order
	// (ids follow the order: the default is evaluated row by row after the
	// ORDER BY). A job whose idempotency key a live row holds, or an earlier
	// job of the batch, is skipped. It returns the inserted rows (true) and
	// the live rows that held a batch key before the statement (false).
	insertSQL = `WITH input AS (
    SELECT u.queue, u.kind, u.priority, u.visible_at, u.created_at, u.payload, NULLIF(u.k, '') AS idem_key, u.ord
    FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bytea[], $7::text[])
         WITH ORDINALITY AS u(queue, kind, priority, visible_at, created_at, payload, k, ord)
), ins AS (
    INSERT INTO lq_jobs (queue, kind, priority, visible_at, run_at, created_at, payload, idem_key)
    SELECT queue, kind, priority, visible_at, visible_at, created_at, payload, idem_key FROM input ORDER BY ord
    ON CONFLICT (idem_key) WHERE idem_key IS NOT NULL AND state IN (0, 1) DO NOTHING
    RETURNING id, idem_key
)
SELECT id, idem_key, true FROM ins
UNION ALL
SELECT j.id, j.idem_key, false FROM lq_jobs j
WHERE j.idem_key IN (SELECT idem_key FROM input WHERE idem_key IS NOT NULL) AND j.state IN (0, 1)`

	// insertKeylessSQL is insertSQL for jobs without idempotency keys: no
	// conflict can arise, so a plain multi-row insert in the batch's order,
	// returning the new ids.
	insertKeylessSQL = `INSERT INTO lq_jobs (queue, kind, priority, visible_at, run_at, created_at, payload)
SELECT u.queue, u.kind, u.priority, u.visible_at, u.visible_at, u.created_at, u.payload
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bytea[])
     WITH ORDINALITY AS u(queue, kind, priority, visible_at, created_at, payload, ord)
ORDER BY u.ord
RETURNING id`

	// insertOneKeylessSQL is insertKeylessSQL for a single job, which also
	// notifies channel $7 of its queue: one statement where an insert and
	// a notify would be two.
	insertOneKeylessSQL = `WITH ins AS (
    INSERT INTO lq_jobs (queue, kind, priority, visible_at, run_at, created_at, payload)
    VALUES ($1, $2, $3, $4, $4, $5, $6)
    RETURNING id)
SELECT ins.id FROM ins CROSS JOIN LATERAL (SELECT pg_notify($7, $1)) n`

	notifySQL = `SELECT pg_notify($1, $2)`

	// notifyCheckSQL is notifySQL on an application's transaction, which
	// notifies only on the queue's database ($3) and answers which
	// database the transaction is on (checkTx) and its id (TxMark).
	notifyCheckSQL = `SELECT current_database(), (SELECT count(*) FROM (SELECT pg_notify($1, $2)) n WHERE current_database() = $3), txid_current()`

	// checkTxSQL answers which database an application's transaction is on
	// (checkTx) and its id (TxMark).
	checkTxSQL = `SELECT current_database(), txid_current()`

	// pauseLockSQL takes, for the rest of the transaction, the lock that
	// Pause holds exclusively while it pauses queue $2 of schema $1: a claim
	// that holds it either commits before a Pause or sees it. A statement of
	// its own, so that the next statement's snapshot is taken after the lock.
	// It also turns JIT compilation off for the rest of the transaction: the
	// claim that follows is planned once per connection as a generic plan
	// (the driver prepares it), whose estimates with a LIMIT and an array
	// given as parameters grow with the table (1M rows: a cost of 600,000,
	// over jit_above_cost), and compiling it took 150-700 ms on every
	// execution for a claim that runs in 2 ms.
	pauseLockSQL = `SELECT pg_advisory_xact_lock_shared(hashtextextended('litequeue pause ' || $1::text || ' ' || $2::text, 0)),
    set_config('jit', 'off', true)`

	holderSQL = `SELECT id FROM lq_jobs WHERE idem_key = $1 AND state IN (0, 1)`

	extendSQL = `UPDATE lq_jobs j SET visible_at = $1
FROM unnest($2::bigint[], $3::bigint[]) AS c(id, lease)
WHERE j.id = c.id AND j.lease = c.lease AND j.state = 1
RETURNING j.id`

	releaseSQL = `UPDATE lq_jobs j SET state = 0, visible_at = $1, lease = NULL, attempt = greatest(j.attempt - 1, 0)
FROM unnest($2::bigint[], $3::bigint[]) AS c(id, lease)
WHERE j.id = c.id AND j.lease = c.lease AND j.state = 1
RETURNING j.queue`

	// retrySQL reschedules a leased row, appends the attempt to its history
	// and notifies the row's queue, in one statement: nothing when the lease
	// was lost (then it answers no row).
	retrySQL = `WITH u AS (
    UPDATE lq_jobs SET state = 0, visible_at = $1, lease = NULL, last_error = $2
    WHERE id = $3 AND lease = $4 AND state = 1 RETURNING id, queue),
a AS (
    INSERT INTO lq_attempts (job_id, attempt, started_at, finished_at, error, decision, delay, process, host, pid)
    SELECT id, $5, $6, $7, $8, $9, $10, NULLIF($12::bigint, 0), NULLIF($13::text, ''), NULLIF($14::bigint, 0) FROM u RETURNING job_id)
SELECT pg_notify($11, u.queue) FROM u, a`

	// burySQL makes a leased row a dead letter with its attempt record, and
	// inserts the follow-up job ($14: whether there is one) only if it did.
	burySQL = `WITH u AS (
    UPDATE lq_jobs SET state = 3, lease = NULL, finished_at = $1, dead_reason = $2,
        last_error = CASE WHEN $3::boolean THEN $4 ELSE last_error END,
        attempt = CASE WHEN $5::integer > 0 THEN $5::integer ELSE attempt END
    WHERE id = $6 AND lease = $7 AND state = 1 RETURNING id),
a AS (
    INSERT INTO lq_attempts (job_id, attempt, started_at, finished_at, error, decision, delay, process, host, pid)
    SELECT id, $8, $9, $10, $11, $12, $13, NULLIF($22::bigint, 0), NULLIF($23::text, ''), NULLIF($24::bigint, 0) FROM u RETURNING job_id),
f AS (
    INSERT INTO lq_jobs (queue, kind, priority, visible_at, run_at, created_at, payload, idem_key)
    SELECT $15, $16, $17, $18, $18, $19, $20, NULLIF($21, '') WHERE $14::boolean AND EXISTS (SELECT 1 FROM u)
    ON CONFLICT (idem_key) WHERE idem_key IS NOT NULL AND state IN (0, 1) DO NOTHING
    RETURNING id)
SELECT (SELECT count(*) FROM a), coalesce((SELECT id FROM f), 0)`

	// Statements that delete jobs delete their history with them.
	// completeDeleteSQL, the hot one, looks the history up with one index
	// scan over an array of the deleted ids: IN (SELECT …) plans as a
	// nested loop that rebuilds a bitmap scan per deleted job, about a
	// third of the statement's time for 100 jobs without history.
	completeDeleteSQL = `WITH d AS (
    DELETE FROM lq_jobs j USING unnest($1::bigint[], $2::bigint[]) AS c(id, lease)
    WHERE j.id = c.id AND j.lease = c.lease AND j.state = 1 RETURNING j.id),
a AS (DELETE FROM lq_attempts WHERE job_id = ANY (ARRAY(SELECT id FROM d)))
SELECT id FROM d`

	completeKeepSQL = `UPDATE lq_jobs j SET state = 2, lease = NULL, finished_at = c.at, visible_at = c.at
FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS c(id, lease, at)
WHERE j.id = c.id AND j.lease = c.lease AND j.state = 1
RETURNING j.id`

	// completeTxDeleteSQL and completeTxKeepSQL change nothing unless the
	// transaction is on the queue's database (the last parameter), and
	// answer which database it is on.
	completeTxDeleteSQL = `WITH d AS (DELETE FROM lq_jobs WHERE id = $1 AND lease = $2 AND state = 1 AND current_database() = $3 RETURNING id),
a AS (DELETE FROM lq_attempts WHERE job_id IN (SELECT id FROM d))
SELECT count(*), current_database() FROM d`
	completeTxKeepSQL = `WITH u AS (UPDATE lq_jobs SET state = 2, lease = NULL, finished_at = $1, visible_at = $1
    WHERE id = $2 AND lease = $3 AND state = 1 AND current_database() = $4 RETURNING id)
SELECT count(*), current_database() FROM u`

	holdsSQL = `SELECT EXISTS (SELECT 1 FROM lq_jobs WHERE id = $1 AND lease = $2 AND state = 1)`

	oldestCompletedSQL = `SELECT min(finished_at) FROM lq_jobs WHERE state = 2`
	purgeCompletedSQL  = `WITH d AS (DELETE FROM lq_jobs WHERE state = 2 AND finished_at < $1 RETURNING id),
a AS (DELETE FROM lq_attempts WHERE job_id IN (SELECT id FROM d))
SELECT count(*) FROM d`

	jobColumns = `id, queue, kind, state, attempt, priority, idem_key, payload, created_at, run_at, visible_at,
attempted_at, finished_at, last_error, dead_reason, meta::text`

	// attemptsSQL reads a job's attempt history; the last record of a dead
	// job with an empty error reads the job's last_error (deadtext.go).
	attemptsSQL = `SELECT a.attempt, a.started_at, a.finished_at,
    CASE WHEN a.error = '' AND j.state = 3 AND a.id = (SELECT max(m.id) FROM lq_attempts m WHERE m.job_id = a.job_id)
        THEN coalesce(j.last_error, '') ELSE a.error END,
    a.decision, a.delay, coalesce(a.process, 0), coalesce(a.host, ''), coalesce(a.pid, 0)
FROM lq_attempts a JOIN lq_jobs j ON j.id = a.job_id WHERE a.job_id = $1 ORDER BY a.id`

	statsSQL = `SELECT queue,
    count(*) FILTER (WHERE state = 0 AND visible_at <= $1),
    count(*) FILTER (WHERE state = 0 AND visible_at > $1),
    count(*) FILTER (WHERE state = 1),
    count(*) FILTER (WHERE state = 2),
    count(*) FILTER (WHERE state = 3),
    min(visible_at) FILTER (WHERE state = 0 AND visible_at <= $1),
    min(visible_at) FILTER (WHERE state = 0 AND visible_at > $1),
    count(*) FILTER (WHERE state = 4),
    count(*) FILTER (WHERE state = 5)
FROM lq_jobs GROUP BY queue ORDER BY queue`

	lockForAdminSQL = `SELECT id, state, queue, kind, idem_key FROM lq_jobs WHERE id = ANY ($1) FOR UPDATE`

	requeueSQL = `UPDATE lq_jobs SET state = 0, attempt = 0, snoozes = 0, visible_at = $1, lease = NULL,
    finished_at = NULL, dead_reason = NULL WHERE id = ANY ($2) AND state = $3`

	// deleteWithHistorySQL wraps a DELETE … RETURNING id of jobs (%s) so that
	// their history goes with them, and their edges as workflows' children
	// (lq_deps, one probe of its primary key each); it answers how many jobs
	// it deleted.
	deleteWithHistorySQL = `WITH d AS (%s),
a AS (DELETE FROM lq_attempts WHERE job_id IN (SELECT id FROM d)),
e AS (DELETE FROM lq_deps WHERE child IN (SELECT id FROM d))
SELECT count(*) FROM d`

	liveHoldersSQL = `SELECT idem_key, id FROM lq_jobs WHERE idem_key = ANY ($1) AND state IN (0, 1)`
)

// priorityWalk returns a recursive CTE, p(prio, created): the distinct
// priorities of queue $1's live rows in order, one seek of lq_jobs_kind_due
// each, with bound (" AND priority <= $3", or "") on every seek. Each seek
// selects created_at, which the index lacks, so that it reads the heap: an
// index-only scan would never mark the entries of deleted jobs dead, and
// every walk would step over all of them again until a vacuum.
func priorityWalk(bound string) string {
	return `WITH RECURSIVE p(prio, created) AS (
    (SELECT priority, created_at FROM lq_jobs WHERE queue = $1 AND state IN (0, 1)` + bound + `
     ORDER BY priority LIMIT 1)
    UNION ALL
    SELECT n.priority, n.created_at FROM p CROSS JOIN LATERAL (
        SELECT priority, created_at FROM lq_jobs WHERE queue = $1 AND state IN (0, 1) AND priority > p.prio` + bound + `
        ORDER BY priority LIMIT 1) n)`
}

// The statements built on priorityWalk.
var (
	// nextDueSQL walks the distinct priorities of a queue's live rows
	// (priorityWalk: one seek each, which reads the heap, so that the
	// entries of finished jobs are marked dead rather than stepped over
	// by every call; a limited queue's dispatcher calls it after each claim
	// the limits held back) and takes, per priority and handled kind, the
	// first row of its range of lq_jobs_kind_due: rows of other kinds are
	// never read.
	nextDueSQL = priorityWalk("") + `
SELECT min(d.visible_at) FROM p CROSS JOIN unnest($2::text[]) AS k(kind) CROSS JOIN LATERAL (
    SELECT visible_at FROM lq_jobs
    WHERE queue = $1 AND state IN (0, 1) AND priority = p.prio AND kind = k.kind
    ORDER BY visible_at LIMIT 1) d
WHERE NOT EXISTS (SELECT 1 FROM lq_queues WHERE queue = $1 AND paused_at IS NOT NULL)`

	// insertClaimNewSQL inserts a job without a key, due now ($4 <= now $9),
	// into queue $1 at priority $3, and claims it in the same statement —
	// lease $8 until $7, its first attempt, by process $12 — but only when nothing could
	// come before it: the queue is not paused, and no live row of the queue
	// as urgent or more is due (a lapsed lease is due too): priorityWalk up
	// to the job's priority, and per priority and kind of $11 (the kinds
	// the process handles: rows of other kinds are not its to take) one
	// seek of lq_jobs_kind_due for a due row. The seek asks for the
	// earliest row (ORDER BY visible_at), not any: the driver's generic
	// plan, which cannot tell how many rows are due, otherwise read the
	// table in order hoping to meet a due row soon, through every row
	// scheduled ahead (100 ms per enqueue beside a million of them). Otherwise the job goes in pending
	// and the statement notifies channel $10 of queue $1, for the workers of every process. It returns the id
	// and whether the job was claimed. Run after pauseLockSQL. (OFFSET 0 keeps the
	// conditions one subquery, evaluated once, instead of once per CASE.)
	insertClaimNewSQL = `WITH ins AS (
INSERT INTO lq_jobs (queue, kind, priority, visible_at, run_at, created_at, payload,
    state, lease, attempt, attempted_at, due_at, process)
SELECT $1, $2, $3, CASE WHEN x.c THEN $7::bigint ELSE $4::bigint END, $4, $5, $6,
    CASE WHEN x.c THEN 1 ELSE 0 END, CASE WHEN x.c THEN $8::bigint END, CASE WHEN x.c THEN 1 ELSE 0 END,
    CASE WHEN x.c THEN $9::bigint END, CASE WHEN x.c THEN $4::bigint END, CASE WHEN x.c THEN $12::bigint END
FROM (SELECT NOT EXISTS (SELECT 1 FROM lq_queues WHERE queue = $1 AND paused_at IS NOT NULL)
    AND NOT EXISTS (` + priorityWalk(" AND priority <= $3") + `
        SELECT 1 FROM p CROSS JOIN unnest($11::text[]) AS k(kind) CROSS JOIN LATERAL (SELECT visible_at FROM lq_jobs
            WHERE queue = $1 AND state IN (0, 1) AND priority = p.prio AND kind = k.kind AND visible_at <= $9
            ORDER BY visible_at LIMIT 1) d)
    AS c OFFSET 0) x
RETURNING id, state = 1 AS took)
SELECT ins.id, ins.took FROM ins LEFT JOIN LATERAL (SELECT pg_notify($10, $1) WHERE NOT ins.took) n ON true`

	// claimSQL claims up to $3 due rows of queue $1 whose kind is one of
	// $2, most urgent first: it walks the queue's distinct priorities in
	// order (priorityWalk), and per priority reads, for each kind of $2, its
	// due rows in due-time order — a range of lq_jobs_kind_due (queue,
	// priority, kind, visible_at, id) that stops at the first row not yet
	// due or at $3 rows, skipping rows another transaction holds — and
	// merges the kinds' rows in due-time order; the walk stops once $3 rows
	// are taken. Rows of kinds not in $2 are never read, however many are
	// due. With several kinds, each range locks up to $3 rows and the merge
	// keeps $3 of them: the rest stay locked (not changed) until the claim
	// commits, and a concurrent claim skips them.
	// A running row whose lease lapsed is due too: its worker is gone. The
	// claim takes lease $6 until $5, counts the attempt and keeps the time
	// the row became due in due_at. Run after pauseLockSQL: a paused queue
	// claims nothing. The UPDATE finds the locked rows by their ids in the
	// primary key (id = ANY of an array): a join with c may be planned as a
	// hash join over every row of the table when its statistics are
	// missing or stale, and measured 3% slower even when it was not.
	claimSQL = priorityWalk("") + `, c AS (
    SELECT t.id FROM p CROSS JOIN LATERAL (
        SELECT u.id FROM unnest($2::text[]) AS k(kind) CROSS JOIN LATERAL (
            SELECT j.id, j.visible_at FROM lq_jobs j
            WHERE j.queue = $1 AND j.state IN (0, 1) AND j.priority = p.prio AND j.kind = k.kind AND j.visible_at <= $4
            ORDER BY j.visible_at, j.id LIMIT $3
            FOR UPDATE SKIP LOCKED) u
        ORDER BY u.visible_at, u.id LIMIT $3) t
    WHERE NOT EXISTS (SELECT 1 FROM lq_queues WHERE queue = $1 AND paused_at IS NOT NULL)
    LIMIT $3
)
UPDATE lq_jobs j
SET state = 1, visible_at = $5, lease = $6, attempt = j.attempt + 1, attempted_at = $4, due_at = j.visible_at, process = $7,
    last_error = CASE WHEN j.state = 1
        THEN 'lease expired: the worker of attempt ' || j.attempt || ' was lost' ELSE j.last_error END
WHERE j.id = ANY (ARRAY(SELECT id FROM c))
RETURNING j.id, j.kind, j.attempt, j.priority, j.payload, j.idem_key, j.created_at, j.last_error, j.due_at, j.meta::text`
)

// qualifier rewrites the statements' table and function names to
// schema-qualified ones.
func qualifier(schema string) *strings.Replacer {
	q := quoteIdent(schema) + "."
	return strings.NewReplacer(
		"lq_jobs ", q+"lq_jobs ",
		"lq_jobs\n", q+"lq_jobs\n",
		"lq_attempts ", q+"lq_attempts ",
		"lq_meta ", q+"lq_meta ",
		"lq_history ", q+"lq_history ",
		"lq_queues ", q+"lq_queues ",
		"lq_flow_starts ", q+"lq_flow_starts ",
		"lq_processes ", q+"lq_processes ",
		"lq_schedules ", q+"lq_schedules ",
		"lq_schedule_events ", q+"lq_schedule_events ",
		"lq_claim(", q+"lq_claim(",
	)
}

// asyncCommitSQL makes the rest of the batch's transaction commit without
// waiting for the server to flush its WAL (synchronous_commit=off for this
// transaction only). A statement of the batch rather than SET LOCAL, which
// warns in the server's log outside an explicit transaction block.
const asyncCommitSQL = `SELECT set_config('synchronous_commit', 'off', true)`
