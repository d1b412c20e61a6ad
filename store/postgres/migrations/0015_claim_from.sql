-- Claiming from a hint (store.ClaimParams.From): the place in the claim
-- order where the caller's last claim began. Claimed jobs leave their
-- entries in weir_jobs_claim until a vacuum, at the head of each queue's
-- range, where no insert lands to clean them; a claim from the head reads
-- them all again (hundreds of index pages a claim under a steady
-- producer, each with a visit to its row while a long transaction holds
-- a snapshot). weir_claim_from starts at the hint's place instead: the
-- jobs of the hint's priority from there on, then those of lower
-- priorities, each a range of the index, of the kinds no limit holds.
-- The rest of weir_claim (a breaker's probe, the limited kinds) and the
-- jobs ordered before the hint (a higher priority inserted since, a job
-- released with its old place) are left to the caller's next claim from
-- the head, weir_claim, which the client makes at least every PollEvery
-- and at once after a claim from a hint that came back short.
CREATE FUNCTION weir_claim_from(
    p_now timestamptz, p_queue text, p_limit bigint, p_owner text, p_expires timestamptz,
    p_from_priority integer, p_from_at timestamptz, p_from_id bigint
) RETURNS SETOF weir_jobs
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET enable_sort = off
AS $$
DECLARE
    v_limited text[];
    v_n       bigint;
BEGIN
    PERFORM weir_limits_lock(false);
    v_limited := ARRAY(SELECT kind FROM weir_limit_kinds);
    RETURN QUERY UPDATE weir_jobs SET
        state = 'running',
        attempt = attempt + 1,
        attempted_at = p_now,
        updated_at = p_now,
        lease_owner = p_owner,
        lease_expires_at = p_expires
    WHERE id IN (
        SELECT j.id FROM weir_jobs j
        WHERE j.queue = p_queue AND j.priority = p_from_priority AND (j.scheduled_at, j.id) >= (p_from_at, p_from_id)
            AND (j.state = 'available' OR (j.state = 'scheduled' AND j.scheduled_at <= p_now))
            AND NOT (j.kind = ANY (v_limited))
            AND NOT EXISTS (SELECT 1 FROM weir_pauses p
                WHERE p.queue = p_queue AND p.kind IN ('', j.kind)
                    AND (p.cause <> 'retry_after' OR p.until_at > p_now))
        ORDER BY j.priority DESC, j.scheduled_at, j.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED)
    RETURNING *;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    IF v_n >= p_limit THEN
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
        WHERE j.queue = p_queue AND j.priority < p_from_priority
            AND (j.state = 'available' OR (j.state = 'scheduled' AND j.scheduled_at <= p_now))
            AND NOT (j.kind = ANY (v_limited))
            AND NOT EXISTS (SELECT 1 FROM weir_pauses p
                WHERE p.queue = p_queue AND p.kind IN ('', j.kind)
                    AND (p.cause <> 'retry_after' OR p.until_at > p_now))
        ORDER BY j.priority DESC, j.scheduled_at, j.id
        LIMIT p_limit - v_n
        FOR UPDATE SKIP LOCKED)
    RETURNING *;
END
$$;
