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
