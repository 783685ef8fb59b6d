-- converge pgstore: following a user's own table (Follow, TableSource).
-- Setup runs this file right after schema.sql, in the same transaction and
-- with the same {{.Schema}} substitution. Every statement is idempotent.
--
-- follow(table, coll) installs three triggers on the table; from then on
-- every INSERT, UPDATE, DELETE and TRUNCATE of it, by any client, appends
-- its changes to the log as collection coll:
--   converge_follow          AFTER ROW: one log row per changed row
--   converge_follow_stmt     AFTER STATEMENT: synchronous commit, NOTIFY
--   converge_follow_truncate AFTER TRUNCATE: a delete of every live key

-- Which table feeds which collection: one collection per table.
CREATE TABLE IF NOT EXISTS {{.Schema}}.follows (
    relid oid  PRIMARY KEY,              -- the table's pg_class oid
    coll  text COLLATE "C" NOT NULL UNIQUE
);

-- follow_key returns the key of row r (the row as jsonb) whose primary key
-- columns are cols: for one column its JSON text (a string's characters,
-- a number's digits), for several the JSON array of their values as
-- PostgreSQL prints jsonb ('[1, "a"]').
CREATE OR REPLACE FUNCTION {{.Schema}}.follow_key(r jsonb, cols text[])
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN cardinality(cols) = 1 THEN r ->> cols[1]
        ELSE (SELECT jsonb_agg(r -> c ORDER BY i)
                FROM unnest(cols) WITH ORDINALITY AS u(c, i))::text
    END
$$;

-- follow_append appends one change with a fresh revision. The revision is
-- taken in the statement that inserts it, so a reader's fill can hardly
-- take it first; if one does (the fill committed in the microseconds
-- between), ON CONFLICT DO NOTHING inserts nothing and the loop takes
-- another revision, instead of failing the user's statement with a unique
-- violation (the typed client retries in Go; a user's app would not).
-- Returns the change's revision.
CREATE OR REPLACE FUNCTION {{.Schema}}.follow_append(
    p_coll text, p_key text, p_op "char", p_value bytea)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    r bigint;
BEGIN
    LOOP
        INSERT INTO {{.Schema}}.log (rev, coll, key, op, value)
            VALUES (nextval('{{.Schema}}.rev'), p_coll, p_key, p_op, p_value)
            ON CONFLICT (rev) DO NOTHING
            RETURNING rev INTO r;
        IF r IS NOT NULL THEN
            RETURN r;
        END IF;
    END LOOP;
END $$;

-- The row trigger. TG_ARGV: the collection, then the primary key columns.
-- AFTER ROW triggers run at the end of the statement, with the changed row
-- locked (UPDATE, DELETE) or its index entry in place (INSERT): any other
-- writer of the same key has committed or is waiting for this transaction,
-- so the revision taken here keeps one key's changes in commit order.
-- An UPDATE that changes the primary key is two changes: a delete of the
-- old key, then a put of the new one at a higher revision (concurrent
-- writers may take revisions in between).
-- It is the price of every write of a followed table, hence written for
-- speed (§8.11 of the design): a one-column key is read inline rather than
-- through follow_key, and the put is inserted here rather than through
-- follow_append (each a function call per row; together they halved the
-- throughput of single-row UPDATEs).
CREATE OR REPLACE FUNCTION {{.Schema}}.follow_row()
RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r      jsonb;
    newkey text;
    oldkey text;
    got    bigint;
BEGIN
    IF TG_OP <> 'DELETE' THEN
        r := to_jsonb(NEW);
        IF TG_NARGS = 2 THEN
            newkey := r ->> TG_ARGV[1];
        ELSE
            newkey := {{.Schema}}.follow_key(r, TG_ARGV[1:TG_NARGS - 1]);
        END IF;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        IF TG_NARGS = 2 THEN
            oldkey := to_jsonb(OLD) ->> TG_ARGV[1];
        ELSE
            oldkey := {{.Schema}}.follow_key(to_jsonb(OLD), TG_ARGV[1:TG_NARGS - 1]);
        END IF;
        IF oldkey IS DISTINCT FROM newkey THEN  -- a DELETE, or a new key
            PERFORM {{.Schema}}.follow_append(TG_ARGV[0], oldkey, 'd', NULL);
        END IF;
    END IF;
    IF newkey IS NOT NULL THEN
        LOOP  -- as follow_append
            INSERT INTO {{.Schema}}.log AS l (rev, coll, key, op, value)
                VALUES (nextval('{{.Schema}}.rev'), TG_ARGV[0], newkey, 'p',
                        convert_to(r::text, 'UTF8'))
                ON CONFLICT (rev) DO NOTHING
                RETURNING l.rev INTO got;
            EXIT WHEN got IS NOT NULL;
        END LOOP;
    END IF;
    RETURN NULL;
END $$;

-- The statement trigger. TG_ARGV[0]: the NOTIFY channel ('' for none).
-- Once per statement rather than per row: a NOTIFY makes PostgreSQL
-- serialise the commits of notifying transactions, and one per transaction
-- is all a reader needs (equal notifications of a transaction fold into
-- one). Synchronous commit, as in write(): a change a reader passed must
-- not be lost in a crash and its revision handed out again.
CREATE OR REPLACE FUNCTION {{.Schema}}.follow_stmt()
RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'on', true);
    IF TG_ARGV[0] <> '' THEN
        PERFORM pg_notify(TG_ARGV[0], '');
    END IF;
    RETURN NULL;
END $$;

-- The TRUNCATE trigger. TG_ARGV[0]: the collection. TRUNCATE holds the
-- table's ACCESS EXCLUSIVE lock, so no write of the table is in flight:
-- every key whose latest change is a put is deleted.
CREATE OR REPLACE FUNCTION {{.Schema}}.follow_truncate()
RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM {{.Schema}}.follow_append(TG_ARGV[0], l.key, 'd', NULL)
       FROM (SELECT DISTINCT ON (key) key, op FROM {{.Schema}}.log
              WHERE coll = TG_ARGV[0] ORDER BY key, rev DESC) l
      WHERE l.op = 'p';
    RETURN NULL;
END $$;

-- follow makes p_coll follow p_table (see Follow in table.go). Idempotent:
-- if this schema's triggers are on the table already, for p_coll, it only
-- replaces them (an upgrade, or notify turned on or off) and copies
-- nothing. Otherwise it copies the table: a delete of every key the log
-- holds live for p_coll and the table lacks, then a put of every row.
-- Returns the number of rows copied.
CREATE OR REPLACE FUNCTION {{.Schema}}.follow(
    p_table regclass, p_coll text, p_notify boolean DEFAULT true)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    cols    text[];
    deferred boolean;
    tgfunc  regproc;
    args    text;
    channel text := '';
    copied  bigint := 0;
BEGIN
    PERFORM set_config('synchronous_commit', 'on', true);
    -- Blocks every writer of the table (and every other follow of it) until
    -- commit, so no change falls between the copy and the trigger; readers
    -- go on.
    EXECUTE format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', p_table);

    SELECT array_agg(a.attname::text ORDER BY k.i), bool_or(c.condeferrable)
      INTO cols, deferred
      FROM pg_constraint c
     CROSS JOIN unnest(c.conkey) WITH ORDINALITY AS k(attnum, i)
      JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
     WHERE c.conrelid = p_table AND c.contype = 'p';
    IF cols IS NULL THEN
        RAISE EXCEPTION 'pgstore: table % has no primary key', p_table
            USING ERRCODE = '55000';
    END IF;
    -- A deferrable key lets one statement swap two keys: the row trigger
    -- would log "delete a, put b, delete b, put a" and lose b.
    IF deferred THEN
        RAISE EXCEPTION 'pgstore: the primary key of table % is DEFERRABLE', p_table
            USING ERRCODE = '55000';
    END IF;
    -- A table dropped while followed leaves its row: forget it, so that
    -- its collection can follow a new table.
    DELETE FROM {{.Schema}}.follows f
     WHERE NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = f.relid);
    IF EXISTS (SELECT 1 FROM {{.Schema}}.follows
                WHERE (relid = p_table) <> (coll = p_coll)) THEN
        RAISE EXCEPTION 'pgstore: table % or collection % is already followed with another',
            p_table, p_coll USING ERRCODE = '55000';
    END IF;
    SELECT t.tgfoid INTO tgfunc FROM pg_trigger t
     WHERE t.tgrelid = p_table AND t.tgname = 'converge_follow';
    IF tgfunc IS NOT NULL AND tgfunc <> '{{.Schema}}.follow_row'::regproc THEN
        RAISE EXCEPTION 'pgstore: table % is followed by another schema (%)', p_table, tgfunc
            USING ERRCODE = '55000';
    END IF;

    IF p_notify THEN
        SELECT nspname INTO channel FROM pg_namespace WHERE oid = '{{.Schema}}'::regnamespace;
    END IF;
    SELECT string_agg(quote_literal(x), ', ') INTO args FROM unnest(p_coll || cols) AS x;
    EXECUTE format('CREATE OR REPLACE TRIGGER converge_follow
        AFTER INSERT OR UPDATE OR DELETE ON %s
        FOR EACH ROW EXECUTE FUNCTION {{.Schema}}.follow_row(%s)', p_table, args);
    EXECUTE format('CREATE OR REPLACE TRIGGER converge_follow_stmt
        AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON %s
        FOR EACH STATEMENT EXECUTE FUNCTION {{.Schema}}.follow_stmt(%L)', p_table, channel);
    EXECUTE format('CREATE OR REPLACE TRIGGER converge_follow_truncate
        AFTER TRUNCATE ON %s
        FOR EACH STATEMENT EXECUTE FUNCTION {{.Schema}}.follow_truncate(%L)', p_table, p_coll);

    -- Fire also under session_replication_role = replica (a logical
    -- replication subscriber's apply worker, a restore that sets it):
    -- otherwise those writes change the table and never reach the log.
    -- ALTER TABLE needs the table's owner; a role with only TRIGGER on it
    -- keeps triggers that fire in origin mode only.
    IF pg_has_role((SELECT relowner FROM pg_class WHERE oid = p_table), 'USAGE') THEN
        EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER converge_follow', p_table);
        EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER converge_follow_stmt', p_table);
        EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER converge_follow_truncate', p_table);
    END IF;

    IF tgfunc IS NOT NULL AND EXISTS (SELECT 1 FROM {{.Schema}}.follows
                                       WHERE relid = p_table AND coll = p_coll) THEN
        RETURN 0;  -- followed already: the log is up to date
    END IF;
    INSERT INTO {{.Schema}}.follows (relid, coll) VALUES (p_table, p_coll)
        ON CONFLICT (relid) DO NOTHING;
    EXECUTE format('SELECT {{.Schema}}.follow_append($1, l.key, ''d'', NULL)
          FROM (SELECT DISTINCT ON (key) key, op FROM {{.Schema}}.log
                 WHERE coll = $1 ORDER BY key, rev DESC) l
         WHERE l.op = ''p'' AND NOT EXISTS (SELECT 1 FROM %s t
                 WHERE {{.Schema}}.follow_key(to_jsonb(t), $2) = l.key)', p_table)
        USING p_coll, cols;
    EXECUTE format('SELECT count({{.Schema}}.follow_append($1, {{.Schema}}.follow_key(r, $2), ''p'',
                                   convert_to(r::text, ''UTF8'')))
          FROM (SELECT to_jsonb(t) AS r FROM %s t) x', p_table)
        USING p_coll, cols INTO copied;
    RETURN copied;
END $$;

-- unfollow removes this schema's triggers from p_table and forgets it.
-- The log keeps what it has: the collection's informers keep the table as
-- it was until it is followed again (which copies it anew).
CREATE OR REPLACE FUNCTION {{.Schema}}.unfollow(p_table regclass)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = p_table AND tgname = 'converge_follow'
                  AND tgfoid = '{{.Schema}}.follow_row'::regproc) THEN
        EXECUTE format('DROP TRIGGER converge_follow ON %s', p_table);
        EXECUTE format('DROP TRIGGER IF EXISTS converge_follow_stmt ON %s', p_table);
        EXECUTE format('DROP TRIGGER IF EXISTS converge_follow_truncate ON %s', p_table);
    END IF;
    DELETE FROM {{.Schema}}.follows WHERE relid = p_table;
END $$;
