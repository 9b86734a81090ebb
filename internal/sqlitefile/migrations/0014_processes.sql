-- litequeue schema version 14: the processes working the queue.
--
-- lq_processes has one row per started queue (a Queue after Start): its
-- random id, host name, pid, start time, the queues and kinds it works (a
-- JSON object of queue to kinds), the library version, the heartbeat
-- interval and time (Unix nanoseconds, the queue's Clock), and, as of the
-- last heartbeat, how many jobs it ran and the ids of some of them (a JSON
-- array). A clean Stop deletes the row; rows whose heartbeat is older than
-- the retention are deleted by the heartbeats of the others.
--
-- lq_jobs.process is the id of the process whose claim took the row (set by
-- the claim, left as it is afterwards). lq_attempts records the process,
-- host and pid that ran each attempt. Both are plain ADD COLUMNs: no row is
-- rewritten and no index is added.
CREATE TABLE lq_processes (
    id           INTEGER PRIMARY KEY,
    host         TEXT    NOT NULL,
    pid          INTEGER NOT NULL,
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    interval     INTEGER NOT NULL,
    queues       TEXT    NOT NULL,
    version      TEXT    NOT NULL,
    running      INTEGER NOT NULL DEFAULT 0,
    held         TEXT    NOT NULL DEFAULT '[]'
) STRICT;

ALTER TABLE lq_jobs ADD COLUMN process INTEGER;
ALTER TABLE lq_attempts ADD COLUMN process INTEGER;
ALTER TABLE lq_attempts ADD COLUMN host TEXT;
ALTER TABLE lq_attempts ADD COLUMN pid INTEGER;
