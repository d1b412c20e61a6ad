-- The claims update the rows they locked by address (ctid), not by id:
-- the UPDATE read each claimed row again through weir_jobs_pkey, three
-- or four index pages a job, and now goes straight to its page (a TID
-- scan). A row locked FOR UPDATE cannot be changed by anyone else until
-- the claim commits, so the address its lock returned, that of the row's
-- latest version, is still its own when the UPDATE runs; and the UPDATE,
-- a statement of its own in a PL/pgSQL function, takes a snapshot after
-- the lock, so it sees that version even when it was committed after
-- the lock's statement began. (One statement, UPDATE … WHERE ctid IN
-- (SELECT … FOR UPDATE), would not: its snapshot predates such a
-- version, and the row would be locked and left.)
--
-- And the claims read the queue's pauses once, into an array of the kinds
-- held ('' for the whole queue, which ends the claim there), rather than
-- probing weir_pauses for each job they pass: two index pages a job, a
-- third of the buffers of a claim's read. The pauses are read by the
-- function's statement just before the claim's, as the probes read them
-- at its start: a pause committed meanwhile holds from the next claim,
-- as one committed during a claim's statement always did. The breaker's
-- probe keeps its own check. The rest is as in
-- migrations 0013 and 0016; the SET clauses of migration 0018 are
-- restated, since a replaced function keeps none of its own.
--
-- Runs with search_path set to weir's schema.

CREATE OR REPLACE FUNCTION weir_claim_from(
    p_now timestamptz, p_queue text, p_limit bigint, p_owner text, p_expires timestamptz,
    p_from_priority integer, p_from_at timestamptz, p_from_id bigint
) RETURNS SETOF weir_jobs
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET enable_sort = off
SET enable_seqscan = off
AS $$
DECLARE
    v_limited text[];
    v_rows    tid[];
    v_paused  text[];
BEGIN
    PERFORM weir_limits_lock(false);
    v_limited := ARRAY(SELECT kind FROM weir_limit_kinds);
    v_paused := ARRAY(SELECT p.kind FROM weir_pauses p
        WHERE p.queue = p_queue AND (p.cause <> 'retry_after' OR p.until_at > p_now));
    IF '' = ANY (v_paused) THEN
        RETURN; -- the whole queue is paused
    END IF;
    -- The three ranges in the claim order, each read only while the
    -- ranges before it left the claim short. Each locked row's address
    -- is that of its latest version, which no one else can change now.
    v_rows := ARRAY(
        SELECT j.ctid FROM weir_jobs j
        WHERE j.queue = p_queue AND j.priority > p_from_priority
            AND (j.state = 'available' OR (j.state = 'scheduled' AND j.scheduled_at <= p_now))
            AND NOT (j.kind = ANY (v_limited))
            AND NOT (j.kind = ANY (v_paused))
        ORDER BY j.priority DESC, j.scheduled_at, j.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED);
    IF cardinality(v_rows) < p_limit THEN
        v_rows := v_rows || ARRAY(
        SELECT j.ctid FROM weir_jobs j
        WHERE j.queue = p_queue AND j.priority = p_from_priority AND (j.scheduled_at, j.id) >= (p_from_at, p_from_id)
            AND (j.state = 'available' OR (j.state = 'scheduled' AND j.scheduled_at <= p_now))
            AND NOT (j.kind = ANY (v_limited))
            AND NOT (j.kind = ANY (v_paused))
        ORDER BY j.priority DESC, j.scheduled_at, j.id
        LIMIT p_limit - cardinality(v_rows)
        FOR UPDATE SKIP LOCKED);
    END IF;
    IF cardinality(v_rows) < p_limit THEN
        v_rows := v_rows || ARRAY(
        SELECT j.ctid FROM weir_jobs j
        WHERE j.queue = p_queue AND j.priority < p_from_priority
            AND (j.state = 'available' OR (j.state = 'scheduled' AND j.scheduled_at <= p_now))
            AND NOT (j.kind = ANY (v_limited))
            AND NOT (j.kind = ANY (v_paused))
        ORDER BY j.priority DESC, j.scheduled_at, j.id
        LIMIT p_limit - cardinality(v_rows)
        FOR UPDATE SKIP LOCKED);
    END IF;
    RETURN QUERY UPDATE weir_jobs SET
        state = 'running',
        attempt = attempt + 1,
        attempted_at = p_now,
        updated_at = p_now,
        lease_owner = p_owner,
        lease_expires_at = p_expires
    WHERE ctid = ANY (v_rows)
    RETURNING *;
END
$$;

CREATE OR REPLACE FUNCTION weir_claim(
    p_now timestamptz, p_queue text, p_limit bigint, p_owner text, p_expires timestamptz
) RETURNS SETOF weir_jobs
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET enable_sort = off
SET enable_seqscan = off
AS $$
DECLARE
    v_kind     text;
    v_open_for bigint;
    v_id       bigint;
    v_taken    bigint := 0;
    v_key      text;
    v_kinds    text[];
    v_limited  text[];
    v_room     bigint;
    v_n        bigint;
    v_rows     tid[];
    v_paused   text[];
