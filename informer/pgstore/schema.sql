-- converge pgstore schema. Setup runs this file in one transaction, after
-- pg_advisory_xact_lock on the schema's name, with {{.Schema}} replaced by
-- the quoted schema name.
-- Every statement is idempotent; running it again upgrades functions in place.

CREATE SCHEMA IF NOT EXISTS {{.Schema}};

-- Revisions. Taken only after the changed key's row lock is held (see
-- write() and follow()), so one key's revisions are in commit order. Values
-- of rolled-back transactions, and the up-to-32 values a crash skips, are
-- holes that the reader fills. The first value is base (see meta).
CREATE SEQUENCE IF NOT EXISTS {{.Schema}}.rev AS bigint
    START WITH 1 CACHE 1;

-- Identity of the store. A Watch after a revision below base, or above the
-- sequence, is ErrRevisionExpired: the store was reset or restored.
-- compact_rev: every change at or below it may be gone from log.
CREATE TABLE IF NOT EXISTS {{.Schema}}.meta (
    id          int     PRIMARY KEY CHECK (id = 1),
    store_id    uuid    NOT NULL DEFAULT gen_random_uuid(),
    base        bigint  NOT NULL,
    compact_rev bigint  NOT NULL
);
-- A fresh store starts its revisions at the current time in microseconds,
-- so that a reset store's revisions are above every revision the old one
-- handed out (it would need a million writes per second to catch up).
DO $$
DECLARE b bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM {{.Schema}}.meta) THEN
        b := (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
        PERFORM setval('{{.Schema}}.rev', b, false);
        INSERT INTO {{.Schema}}.meta (id, base, compact_rev) VALUES (1, b, b - 1);
    END IF;
END $$;

-- The change log: one row per change of any collection, and fill rows
-- (op 'f', no collection) that stand for revisions no change will use.
CREATE TABLE IF NOT EXISTS {{.Schema}}.log (
    rev   bigint  PRIMARY KEY,
    coll  text    COLLATE "C",           -- NULL for a fill
    key   text    COLLATE "C",           -- NULL for a fill
    op    "char"  NOT NULL,              -- 'p' put, 'd' delete, 'f' fill
    value bytea                          -- NULL for a delete and a fill
);
-- List (latest row of every key at or below a revision) and compaction.
CREATE INDEX IF NOT EXISTS log_coll_key_rev ON {{.Schema}}.log (coll, key, rev DESC);

-- The typed client's current revision of every key: the row write() locks
-- for compare-and-swap, and Get's index into log.
CREATE TABLE IF NOT EXISTS {{.Schema}}.head (
    coll text   COLLATE "C",
    key  text   COLLATE "C",
    rev  bigint NOT NULL,
    PRIMARY KEY (coll, key)
);

-- take_rev gives a head row the next revision when write() sets its rev to
-- 0. A BEFORE ROW trigger runs after the row's lock is held and after READ
-- COMMITTED has re-checked the UPDATE's WHERE on the row's latest version
-- (EvalPlanQual), so it takes one value per row actually updated: an
-- UPDATE that waits for a concurrent writer, or whose compare-and-swap then
-- fails, wastes none (`SET rev = nextval(...)` would waste one per wait,
-- a hole; docs/design/pgstore.md §8.2). Only write() sets rev to 0.
CREATE OR REPLACE FUNCTION {{.Schema}}.take_rev() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.rev := nextval('{{.Schema}}.rev');
    RETURN NEW;
END $$;
CREATE OR REPLACE TRIGGER take_rev BEFORE UPDATE OF rev ON {{.Schema}}.head
    FOR EACH ROW WHEN (NEW.rev = 0) EXECUTE FUNCTION {{.Schema}}.take_rev();

-- write is the typed client's only write, one round trip:
--   op 'c': create key if absent; 'u': update if at expect; 'd': delete if
--   at expect (expect 0: whatever its revision).
-- Returns the change's revision; 0 for 'd' at 0 of an absent key; -1 if the
-- key was not as required (nothing written).
-- Update and delete are one statement each (lock, compare, revision, log
-- row, head), a create two: every statement costs an executor start-up,
-- which was a third of the server's CPU per write (§8.22).
CREATE OR REPLACE FUNCTION {{.Schema}}.write(
    p_coll text, p_key text, p_op "char", p_expect bigint, p_value bytea)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    r bigint;
    t tid;
    was text;
BEGIN
    -- A revision a reader has passed must survive a crash: with
    -- synchronous_commit off a crash can lose this commit and hand its
    -- revision out again to another change, which no watcher would see.
    -- Every other setting flushes the commit locally. (An IF, not a
    -- PERFORM: plpgsql evaluates it without starting an executor.)
    IF current_setting('synchronous_commit') = 'off' THEN
        was := set_config('synchronous_commit', 'on', true);
    END IF;
    -- In each statement below the revision is taken with the key locked
    -- (the UPDATE's or DELETE's row lock, or the new head row's index
    -- entry) and inserted into log by the same statement, so that a
    -- reader's fill can hardly come first (if it does, this fails with a
    -- unique violation on log_pkey and the client retries: nothing was
    -- written).
    IF p_op = 'd' THEN
        WITH h AS (
            DELETE FROM {{.Schema}}.head h
            WHERE h.coll = p_coll AND h.key = p_key AND (p_expect = 0 OR h.rev = p_expect)
            RETURNING 1)
        INSERT INTO {{.Schema}}.log (rev, coll, key, op)
            SELECT nextval('{{.Schema}}.rev'), p_coll, p_key, 'd' FROM h
            RETURNING rev INTO r;
        IF NOT FOUND THEN
            -- Absent, or (expect above 0) at another revision.
            RETURN CASE WHEN p_expect = 0 THEN 0 ELSE -1 END;
        END IF;
        RETURN r;
    END IF;
    IF p_op = 'c' THEN
        -- A concurrent creator or deleter of the key holds its index entry:
        -- this waits for it to end, then inserts (absent) or does nothing.
        INSERT INTO {{.Schema}}.head (coll, key, rev) VALUES (p_coll, p_key, 0)
            ON CONFLICT DO NOTHING RETURNING ctid INTO t;
        IF NOT FOUND THEN
            RETURN -1;
        END IF;
        -- take_rev gives the new row its revision.
        WITH h AS (
            UPDATE {{.Schema}}.head h SET rev = 0 WHERE h.ctid = t RETURNING h.rev)
        INSERT INTO {{.Schema}}.log (rev, coll, key, op, value)
            SELECT h.rev, p_coll, p_key, 'p', p_value FROM h
            RETURNING rev INTO r;
        IF NOT FOUND THEN -- the row this transaction inserted and holds
            RAISE EXCEPTION 'pgstore write(): the new head row of %/% is gone', p_coll, p_key;
        END IF;
        RETURN r;
    END IF;
    -- Under READ COMMITTED the UPDATE waits for a concurrent writer of the
    -- key, then re-checks the compare-and-swap on its latest committed
    -- revision; take_rev gives the row its new revision.
    WITH h AS (
        UPDATE {{.Schema}}.head h SET rev = 0
        WHERE h.coll = p_coll AND h.key = p_key AND (p_expect = 0 OR h.rev = p_expect)
        RETURNING h.rev)
    INSERT INTO {{.Schema}}.log (rev, coll, key, op, value)
        SELECT h.rev, p_coll, p_key, 'p', p_value FROM h
        RETURNING rev INTO r;
    IF NOT FOUND THEN
        RETURN -1; -- absent, or at another revision
    END IF;
    -- No NOTIFY here: PostgreSQL serialises the commits of notifying
    -- transactions, which halves write throughput (docs/design/pgstore.md).
    RETURN r;
