-- litequeue PostgreSQL schema version 6: workflows (SQLite's migration
-- 0013). A job with parents waits in state 5, outside the claim index
-- (partial on state IN (0, 1)); waits counts its parents that have not
-- finished the way it needs. lq_deps holds the edges: mode 0 needs the
-- parent's success, 1 runs after the parent finished whatever the outcome;
-- done 0 the parent has not finished, 1 succeeded, 2 died or was cancelled;
-- output is the parent's output, copied at its success so that its
-- children read it after its row is deleted.
ALTER TABLE lq_jobs ADD COLUMN waits integer NOT NULL DEFAULT 0;

-- State 5 joins the CHECK; NOT VALID skips re-reading the stored rows,
-- every one of which satisfied the narrower check (new writes are checked).
ALTER TABLE lq_jobs DROP CONSTRAINT lq_jobs_state_check;
ALTER TABLE lq_jobs ADD CONSTRAINT lq_jobs_state_check CHECK (state BETWEEN 0 AND 5) NOT VALID;

CREATE TABLE lq_deps (
    child  bigint   NOT NULL,
    parent bigint   NOT NULL,
    mode   smallint NOT NULL DEFAULT 0,
    done   smallint NOT NULL DEFAULT 0,
    output bytea,
    PRIMARY KEY (child, parent)
);

CREATE INDEX lq_deps_parent ON lq_deps (parent);

-- lq_resolve records the final outcome of job p_parent for its children
-- (p_done 1: it succeeded, 2: it died or was cancelled) and moves them: a
-- child whose last unmet parent this was becomes pending, due at the later
-- of its own due time and p_now; on a failure, a child that needs the
-- parent's success is cancelled with reason p_why, and its own children
-- are resolved the same way, transitively. The queues of the children made
-- pending are notified on p_channel (the store's channel). Each step reads only the edges
-- of one finished job (lq_deps_parent), never its siblings; an edge counts
-- once (done = 0), so resolving a parent twice changes nothing.
CREATE FUNCTION lq_resolve(p_parent bigint, p_done smallint, p_now bigint, p_why text, p_channel text)
RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    work  bigint[]   := ARRAY[p_parent];
    dones smallint[] := ARRAY[p_done];
    whys  text[]     := ARRAY[p_why];
    i     integer    := 1;
    cur   bigint;
    c     record;
BEGIN
    WHILE i <= cardinality(work) LOOP
        cur := work[i];
        FOR c IN
            UPDATE lq_jobs j SET waits = j.waits - 1,
                state = CASE WHEN j.waits = 1 THEN 0 ELSE 5 END,
                visible_at = CASE WHEN j.waits = 1 THEN greatest(j.visible_at, p_now) ELSE j.visible_at END
            FROM lq_deps d
            WHERE d.parent = cur AND d.done = 0 AND (dones[i] = 1 OR d.mode = 1) AND j.id = d.child AND j.state = 5
            RETURNING j.queue, j.state
        LOOP
            IF c.state = 0 THEN
                PERFORM pg_notify(p_channel, c.queue);
            END IF;
        END LOOP;
        IF dones[i] <> 1 THEN
            FOR c IN
                UPDATE lq_jobs j SET state = 4, lease = NULL, finished_at = p_now, dead_reason = whys[i]
                FROM lq_deps d
                WHERE d.parent = cur AND d.done = 0 AND d.mode = 0 AND j.id = d.child AND j.state = 5
                RETURNING j.id
            LOOP
                work  := work || c.id;
                dones := dones || 2::smallint;
                whys  := whys || ('workflow: parent job ' || c.id::text || ' was cancelled');
            END LOOP;
        END IF;
        UPDATE lq_deps SET done = dones[i] WHERE parent = cur AND done = 0;
        i := i + 1;
    END LOOP;
END
$$;

-- lq_flow_done writes the success of a workflow's job (p_flow: 1 it has
-- children, 2 it has parents, both bits possible) under lease p_lease:
-- kept as completed at p_keep_at when that is not 0, else deleted with its
-- history; then its own edges go (it needs its parents' outputs no more),
-- its output is copied to its children's edges and they are resolved at
-- p_now (notifying on p_channel). It answers false, changing nothing, when the lease was lost.
CREATE FUNCTION lq_flow_done(p_id bigint, p_lease bigint, p_keep_at bigint, p_now bigint, p_flow integer, p_channel text)
RETURNS boolean
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    out bytea;
    hit boolean;
BEGIN
    IF p_keep_at <> 0 THEN
        UPDATE lq_jobs SET state = 2, lease = NULL, finished_at = p_keep_at, visible_at = p_keep_at
        WHERE id = p_id AND lease = p_lease AND state = 1 RETURNING output INTO out;
        hit := FOUND;
    ELSE
        DELETE FROM lq_jobs WHERE id = p_id AND lease = p_lease AND state = 1 RETURNING output INTO out;
        hit := FOUND;
        IF hit THEN
            DELETE FROM lq_attempts WHERE job_id = p_id;
        END IF;
    END IF;
    IF NOT hit THEN
        RETURN false;
    END IF;
    IF p_flow & 2 <> 0 THEN
        DELETE FROM lq_deps WHERE child = p_id;
    END IF;
    IF p_flow & 1 <> 0 THEN
        UPDATE lq_deps SET output = out WHERE parent = p_id AND done = 0;
        PERFORM lq_resolve(p_id, 1::smallint, p_now, '', p_channel);
    END IF;
    RETURN true;
END
$$;

-- lq_revive, after the dead job p_parent was requeued, brings back to
-- waiting the dependants its death cancelled (their edges that need its
-- success, failed, to a job the workflow cancelled), and theirs
-- transitively, each with its count of unmet parents; one that another
-- failed parent still blocks stays cancelled.
CREATE FUNCTION lq_revive(p_parent bigint)
RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    work    bigint[] := ARRAY[p_parent];
    i       integer  := 1;
    cur     bigint;
    kids    bigint[];
    c       bigint;
    unmet   bigint;
    blocked bigint;
BEGIN
    WHILE i <= cardinality(work) LOOP
        cur := work[i];
        SELECT coalesce(array_agg(d.child ORDER BY d.child), '{}') INTO kids
        FROM lq_deps d JOIN lq_jobs j ON j.id = d.child
        WHERE d.parent = cur AND d.mode = 0 AND d.done = 2 AND j.state = 4 AND j.dead_reason LIKE 'workflow: parent job %';
        UPDATE lq_deps SET done = 0 WHERE parent = cur AND mode = 0 AND done = 2;
        FOREACH c IN ARRAY kids LOOP
            SELECT count(*) FILTER (WHERE done = 0), count(*) FILTER (WHERE done = 2 AND mode = 0)
            INTO unmet, blocked FROM lq_deps WHERE child = c;
            IF blocked = 0 AND unmet > 0 THEN
                UPDATE lq_jobs SET state = 5, waits = unmet, finished_at = NULL, dead_reason = NULL
                WHERE id = c AND state = 4;
                IF FOUND THEN
                    work := work || c;
                END IF;
            END IF;
        END LOOP;
        i := i + 1;
    END LOOP;
END
$$;
