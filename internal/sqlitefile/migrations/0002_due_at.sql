-- litequeue schema version 2.
--
-- due_at is the time the job's current (or last) attempt became due: the
-- visibility timestamp the claim found. The claim writes it and hands its
-- batch to the workers in priority, then due_at order, so a retried or
-- requeued job takes its place by when it became due again, not by when it
-- was first enqueued. NULL until the first claim.
ALTER TABLE lq_jobs ADD COLUMN due_at INTEGER;
