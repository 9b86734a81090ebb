-- litequeue schema version 10: each queue's rows counted by state.
--
-- Stats read every row of lq_jobs to count a queue's jobs: seconds at
-- millions of retained, dead or waiting jobs. lq_counts holds, per queue
-- and state, how many rows lq_jobs has — pending rows also per due bucket,
-- visible_at >> 38 (2^38 ns, about 4.6 minutes), so that ready and
-- scheduled are told apart by whole buckets but the one holding now; due
-- is 0 for the other states. Each write of the store adds what it moved,
-- in its own transaction, once per transaction and not per row (a trigger
-- per row cost the drain 6% and halved a bulk insert). A count that falls
-- to 0 is deleted. This migration counts the existing rows once.
CREATE TABLE lq_counts (
  queue TEXT NOT NULL,
  state INTEGER NOT NULL,
  due INTEGER NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY (queue, state, due)
) WITHOUT ROWID;
INSERT INTO lq_counts (queue, state, due, n)
  SELECT queue, state, CASE WHEN state = 0 THEN visible_at >> 38 ELSE 0 END, count(*)
  FROM lq_jobs GROUP BY 1, 2, 3;
