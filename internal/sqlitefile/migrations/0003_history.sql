-- litequeue schema: the per-minute history of outcomes per queue, for
-- dashboards (succeeded jobs are deleted, so their counts live here).
--
-- One row per queue and minute (minute = Unix nanoseconds / 60e9, from the
-- queue's Clock) with the events of that minute. Rows older than the
-- retention (7 days) are deleted when the history is flushed.
-- IF NOT EXISTS: files created before the schema version was raised may
-- already hold it.

CREATE TABLE IF NOT EXISTS lq_history (
    queue     TEXT    NOT NULL,
    minute    INTEGER NOT NULL,
    enqueued  INTEGER NOT NULL DEFAULT 0,
    succeeded INTEGER NOT NULL DEFAULT 0,
    retried   INTEGER NOT NULL DEFAULT 0,
    dead      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, minute)
) STRICT, WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS lq_history_minute ON lq_history (minute);
