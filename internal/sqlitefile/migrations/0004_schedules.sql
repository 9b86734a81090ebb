-- litequeue schema version 4: durable schedules (recurring jobs).
--
-- One row per schedule, by its stable name. A schedule is either a cron
-- expression (cron, evaluated in the time zone tz) or a fixed interval
-- (every, in nanoseconds, with occurrences at anchor + k*every). next_at is
-- the next occurrence not yet handled: the scheduler of any process that
-- finds it due advances it and enqueues the occurrence's job in one
-- transaction, conditional on next_at and revision being unchanged, so two
-- processes racing on one occurrence enqueue one job.
--
-- missed: 0 run once now, 1 skip, 2 catch up at most catch_up occurrences.
-- overlap: 0 allow, 1 skip, 2 wait. waiting is 1 while an occurrence waits
-- for the schedule's previous job to finish (overlap wait).
-- IF NOT EXISTS: files created before the schema version was raised may
-- already hold them.

CREATE TABLE IF NOT EXISTS lq_schedules (
    name         TEXT    PRIMARY KEY,
    cron         TEXT    NOT NULL DEFAULT '',
    every        INTEGER NOT NULL DEFAULT 0 CHECK (every >= 0),
    anchor       INTEGER NOT NULL DEFAULT 0,
    tz           TEXT    NOT NULL DEFAULT 'UTC',
    queue        TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    payload      BLOB    NOT NULL,
    priority     INTEGER NOT NULL DEFAULT 0,
    missed       INTEGER NOT NULL DEFAULT 0 CHECK (missed IN (0, 1, 2)),
    catch_up     INTEGER NOT NULL DEFAULT 0,
    overlap      INTEGER NOT NULL DEFAULT 0 CHECK (overlap IN (0, 1, 2)),
    grace        INTEGER NOT NULL DEFAULT 0,
    paused       INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    waiting      INTEGER NOT NULL DEFAULT 0 CHECK (waiting IN (0, 1)),
    next_at      INTEGER NOT NULL,
    revision     INTEGER NOT NULL DEFAULT 1,
    last_at      INTEGER,
    last_job     INTEGER,
    missed_count INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- The history of each schedule: registrations, changes, pauses, enqueued
-- occurrences and skipped ones (count: how many; occurrence..last: their
-- range). The newest 200 rows per schedule are kept.
CREATE TABLE IF NOT EXISTS lq_schedule_events (
    id         INTEGER PRIMARY KEY,
    schedule   TEXT    NOT NULL,
    at         INTEGER NOT NULL,
    event      TEXT    NOT NULL,
    occurrence INTEGER,
    last       INTEGER,
    job_id     INTEGER,
    count      INTEGER NOT NULL DEFAULT 0,
    detail     TEXT    NOT NULL DEFAULT ''
) STRICT;

CREATE INDEX IF NOT EXISTS lq_schedule_events_schedule ON lq_schedule_events (schedule, id);
