-- litequeue PostgreSQL schema version 4: a job's metadata, tags and trace
-- context (SQLite's migration 0010).
--
-- meta is NULL for a job enqueued without any, else a JSON object: "tags"
-- (an array of strings), "metadata" (an object of strings), "traceparent"
-- and "tracestate" (the W3C trace context of the enqueue) and "occurrence"
-- (the scheduled time a schedule's job runs for, in Unix nanoseconds). A
-- listing by tag reads the GIN index of the tags (meta -> 'tags' @> ...),
-- which holds only the rows that have any meta.
ALTER TABLE lq_jobs ADD COLUMN meta jsonb;

CREATE INDEX lq_jobs_tags ON lq_jobs USING gin ((meta -> 'tags')) WHERE meta IS NOT NULL;

-- Schedules that start at once, end at a date or after a number of runs
-- (SQLite's migration 0010): end_at (Unix nanoseconds, 0 for none),
-- max_runs (0 for no limit), run_count (the occurrences enqueued so far,
-- triggers not counted) and run_first (the first occurrence is the
-- registration, or the first time the timing gives).
ALTER TABLE lq_schedules ADD COLUMN end_at bigint NOT NULL DEFAULT 0;
ALTER TABLE lq_schedules ADD COLUMN max_runs bigint NOT NULL DEFAULT 0;
ALTER TABLE lq_schedules ADD COLUMN run_count bigint NOT NULL DEFAULT 0;
ALTER TABLE lq_schedules ADD COLUMN run_first boolean NOT NULL DEFAULT false;
