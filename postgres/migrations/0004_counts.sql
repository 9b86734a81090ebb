-- litequeue PostgreSQL schema version 4: each queue's rows counted by state
-- (SQLite's migration 0010).
--
-- Stats counted every row of lq_jobs: hundreds of milliseconds at a million
-- jobs. lq_counts holds, per queue and state, how many rows lq_jobs has —
-- pending rows also per due bucket, visible_at >> 38 (2^38 ns, about 4.6
-- minutes), so that ready and scheduled are told apart by whole buckets but
-- the one holding now; due is 0 for the other states.
--
-- A statement trigger per kind of write (not a row trigger: once per
-- statement, from its transition tables) adds what the statement moved to
-- lq_count_deltas, in the statement's transaction. The deltas are only
-- inserted, never updated, so processes writing at once never wait for one
-- another on a counter row. About one write statement in a hundred also
-- folds the committed deltas into lq_counts (lq_counts_fold), unless
-- another transaction is folding; Stats adds lq_counts and the deltas not
-- yet folded. This migration counts the existing rows once.
CREATE TABLE lq_counts (
    queue text NOT NULL,
    state smallint NOT NULL,
    due bigint NOT NULL,
    n bigint NOT NULL,
    PRIMARY KEY (queue, state, due)
);
CREATE TABLE lq_count_deltas (
    queue text NOT NULL,
    state smallint NOT NULL,
    due bigint NOT NULL,
    n bigint NOT NULL
);
INSERT INTO lq_counts (queue, state, due, n)
    SELECT queue, state, CASE WHEN state = 0 THEN visible_at >> 38 ELSE 0 END, count(*)
    FROM lq_jobs GROUP BY 1, 2, 3;

-- lq_counts_fold moves the committed deltas into lq_counts and deletes the
-- counts that fell to 0; it does nothing while another transaction of this
-- schema holds the fold (until that transaction ends).
CREATE FUNCTION lq_counts_fold() RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtextextended('litequeue counts ' || current_schema(), 0)) THEN
        RETURN;
    END IF;
    WITH d AS (DELETE FROM lq_count_deltas RETURNING queue, state, due, n),
         s AS (SELECT queue, state, due, sum(n) AS n FROM d GROUP BY 1, 2, 3)
    INSERT INTO lq_counts AS c (queue, state, due, n)
        SELECT queue, state, due, n FROM s WHERE n <> 0
        ON CONFLICT (queue, state, due) DO UPDATE SET n = c.n + excluded.n;
    DELETE FROM lq_counts WHERE n = 0;
END
$$;

CREATE FUNCTION lq_counts_inserted() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    INSERT INTO lq_count_deltas (queue, state, due, n)
        SELECT queue, state, CASE WHEN state = 0 THEN visible_at >> 38 ELSE 0 END, count(*)
        FROM lq_new GROUP BY 1, 2, 3;
    IF random() < 0.01 THEN
        PERFORM lq_counts_fold();
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION lq_counts_deleted() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    INSERT INTO lq_count_deltas (queue, state, due, n)
        SELECT queue, state, CASE WHEN state = 0 THEN visible_at >> 38 ELSE 0 END, -count(*)
        FROM lq_old GROUP BY 1, 2, 3;
    IF random() < 0.01 THEN
        PERFORM lq_counts_fold();
    END IF;
    RETURN NULL;
END
$$;

-- An update that moves no row between counts (a lease extension, progress)
-- adds nothing.
CREATE FUNCTION lq_counts_updated() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    INSERT INTO lq_count_deltas (queue, state, due, n)
        SELECT queue, state, due, sum(n) FROM (
            SELECT queue, state, CASE WHEN state = 0 THEN visible_at >> 38 ELSE 0 END AS due, -1 AS n FROM lq_old
            UNION ALL
            SELECT queue, state, CASE WHEN state = 0 THEN visible_at >> 38 ELSE 0 END, 1 FROM lq_new) m
        GROUP BY 1, 2, 3 HAVING sum(n) <> 0;
    IF random() < 0.01 THEN
        PERFORM lq_counts_fold();
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER lq_counts_inserted AFTER INSERT ON lq_jobs
    REFERENCING NEW TABLE AS lq_new FOR EACH STATEMENT EXECUTE FUNCTION lq_counts_inserted();
CREATE TRIGGER lq_counts_deleted AFTER DELETE ON lq_jobs
    REFERENCING OLD TABLE AS lq_old FOR EACH STATEMENT EXECUTE FUNCTION lq_counts_deleted();
CREATE TRIGGER lq_counts_updated AFTER UPDATE ON lq_jobs
    REFERENCING OLD TABLE AS lq_old NEW TABLE AS lq_new FOR EACH STATEMENT EXECUTE FUNCTION lq_counts_updated();
