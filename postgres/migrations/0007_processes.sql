-- litequeue PostgreSQL schema version 7: the processes working the queue
-- (SQLite's migration 0014).
--
-- lq_processes has one row per started queue: its random id, host name,
-- pid, start time, the queues and kinds it works (a JSON object of queue to
-- kinds), the library version, the heartbeat interval and time (Unix
-- nanoseconds), and, as of the last heartbeat, how many jobs it ran and the
-- ids of some of them. A clean Stop deletes the row; rows whose heartbeat is
-- older than the retention are deleted by the heartbeats of the others.
-- lq_jobs.process is the process whose claim took the row; lq_attempts
-- records the process, host and pid of each attempt. ADD COLUMN without a
-- default rewrites no row.
CREATE TABLE lq_processes (
    id           bigint PRIMARY KEY,
    host         text   NOT NULL,
    pid          bigint NOT NULL,
    started_at   bigint NOT NULL,
    heartbeat_at bigint NOT NULL,
    interval     bigint NOT NULL,
    queues       text   NOT NULL,
    version      text   NOT NULL,
    running      bigint NOT NULL DEFAULT 0,
    held         text   NOT NULL DEFAULT '[]'
);

ALTER TABLE lq_jobs ADD COLUMN process bigint;
ALTER TABLE lq_attempts ADD COLUMN process bigint;
ALTER TABLE lq_attempts ADD COLUMN host text;
ALTER TABLE lq_attempts ADD COLUMN pid bigint;
