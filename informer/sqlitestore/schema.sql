-- converge sqlitestore schema. Open runs it in one write transaction; every
-- statement is idempotent.

-- The change log: one row per change of any collection. AUTOINCREMENT
-- makes SQLite keep the highest revision ever handed out in
-- sqlite_sequence, so that a revision is never reused, not even after
-- compaction has deleted the newest rows of the log.
CREATE TABLE IF NOT EXISTS log (
    rev   INTEGER PRIMARY KEY AUTOINCREMENT,
    coll  TEXT    NOT NULL,
    key   TEXT    NOT NULL,
    op    INTEGER NOT NULL CHECK (op IN (1, 2)), -- 1 put, 2 delete
    value BLOB                                   -- NULL for a delete
);
-- Watch reads one collection's changes after a revision.
CREATE INDEX IF NOT EXISTS log_coll_rev ON log (coll, rev);

-- The current revision of every key: List's and Get's index into log,
-- and what a compare-and-swap compares.
CREATE TABLE IF NOT EXISTS head (
    coll TEXT    NOT NULL,
    key  TEXT    NOT NULL,
    rev  INTEGER NOT NULL,
    PRIMARY KEY (coll, key)
) WITHOUT ROWID;
-- Compaction keeps the log rows that are some key's head.
CREATE INDEX IF NOT EXISTS head_rev ON head (rev);

-- Identity of the store. store_id is drawn when the file is created;
-- compact_rev: every change at or below it may be gone from log, and a
-- Watch after a revision below it is ErrRevisionExpired.
CREATE TABLE IF NOT EXISTS meta (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    store_id    TEXT    NOT NULL,
    compact_rev INTEGER NOT NULL
);

-- objects is how a person or another program writes desired state with
-- the sqlite3 command line: INSERT (or UPDATE) sets a key's value, DELETE
-- removes the key, each as one change in the log that running informers
-- pick up (see the package documentation for the bound).
CREATE VIEW IF NOT EXISTS objects AS
    SELECT h.coll AS coll, h.key AS key, h.rev AS rev, l.value AS value
    FROM head h JOIN log l ON l.rev = h.rev;

CREATE TRIGGER IF NOT EXISTS objects_insert INSTEAD OF INSERT ON objects
BEGIN
    INSERT INTO log (coll, key, op, value) VALUES (NEW.coll, NEW.key, 1, NEW.value);
    INSERT INTO head (coll, key, rev) VALUES (NEW.coll, NEW.key, last_insert_rowid())
        ON CONFLICT (coll, key) DO UPDATE SET rev = excluded.rev;
END;

CREATE TRIGGER IF NOT EXISTS objects_update INSTEAD OF UPDATE OF value ON objects
BEGIN
    INSERT INTO log (coll, key, op, value) VALUES (OLD.coll, OLD.key, 1, NEW.value);
    UPDATE head SET rev = last_insert_rowid() WHERE coll = OLD.coll AND key = OLD.key;
END;

CREATE TRIGGER IF NOT EXISTS objects_delete INSTEAD OF DELETE ON objects
BEGIN
    INSERT INTO log (coll, key, op) VALUES (OLD.coll, OLD.key, 2);
    DELETE FROM head WHERE coll = OLD.coll AND key = OLD.key;
END;
