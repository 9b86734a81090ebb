-- litequeue schema version 1.
--
-- Times are integer nanoseconds since the Unix epoch, always written from the
-- queue's Clock (never SQLite's own clock). Durations are integer nanoseconds.

CREATE TABLE lq_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT, WITHOUT ROWID;

-- One row per job, live or not. state: 0 pending (ready when visible_at <= now,
-- scheduled otherwise), 1 running (leased until visible_at), 2 completed
-- (retained), 3 dead (a dead letter). AUTOINCREMENT so an id is never reused:
-- a job's identity stays stable through retries, dead letters and requeues.
CREATE TABLE lq_jobs (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    queue        TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    state        INTEGER NOT NULL DEFAULT 0 CHECK (state IN (0, 1, 2, 3)),
    priority     INTEGER NOT NULL DEFAULT 0,
    visible_at   INTEGER NOT NULL,
    attempt      INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    payload      BLOB    NOT NULL,
    idem_key     TEXT,
    lease        INTEGER,
    created_at   INTEGER NOT NULL,
    run_at       INTEGER NOT NULL,
    attempted_at INTEGER,
    finished_at  INTEGER,
    last_error   TEXT,
    dead_reason  TEXT
) STRICT;

-- The claim: live rows of one queue in priority, then due-time order.
CREATE INDEX lq_jobs_claim ON lq_jobs (queue, priority, visible_at) WHERE state IN (0, 1);

-- At most one live job per idempotency key.
CREATE UNIQUE INDEX lq_jobs_key ON lq_jobs (idem_key) WHERE idem_key IS NOT NULL AND state IN (0, 1);

-- Retention clean-up and purges of completed and dead jobs by age.
CREATE INDEX lq_jobs_finished ON lq_jobs (state, finished_at) WHERE state IN (2, 3);

-- The history of failed attempts, kept with the job (and deleted with it).
CREATE TABLE lq_attempts (
    id          INTEGER PRIMARY KEY,
    job_id      INTEGER NOT NULL REFERENCES lq_jobs (id) ON DELETE CASCADE,
    attempt     INTEGER NOT NULL,
    started_at  INTEGER NOT NULL,
    finished_at INTEGER NOT NULL,
    error       TEXT    NOT NULL,
    decision    TEXT    NOT NULL,
    delay       INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE INDEX lq_attempts_job ON lq_attempts (job_id);
