-- litequeue schema version 9: the claim is a range of an index that holds
-- the kind.
--
-- The claim takes the due rows of the kinds its process handles. With the
-- live rows indexed by (queue, priority, visible_at), due rows of a kind no
-- process handles (a kind enqueued before its workers exist, or one whose
-- handler was removed) sat in front of every claim, which stepped over all
-- of them on each call. lq_jobs_kind_due, which replaces that index, puts
-- each kind's live rows of a queue and priority in due order of their own:
-- the claim reads one range per kind it handles and merges them, whatever
-- else the queue holds. The walk over a queue's priorities reads its
-- leading columns; the dashboard's oldest ready job walks its kinds. One
-- index on the live rows, as before: an enqueue writes no more pages.
DROP INDEX lq_jobs_claim;
CREATE INDEX lq_jobs_kind_due ON lq_jobs (queue, priority, kind, visible_at) WHERE state IN (0, 1);
