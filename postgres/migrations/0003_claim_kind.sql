-- litequeue PostgreSQL schema version 3: the claim is a range of an index
-- that holds the kind (SQLite's migration 0009).
--
-- The claim takes the due rows of the kinds its process handles. With the
-- live rows indexed by (queue, priority, visible_at, id), due rows of a
-- kind no process handles (a kind enqueued before its workers exist, or one
-- whose handler was removed) sat in front of every claim, which stepped
-- over all of them on each call. lq_jobs_kind_due, which replaces that
-- index, puts each kind's live rows of a queue and priority in due order of
-- their own: the claim reads one range per kind it handles and merges them,
-- whatever else the queue holds. The walk over a queue's priorities reads
-- its leading columns; the dashboard's oldest ready job walks its kinds.
-- With one index on the live rows the planner has no other ordered path to
-- the claim's rows, whatever its statistics say of the kinds.
--
-- Building the index locks lq_jobs against writes until it is built
-- (seconds per million live rows; only live rows are indexed).
DROP INDEX lq_jobs_claim;
CREATE INDEX lq_jobs_kind_due ON lq_jobs (queue, priority, kind, visible_at, id) WHERE state IN (0, 1);
