-- Limits across processes on the attempts of kinds (see store.Limits):
-- per key, at most max_running attempts running (0: no such limit) and at
-- most rate starts in each window of per microseconds (0: none), the
-- window last counted starting at window_start with window_count starts.
-- Each kind counts against one key at most. running_bound is a bound from
-- above on the attempts of the key's kinds running, or -1 when unknown:
-- the running attempts counted at some claim, plus every attempt claimed
-- since. Only a claim makes a job running, and every claim of a limited
-- kind adds what it took under the row's lock, so the bound never falls
-- below the truth however attempts end meanwhile; a claim counts the
-- running attempts again only when the bound would leave too little room.
CREATE TABLE weir_limits (
    key          text        PRIMARY KEY CHECK (key <> ''),
    max_running  integer     NOT NULL DEFAULT 0 CHECK (max_running >= 0),
    rate         integer     NOT NULL DEFAULT 0 CHECK (rate >= 0),
    per          bigint      NOT NULL DEFAULT 0 CHECK (per >= 0),
    window_start timestamptz,
    window_count integer     NOT NULL DEFAULT 0,
    running_bound integer    NOT NULL DEFAULT -1,
    updated_at   timestamptz NOT NULL
);

CREATE TABLE weir_limit_kinds (
    kind text PRIMARY KEY CHECK (kind <> ''),
    key  text NOT NULL REFERENCES weir_limits (key) ON DELETE CASCADE
);

CREATE INDEX weir_limit_kinds_key ON weir_limit_kinds (key);

-- The start of the rate window of p_per microseconds that holds p_now:
-- the last multiple of p_per since the Unix epoch not after it.
CREATE FUNCTION weir_limit_window(p_now timestamptz, p_per bigint) RETURNS timestamptz
LANGUAGE sql IMMUTABLE
AS $$
SELECT p_now - (((floor(extract(epoch FROM p_now) * 1000000)::bigint % p_per) + p_per) % p_per) * interval '1 microsecond'
$$;

-- How many attempts of the kinds p_kinds of limit p_key may start at
-- p_now, up to p_want. It locks the limit's row until the claim's
-- transaction ends, so that concurrent claims count one after another; a
-- row another claim holds gives 0 at once (SKIP LOCKED): that claim takes
-- what the limit allows. The running attempts are counted only when the
-- row's running_bound is unknown or leaves less than p_want of room.
CREATE FUNCTION weir_limit_room(p_key text, p_kinds text[], p_now timestamptz, p_want bigint) RETURNS bigint
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    l      weir_limits;
    v_room bigint := p_want;
BEGIN
    SELECT * INTO l FROM weir_limits WHERE key = p_key FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    IF l.max_running > 0 THEN
        IF l.running_bound < 0 OR l.running_bound + p_want > l.max_running THEN
            SELECT count(*) INTO l.running_bound FROM weir_jobs WHERE state = 'running' AND kind = ANY (p_kinds);
            UPDATE weir_limits SET running_bound = l.running_bound WHERE key = p_key;
        END IF;
        v_room := least(v_room, l.max_running - l.running_bound);
    END IF;
    IF l.rate > 0 THEN
        v_room := least(v_room, l.rate - CASE
            WHEN l.window_start IS NULL OR l.window_start < weir_limit_window(p_now, l.per) THEN 0
            ELSE l.window_count END);
    END IF;
    RETURN greatest(v_room, 0);
END
$$;

-- Counts p_n attempts of limit p_key started at p_now: in its rate window
-- and in its running_bound. PL/pgSQL, not SQL: its statement's plan is
-- kept for the session, where an SQL function's would be made again at
-- each claim.
CREATE FUNCTION weir_limit_took(p_key text, p_now timestamptz, p_n bigint) RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    IF p_n < 1 THEN
        RETURN;
    END IF;
    UPDATE weir_limits SET
        running_bound = CASE WHEN running_bound < 0 THEN -1 ELSE running_bound + p_n END,
        window_count = CASE
            WHEN rate = 0 THEN window_count
            WHEN window_start IS NULL OR window_start < weir_limit_window(p_now, per) THEN p_n
            ELSE window_count + p_n END,
        window_start = CASE
            WHEN rate = 0 THEN window_start
            WHEN window_start IS NULL OR window_start < weir_limit_window(p_now, per) THEN weir_limit_window(p_now, per)
            ELSE window_start END
    WHERE key = p_key AND (rate > 0 OR max_running > 0);
