-- litequeue schema: progress, output and uniqueness of jobs.
--
-- progress (a fraction in [0, 1]), progress_msg and progress_at (when it was
-- reported, from the queue's Clock) are the last progress a handler
-- reported; NULL progress_at means none. output is the JSON result a handler
-- set, kept with the row while it is retained (completed or dead).
--
-- unique_key is the hash of a unique job's kind, chosen payload and period
-- bucket; unique_states is the bitmask (bit n: stored state n) of the states
-- in which a job holding the key blocks another: the partial unique index
-- makes the check one indexed lookup and the database enforce it.
ALTER TABLE lq_jobs ADD COLUMN progress REAL;
ALTER TABLE lq_jobs ADD COLUMN progress_msg TEXT;
ALTER TABLE lq_jobs ADD COLUMN progress_at INTEGER;
ALTER TABLE lq_jobs ADD COLUMN output BLOB;
ALTER TABLE lq_jobs ADD COLUMN unique_key TEXT;
ALTER TABLE lq_jobs ADD COLUMN unique_states INTEGER;

CREATE UNIQUE INDEX lq_jobs_unique ON lq_jobs (unique_key)
    WHERE unique_key IS NOT NULL AND ((unique_states >> state) & 1) = 1;
