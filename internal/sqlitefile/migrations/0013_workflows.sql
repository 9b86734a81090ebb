-- litequeue schema version 13: workflows, jobs that wait for other jobs.
--
-- A job enqueued with parents (a workflow's node with dependencies) is
-- stored in state 5, waiting: never in the claim index (partial on state
-- IN (0, 1)), never claimed. waits counts its parents that have not
-- finished the way it needs; the transaction that records a parent's final
-- outcome updates only that parent's children (lq_deps_parent) and makes a
-- child pending when its count falls to 0.
ALTER TABLE lq_jobs ADD COLUMN waits INTEGER NOT NULL DEFAULT 0;

-- One row per dependency edge. mode: 0 the child needs the parent's
-- success (a parent that dies or is cancelled cancels the child), 1 the
-- child runs once the parent finished whatever the outcome. done: 0 the
-- parent has not finished, 1 it succeeded, 2 it died or was cancelled.
-- output is the parent's output (Delivery.SetOutput), copied here when it
-- succeeded, so that the child reads it after the parent's row is deleted
-- (completed jobs are deleted unless retained). A child's edges are
-- deleted when it succeeds.
CREATE TABLE lq_deps (
    child  INTEGER NOT NULL,
    parent INTEGER NOT NULL,
    mode   INTEGER NOT NULL DEFAULT 0,
    done   INTEGER NOT NULL DEFAULT 0,
    output BLOB,
    PRIMARY KEY (child, parent)
) STRICT, WITHOUT ROWID;

CREATE INDEX lq_deps_parent ON lq_deps (parent);

-- State 5 joins the CHECK of lq_jobs.state, edited in place as migration
-- 0007 did (every stored row stays valid).
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(sql, 'CHECK (state BETWEEN 0 AND 4)', 'CHECK (state BETWEEN 0 AND 5)')
WHERE type = 'table' AND name = 'lq_jobs';
PRAGMA writable_schema = OFF;
