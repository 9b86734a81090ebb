-- litequeue schema version 7: the same CHECK on lq_jobs.state, written so
-- that it costs nothing per write.
--
-- SQLite evaluates `state IN (0, 1, 2, 3, 4)` by building a temporary
-- index of the five values for every row a statement writes: about a tenth
-- of a claim's cost. `state BETWEEN 0 AND 4` accepts exactly the same
-- values (state is an INTEGER of a STRICT table), so, as SQLite's ALTER TABLE
-- documentation allows for changes that leave every stored row valid, the
-- table's definition is edited in place instead of rebuilding the table; the
-- migration runner then bumps the schema version, so every connection
-- reloads the definition.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(sql, 'CHECK (state IN (0, 1, 2, 3, 4))', 'CHECK (state BETWEEN 0 AND 4)')
WHERE type = 'table' AND name = 'lq_jobs';
PRAGMA writable_schema = OFF;
