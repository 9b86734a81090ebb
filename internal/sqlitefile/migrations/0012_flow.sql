-- litequeue schema version 12: flow control (docs/flow-control.md).
--
-- * lq_queues holds each queue's limits, the same for every process on the
--   file: concurrency (jobs of the queue running at once, 0 for no limit),
--   key_concurrency (jobs of one group running at once), ordered (1: the
--   jobs of a group run one at a time in id order), rate_n per rate_per
--   nanoseconds (starts of the queue's jobs in any window) and key_rate_n
--   per key_rate_per (starts per group). Zero means no limit.
-- * lq_jobs.grp is a job's group (its key for the per-group limits), NULL
--   for none.
-- * lq_jobs.flow is set by the claim of a limited queue on the rows it
--   starts: lq_jobs_flow indexes exactly the running rows so marked, by
--   queue, group and lease end, so that a claim counts what runs of its
--   queue (or of one group) in a range of its own. Rows of queues without
--   limits never enter it. Building the index reads lq_jobs once (no row
--   matches yet); the columns are added without rewriting the table.
ALTER TABLE lq_queues ADD COLUMN concurrency INTEGER NOT NULL DEFAULT 0;
ALTER TABLE lq_queues ADD COLUMN key_concurrency INTEGER NOT NULL DEFAULT 0;
ALTER TABLE lq_queues ADD COLUMN ordered INTEGER NOT NULL DEFAULT 0;
ALTER TABLE lq_queues ADD COLUMN rate_n INTEGER NOT NULL DEFAULT 0;
ALTER TABLE lq_queues ADD COLUMN rate_per INTEGER NOT NULL DEFAULT 0;
ALTER TABLE lq_queues ADD COLUMN key_rate_n INTEGER NOT NULL DEFAULT 0;
ALTER TABLE lq_queues ADD COLUMN key_rate_per INTEGER NOT NULL DEFAULT 0;

ALTER TABLE lq_jobs ADD COLUMN grp TEXT;
ALTER TABLE lq_jobs ADD COLUMN flow INTEGER;

CREATE INDEX lq_jobs_flow ON lq_jobs (queue, grp, visible_at) WHERE state = 1 AND flow IS NOT NULL;

-- The live rows of each group in id order, for ordered groups: a claim
-- takes a row of an ordered group only when it is the group's first live
-- row (one seek). Only rows with a group enter it.
CREATE INDEX lq_jobs_group_live ON lq_jobs (queue, grp, id) WHERE state IN (0, 1) AND grp IS NOT NULL;

-- The starts of the jobs of rate-limited queues, one row per start, kept
-- for the longest window of the queue's rates: a claim counts the starts
-- of the window (of the queue, or of one group; grp '' for none) and
-- deletes those older than the window by more than a minute.
CREATE TABLE lq_flow_starts (
    queue TEXT    NOT NULL,
    grp   TEXT    NOT NULL,
    at    INTEGER NOT NULL,
    id    INTEGER NOT NULL,
    PRIMARY KEY (queue, at, id)
) STRICT, WITHOUT ROWID;
