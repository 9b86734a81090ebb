-- litequeue schema version 11: a job's metadata, tags and trace context.
--
-- meta is NULL for a job enqueued without any, else a JSON object: "tags"
-- (an array of strings), "metadata" (an object of strings), "traceparent"
-- and "tracestate" (the W3C trace context of the enqueue) and "occurrence"
-- (the scheduled time a schedule's job runs for, in Unix nanoseconds).
-- lq_job_tags holds each tag of a job once more, in a table of its own, so
-- that a listing by tag reads one range of its primary key instead of the
-- jobs. It has no foreign key: a cascade would cost every deleted job (most
-- have no tags) a second delete program, twice the time of a completion's
-- delete. A listing joins each tag row to its job, so a row left by a
-- deleted job (ids are never reused) matches nothing; each tagged enqueue
-- deletes such rows among a few it samples (lq_job_tags_job), which keeps
-- them fewer than the live ones.
ALTER TABLE lq_jobs ADD COLUMN meta TEXT;

CREATE TABLE lq_job_tags (
    tag    TEXT    NOT NULL,
    job_id INTEGER NOT NULL,
    PRIMARY KEY (tag, job_id)
) STRICT, WITHOUT ROWID;

CREATE INDEX lq_job_tags_job ON lq_job_tags (job_id);

-- Schedules that start at once, end at a date or after a number of runs:
-- end_at (Unix nanoseconds, 0 for none), max_runs (0 for no limit),
-- run_count (the occurrences enqueued so far, triggers not counted) and
-- run_first (the first occurrence is the registration, 1, or the first
-- time the timing gives, 0).
ALTER TABLE lq_schedules ADD COLUMN end_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE lq_schedules ADD COLUMN max_runs INTEGER NOT NULL DEFAULT 0;
ALTER TABLE lq_schedules ADD COLUMN run_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE lq_schedules ADD COLUMN run_first INTEGER NOT NULL DEFAULT 0;