END
$$;

-- Every claim holds this lock shared, and SetLimit and Unlimit hold it
-- alone (weir_limits_lock), so that a change of the limits waits for the
-- claims under way and the claims after it see it: no claim takes a kind
-- as unlimited, or under its old key, once the change is made.
CREATE FUNCTION weir_limits_lock(p_exclusive boolean) RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    IF p_exclusive THEN
        PERFORM pg_advisory_xact_lock(hashtext(current_schema()), 2002217330);
    ELSE
        PERFORM pg_advisory_xact_lock_shared(hashtext(current_schema()), 2002217330);
    END IF;
END
$$;

-- Claiming obeys the limits too (migration 0012 has the rest). A breaker's
-- probe of a limited kind is taken only if its limit has room, and
-- counts. Then, when any kind is limited, each limit in turn claims the
-- jobs of its kinds as far as it allows; and the rest of the claim takes
-- only jobs of kinds no limit holds (with no limit, v_limited is empty
-- and the claim is as it was).
DROP FUNCTION weir_claim(timestamptz, text, bigint, text, timestamptz);
CREATE FUNCTION weir_claim(
    p_now timestamptz, p_queue text, p_limit bigint, p_owner text, p_expires timestamptz
) RETURNS SETOF weir_jobs
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET enable_sort = off
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
    IF cardinality(v_limited) > 0 THEN
        FOR v_key IN SELECT key FROM weir_limits ORDER BY key LOOP
            EXIT WHEN v_taken >= p_limit;
            v_kinds := ARRAY(SELECT kind FROM weir_limit_kinds WHERE key = v_key);
            v_room := weir_limit_room(v_key, v_kinds, p_now, p_limit - v_taken);
            CONTINUE WHEN v_room < 1;
            RETURN QUERY UPDATE weir_jobs SET
                state = 'running',
                attempt = attempt + 1,
                attempted_at = p_now,
                updated_at = p_now,
                lease_owner = p_owner,
                lease_expires_at = p_expires
            WHERE id IN (
                SELECT j.id FROM weir_jobs j
                WHERE j.queue = p_queue AND j.kind = ANY (v_kinds)
                    AND (j.state = 'available' OR (j.state = 'scheduled' AND j.scheduled_at <= p_now))
                    AND NOT EXISTS (SELECT 1 FROM weir_pauses p
                        WHERE p.queue = p_queue AND p.kind IN ('', j.kind)
                            AND (p.cause <> 'retry_after' OR p.until_at > p_now))
                ORDER BY j.priority DESC, j.scheduled_at, j.id
                LIMIT v_room
                FOR UPDATE SKIP LOCKED)
            RETURNING *;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            PERFORM weir_limit_took(v_key, p_now, v_n);
            v_taken := v_taken + v_n;
        END LOOP;
    END IF;
    IF v_taken >= p_limit THEN
        RETURN;
    END IF;
    RETURN QUERY UPDATE weir_jobs SET
        state = 'running',
        attempt = attempt + 1,
        attempted_at = p_now,
        updated_at = p_now,
        lease_owner = p_owner,
        lease_expires_at = p_expires
    WHERE id IN (
        SELECT j.id FROM weir_jobs j
        WHERE j.queue = p_queue
            AND (j.state = 'available' OR (j.state = 'scheduled' AND j.scheduled_at <= p_now))
            AND NOT (j.kind = ANY (v_limited))
            AND NOT EXISTS (SELECT 1 FROM weir_pauses p
                WHERE p.queue = p_queue AND p.kind IN ('', j.kind)
                    AND (p.cause <> 'retry_after' OR p.until_at > p_now))
        ORDER BY j.priority DESC, j.scheduled_at, j.id
        LIMIT p_limit - v_taken
        FOR UPDATE SKIP LOCKED)
    RETURNING *;
END
$$;
