-- litequeue schema version 10: each queue's rows counted by state.
--
-- Stats read every row of lq_jobs to count a queue's jobs: seconds at
-- millions of retained, dead or waiting jobs. lq_counts holds, per queue
-- and state, how many rows lq_jobs has: each write of the store adds what
-- it moved, in its own transaction, once per transaction and not per row
-- (a trigger per row cost the drain 6% and halved a bulk insert). A row
-- whose count fell to 0 may stay. This migration counts the existing rows
-- once.
CREATE TABLE lq_counts (
  queue TEXT NOT NULL,
  state INTEGER NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY (queue, state)
) WITHOUT ROWID;
INSERT INTO lq_counts (queue, state, n) SELECT queue, state, count(*) FROM lq_jobs GROUP BY queue, state;