BEGIN
    PERFORM weir_limits_lock(false);
    v_limited := ARRAY(SELECT kind FROM weir_limit_kinds);
    FOR v_kind, v_open_for, v_key IN
        SELECT p.kind, p.open_for, lk.key FROM weir_pauses p LEFT JOIN weir_limit_kinds lk ON lk.kind = p.kind
        WHERE p.queue = p_queue AND p.cause = 'breaker' AND p.until_at <= p_now
        ORDER BY p.kind
        FOR UPDATE OF p SKIP LOCKED
    LOOP
        EXIT WHEN v_taken >= p_limit;
        CONTINUE WHEN v_key IS NOT NULL
            AND weir_limit_room(v_key, ARRAY(SELECT kind FROM weir_limit_kinds WHERE key = v_key), p_now, 1) < 1;
        SELECT j.id INTO v_id FROM weir_jobs j
        WHERE j.queue = p_queue AND j.kind = v_kind
            AND (j.state = 'available' OR (j.state = 'scheduled' AND j.scheduled_at <= p_now))
            AND NOT EXISTS (SELECT 1 FROM weir_pauses o
                WHERE o.queue = p_queue AND o.kind IN ('', v_kind) AND o.cause <> 'breaker'
                    AND (o.cause = 'operator' OR o.until_at > p_now))
        ORDER BY j.priority DESC, j.scheduled_at, j.id
        LIMIT 1
        FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN v_id IS NULL;
        UPDATE weir_pauses SET until_at = p_now + v_open_for * interval '1 microsecond', probe_job = v_id
        WHERE queue = p_queue AND kind = v_kind AND cause = 'breaker';
        RETURN QUERY UPDATE weir_jobs SET
            state = 'running',
            attempt = attempt + 1,
            attempted_at = p_now,
            updated_at = p_now,
            lease_owner = p_owner,
            lease_expires_at = p_expires
        WHERE id = v_id
        RETURNING *;
        IF v_key IS NOT NULL THEN
            PERFORM weir_limit_took(v_key, p_now, 1);
        END IF;
        v_taken := v_taken + 1;
    END LOOP;
    IF v_taken >= p_limit THEN
        RETURN;
    END IF;
    v_paused := ARRAY(SELECT p.kind FROM weir_pauses p
        WHERE p.queue = p_queue AND (p.cause <> 'retry_after' OR p.until_at > p_now));
    IF '' = ANY (v_paused) THEN
        RETURN; -- the whole queue is paused
    END IF;
    IF cardinality(v_limited) > 0 THEN
        FOR v_key IN SELECT key FROM weir_limits ORDER BY key LOOP
            EXIT WHEN v_taken >= p_limit;
            v_kinds := ARRAY(SELECT kind FROM weir_limit_kinds WHERE key = v_key);
            v_room := weir_limit_room(v_key, v_kinds, p_now, p_limit - v_taken);
            CONTINUE WHEN v_room < 1;
            v_rows := ARRAY(
                SELECT j.ctid FROM weir_jobs j
                WHERE j.queue = p_queue AND j.kind = ANY (v_kinds)
                    AND (j.state = 'available' OR (j.state = 'scheduled' AND j.scheduled_at <= p_now))
                    AND NOT (j.kind = ANY (v_paused))
                ORDER BY j.priority DESC, j.scheduled_at, j.id
                LIMIT v_room
                FOR UPDATE SKIP LOCKED);
            RETURN QUERY UPDATE weir_jobs SET
                state = 'running',
                attempt = attempt + 1,
                attempted_at = p_now,
                updated_at = p_now,
                lease_owner = p_owner,
                lease_expires_at = p_expires
            WHERE ctid = ANY (v_rows)
            RETURNING *;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            PERFORM weir_limit_took(v_key, p_now, v_n);
            v_taken := v_taken + v_n;
        END LOOP;
    END IF;
    IF v_taken >= p_limit THEN
        RETURN;
    END IF;
    v_rows := ARRAY(
        SELECT j.ctid FROM weir_jobs j
        WHERE j.queue = p_queue
            AND (j.state = 'available' OR (j.state = 'scheduled' AND j.scheduled_at <= p_now))
            AND NOT (j.kind = ANY (v_limited))
            AND NOT (j.kind = ANY (v_paused))
        ORDER BY j.priority DESC, j.scheduled_at, j.id
        LIMIT p_limit - v_taken
        FOR UPDATE SKIP LOCKED);
    RETURN QUERY UPDATE weir_jobs SET
        state = 'running',
        attempt = attempt + 1,
        attempted_at = p_now,
        updated_at = p_now,
        lease_owner = p_owner,
        lease_expires_at = p_expires
    WHERE ctid = ANY (v_rows)
    RETURNING *;
END
$$;
