-- Pauses: the queues, and kinds within queues, whose waiting jobs the
-- claim skips. kind '' is the whole queue. cause is what holds it: an
-- operator (until resumed), a kind's open breaker (until its probe
-- succeeds; until_at is when the next probe may run, open_for the
-- microseconds it is held after each probe taken, probe_job the job last
-- taken as the probe), or a server's Retry-After (until until_at).
CREATE TABLE weir_pauses (
    queue     text        NOT NULL CHECK (queue <> ''),
    kind      text        NOT NULL DEFAULT '',
    cause     text        NOT NULL CHECK (cause IN ('operator', 'breaker', 'retry_after')),
    paused_by text        NOT NULL DEFAULT '',
    reason    text        NOT NULL DEFAULT '',
    paused_at timestamptz NOT NULL,
    until_at  timestamptz,
    open_for  bigint      NOT NULL DEFAULT 0 CHECK (open_for >= 0),
    probe_job bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, kind, cause)
);

-- Claiming obeys the pauses. First, for each kind of the queue whose
-- breaker pause has come to its probe time, one due job is claimed as the
-- probe (unless an operator's or a retry_after pause holds the kind too),
-- and the pause is held one open period more, probe_job naming the probe:
-- the pause row's lock makes one claim, of all that run at once, take it.
-- Then the rest of the limit is claimed as before (see migration 0004),
-- skipping the jobs that a pause holds: an operator's, a breaker's
-- whatever its time, a retry_after one until its until_at.
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
BEGIN
    FOR v_kind, v_open_for IN
        SELECT kind, open_for FROM weir_pauses
        WHERE queue = p_queue AND cause = 'breaker' AND until_at <= p_now
        ORDER BY kind
        FOR UPDATE SKIP LOCKED
    LOOP
        EXIT WHEN v_taken >= p_limit;
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
        v_taken := v_taken + 1;
    END LOOP;
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
            AND NOT EXISTS (SELECT 1 FROM weir_pauses p
                WHERE p.queue = p_queue AND p.kind IN ('', j.kind)
                    AND (p.cause <> 'retry_after' OR p.until_at > p_now))
        ORDER BY j.priority DESC, j.scheduled_at, j.id
        LIMIT p_limit - v_taken
        FOR UPDATE SKIP LOCKED)
    RETURNING *;
END
$$;
