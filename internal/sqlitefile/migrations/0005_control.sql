-- litequeue schema version 5: live control of jobs and queues.
--
-- * state 4: cancelled. A cancelled job is kept (listed, purgeable) and never
--   runs again. A job cancelled while running keeps its lease in the row, so
--   that its worker can tell "cancelled" from "lease lost" when its
--   conditional writes stop matching.
-- * snoozes: how many times the job's handler snoozed it (Snooze), against
--   QueueConfig.MaxSnoozes.
-- * lq_queues: per-queue settings stored in the file; paused_at is set while
--   the queue is paused (a row may exist with it NULL).
--
-- Widening the CHECK of lq_jobs.state needs SQLite's table rebuild: a new
-- table, the rows copied, the old one dropped, the new one renamed, its
-- indexes recreated — all inside the migration's transaction. lq_attempts
-- references lq_jobs with ON DELETE CASCADE and foreign keys are on (they
-- cannot be switched off inside a transaction), so dropping lq_jobs would
-- delete every attempt history: lq_attempts is set aside first and rebuilt
-- after. The AUTOINCREMENT counter is carried over, so that no id is reused.

CREATE TABLE lq_jobs_new (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    queue        TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    state        INTEGER NOT NULL DEFAULT 0 CHECK (state IN (0, 1, 2, 3, 4)),
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
    dead_reason  TEXT,
    due_at       INTEGER,
    snoozes      INTEGER NOT NULL DEFAULT 0 CHECK (snoozes >= 0)
) STRICT;

INSERT INTO lq_jobs_new (id, queue, kind, state, priority, visible_at, attempt, payload, idem_key, lease,
    created_at, run_at, attempted_at, finished_at, last_error, dead_reason, due_at)
SELECT id, queue, kind, state, priority, visible_at, attempt, payload, idem_key, lease,
    created_at, run_at, attempted_at, finished_at, last_error, dead_reason, due_at
FROM lq_jobs;

DELETE FROM sqlite_sequence WHERE name = 'lq_jobs_new';
INSERT INTO sqlite_sequence (name, seq) SELECT 'lq_jobs_new', seq FROM sqlite_sequence WHERE name = 'lq_jobs';

CREATE TABLE lq_attempts_keep AS SELECT * FROM lq_attempts;
DROP TABLE lq_attempts;
DROP TABLE lq_jobs;
ALTER TABLE lq_jobs_new RENAME TO lq_jobs;

CREATE INDEX lq_jobs_claim ON lq_jobs (queue, priority, visible_at) WHERE state IN (0, 1);
CREATE UNIQUE INDEX lq_jobs_key ON lq_jobs (idem_key) WHERE idem_key IS NOT NULL AND state IN (0, 1);
CREATE INDEX lq_jobs_finished ON lq_jobs (state, finished_at) WHERE state IN (2, 3);
-- Purges of cancelled jobs by age.
CREATE INDEX lq_jobs_cancelled ON lq_jobs (finished_at) WHERE state = 4;

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
INSERT INTO lq_attempts (id, job_id, attempt, started_at, finished_at, error, decision, delay)
SELECT id, job_id, attempt, started_at, finished_at, error, decision, delay FROM lq_attempts_keep;
DROP TABLE lq_attempts_keep;
CREATE INDEX lq_attempts_job ON lq_attempts (job_id);

CREATE TABLE lq_queues (
    queue     TEXT PRIMARY KEY,
    paused_at INTEGER
) STRICT, WITHOUT ROWID;