END $$;

-- fill makes every revision in [lo, hi] that has no row a fill row. For a
-- revision whose writer is still in flight, ON CONFLICT DO NOTHING waits for
-- it, then yields to its row (committed) or inserts the fill (aborted). Like
-- write() it commits synchronously: a fill lost in a crash would let the
-- sequence hand its revision out again behind the readers.
CREATE OR REPLACE FUNCTION {{.Schema}}.fill(lo bigint, hi bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'on', true);
    INSERT INTO {{.Schema}}.log (rev, op)
        SELECT g, 'f' FROM generate_series(lo, hi) g
        ON CONFLICT (rev) DO NOTHING;
END $$;

-- merge_patch applies an RFC 7386 JSON merge patch: an object patch sets
-- each of its members in target (an object; anything else is taken as {}),
-- merging objects member by member, and a null member removes it; any
-- other patch replaces target.
CREATE OR REPLACE FUNCTION {{.Schema}}.merge_patch(target jsonb, patch jsonb)
RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    k text;
    v jsonb;
BEGIN
    IF jsonb_typeof(patch) IS DISTINCT FROM 'object' THEN
        RETURN patch;
    END IF;
    IF jsonb_typeof(target) IS DISTINCT FROM 'object' THEN
        target := '{}';
    END IF;
    FOR k, v IN SELECT * FROM jsonb_each(patch) LOOP
        IF jsonb_typeof(v) = 'null' THEN
            target := target - k;
        ELSE
            target := jsonb_set(target, ARRAY[k], {{.Schema}}.merge_patch(target -> k, v));
        END IF;
    END LOOP;
    RETURN target;
