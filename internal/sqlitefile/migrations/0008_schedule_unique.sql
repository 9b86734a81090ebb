-- litequeue schema version 8: a schedule's jobs keep their type's uniqueness.
--
-- uniq is the UniqueOptions of the schedule's job type, as JSON, read from
-- the job at registration ('' for none): the scheduler enqueues each
-- occurrence under the same uniqueness rule as an Enqueue of that job.
ALTER TABLE lq_schedules ADD COLUMN uniq TEXT NOT NULL DEFAULT '';
