-- litequeue PostgreSQL schema version 5: flow control (SQLite's migration
-- 0012; docs/flow-control.md).
--
-- lq_queues holds each queue's limits (0: no limit): concurrency,
-- key_concurrency, ordered, rate_n per rate_per nanoseconds and key_rate_n
-- per key_rate_per. lq_jobs.grp is a job's group, NULL for none;
-- lq_jobs.flow is set by the claim of a limited queue on the rows it
-- starts, and lq_jobs_flow indexes exactly the running rows so marked, so
-- that a claim counts what runs of its queue (or of one group) in a range of
-- its own. Rows of queues without limits never enter it. The columns are
-- added without rewriting the table; building the index reads lq_jobs once.
ALTER TABLE lq_queues ADD COLUMN concurrency integer NOT NULL DEFAULT 0;
ALTER TABLE lq_queues ADD COLUMN key_concurrency integer NOT NULL DEFAULT 0;
ALTER TABLE lq_queues ADD COLUMN ordered boolean NOT NULL DEFAULT false;
ALTER TABLE lq_queues ADD COLUMN rate_n integer NOT NULL DEFAULT 0;
ALTER TABLE lq_queues ADD COLUMN rate_per bigint NOT NULL DEFAULT 0;
ALTER TABLE lq_queues ADD COLUMN key_rate_n integer NOT NULL DEFAULT 0;
ALTER TABLE lq_queues ADD COLUMN key_rate_per bigint NOT NULL DEFAULT 0;

ALTER TABLE lq_jobs ADD COLUMN grp text COLLATE "C";
ALTER TABLE lq_jobs ADD COLUMN flow smallint;

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
    queue text   NOT NULL,
    grp   text   NOT NULL COLLATE "C",
    at    bigint NOT NULL,
    id    bigint NOT NULL,
    PRIMARY KEY (queue, at, id)
);