END $$;

-- head_json reads key's head: its revision (NULL if the key does not
-- exist) and its value as JSON (NULL if it is not JSON, or not UTF-8).
CREATE OR REPLACE FUNCTION {{.Schema}}.head_json(p_coll text, p_key text, OUT head_rev bigint, OUT head_value jsonb)
LANGUAGE plpgsql AS $$
DECLARE
    data bytea;
BEGIN
    SELECT h.rev, l.value INTO head_rev, data
      FROM {{.Schema}}.head h JOIN {{.Schema}}.log l ON l.rev = h.rev
     WHERE h.coll = p_coll AND h.key = p_key;
    IF head_rev IS NOT NULL THEN
        BEGIN
            head_value := convert_from(data, 'UTF8')::jsonb;
        EXCEPTION WHEN OTHERS THEN
            head_value := NULL;
        END;
    END IF;
END $$;

-- patch is how a person or another program writes a typed collection's
-- desired state, in one call (psql: SELECT converge.patch('replicasets',
-- 'web', '{"spec": {"replicas": 3}}')). It merges p_patch, JSON text (an
-- RFC 7386 merge patch, see merge_patch), into key's value, creating the
-- key if absent (from {}); a value that is not JSON is replaced. It
-- manages the generation as a Kubernetes API server does: when the value
-- has a "generation" member (before or in the patch) and its "spec"
-- member changed (as jsonb: key order and spacing do not count), it sets
-- it to the old one plus 1 (1 on create), else keeps the old one; the
-- patch's own generation is ignored. A patch that changes nothing writes
-- nothing. It writes with write(), retrying on a concurrent writer, sends
-- the NOTIFY that wakes the informers at once, and returns the revision
-- of the key's value (the old one if nothing changed). A p_patch that is
-- not valid JSON fails with SQLSTATE 22P02 and writes nothing.
CREATE OR REPLACE FUNCTION {{.Schema}}.patch(p_coll text, p_key text, p_patch text)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    p jsonb;
    old jsonb;
    new jsonb;
    old_rev bigint;
    gen bigint;
    r bigint;
    tries int := 0;
BEGIN
    IF p_coll IS NULL OR p_key IS NULL OR p_patch IS NULL THEN
        RAISE EXCEPTION 'patch(%, %, %): collection, key and patch must not be NULL', p_coll, p_key, p_patch
            USING ERRCODE = '22004';
    END IF;
    BEGIN
        p := p_patch::jsonb;
    EXCEPTION WHEN invalid_text_representation THEN
        RAISE EXCEPTION 'patch(%, %): the patch is not valid JSON: %', p_coll, p_key, SQLERRM
            USING ERRCODE = '22P02', HINT = 'Pass one JSON value, e.g. ''{"spec": {"replicas": 3}}''.';
    END;
    LOOP
        tries := tries + 1;
        IF tries > 100 THEN
            -- Under READ COMMITTED each try sees the latest commit; in an
            -- older snapshot it would never see the writer it lost to.
            RAISE EXCEPTION 'patch(%, %): the key kept changing under 100 tries', p_coll, p_key
                USING ERRCODE = '40001', HINT = 'Call it outside a REPEATABLE READ or SERIALIZABLE transaction, or retry.';
        END IF;
        -- A value that is not JSON (or not UTF-8) is NULL: the patch
        -- replaces it.
        SELECT head_rev, head_value INTO old_rev, old FROM {{.Schema}}.head_json(p_coll, p_key);
        new := {{.Schema}}.merge_patch(old, p);
        IF jsonb_typeof(new) = 'object' AND ((jsonb_typeof(old) = 'object' AND old ? 'generation')
                OR (jsonb_typeof(p) = 'object' AND p ? 'generation')) THEN
            gen := CASE WHEN jsonb_typeof(old -> 'generation') = 'number' THEN (old ->> 'generation')::numeric::bigint ELSE 0 END;
            IF old_rev IS NULL OR (new -> 'spec') IS DISTINCT FROM (old -> 'spec') THEN
                gen := gen + 1;
            END IF;
            new := jsonb_set(new, '{generation}', to_jsonb(gen));
        END IF;
        IF old_rev IS NOT NULL AND new = old THEN
            RETURN old_rev;
        END IF;
        BEGIN
            r := {{.Schema}}.write(p_coll, p_key, CASE WHEN old_rev IS NULL THEN 'c' ELSE 'u' END::"char",
                coalesce(old_rev, 0), convert_to(new::text, 'UTF8'));
        EXCEPTION WHEN unique_violation THEN
            r := -1; -- a reader's fill took the revision first: nothing was written
        END;
        EXIT WHEN r > 0;
    END LOOP;
    PERFORM pg_notify(nspname, '') FROM pg_namespace WHERE oid = '{{.Schema}}'::regnamespace;
    RETURN r;
END $$;

-- request_delete is informer.RequestDelete in SQL: it deletes the key at
-- the revision it read, unless its value is a JSON object with a
-- non-empty "finalizers" array; then it sets "deletionRequested" to now
-- (UTC), or, if that is set already, writes nothing and keeps the first
-- request's time. The key then stays until the controller's Update that
-- removes its last finalizer deletes it. It sends the NOTIFY and returns
-- the revision of the delete or the update (the key's own if nothing was
-- written), or 0 if the key does not exist.
CREATE OR REPLACE FUNCTION {{.Schema}}.request_delete(p_coll text, p_key text)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v jsonb;
    old_rev bigint;
    r bigint;
    tries int := 0;
BEGIN
    LOOP
        tries := tries + 1;
        IF tries > 100 THEN
            RAISE EXCEPTION 'request_delete(%, %): the key kept changing under 100 tries', p_coll, p_key
                USING ERRCODE = '40001', HINT = 'Call it outside a REPEATABLE READ or SERIALIZABLE transaction, or retry.';
        END IF;
        -- A value that is not JSON is NULL: no finalizers.
        SELECT head_rev, head_value INTO old_rev, v FROM {{.Schema}}.head_json(p_coll, p_key);
        IF old_rev IS NULL THEN
            RETURN 0;
        END IF;
        IF jsonb_typeof(v) = 'object' AND jsonb_typeof(v -> 'finalizers') = 'array'
                AND jsonb_array_length(v -> 'finalizers') > 0 THEN
            IF v ? 'deletionRequested' THEN
                RETURN old_rev;
            END IF;
            v := jsonb_set(v, '{deletionRequested}',
                to_jsonb(to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')));
            BEGIN
                r := {{.Schema}}.write(p_coll, p_key, 'u', old_rev, convert_to(v::text, 'UTF8'));
            EXCEPTION WHEN unique_violation THEN
                r := -1;
            END;
        ELSE
            BEGIN
                r := {{.Schema}}.write(p_coll, p_key, 'd', old_rev, NULL);
            EXCEPTION WHEN unique_violation THEN
                r := -1;
            END;
        END IF;
        EXIT WHEN r > 0;
    END LOOP;
    PERFORM pg_notify(nspname, '') FROM pg_namespace WHERE oid = '{{.Schema}}'::regnamespace;
    RETURN r;
END $$;
