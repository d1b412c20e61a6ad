-- Claiming from a hint takes the higher priorities first. The client now
-- keeps its hint across the wakes of inserts and after a claim that came
-- back short (the hint is then the last job it took): a queue fed at a
-- trickle claims from where the last claim ended, not from the head,
-- whose entries of claimed jobs a held snapshot keeps from being pruned
-- (each read again with its row, a claim at a time). A job of a higher
-- priority inserted since is then found by the hinted claim itself: the
-- range of the higher priorities is read first, from its head (empty,
-- one descent of the index, in a queue that does not use priorities).
CREATE OR REPLACE FUNCTION weir_claim_from(
    p_now timestamptz, p_queue text, p_limit bigint, p_owner text, p_expires timestamptz,
    p_from_priority integer, p_from_at timestamptz, p_from_id bigint
) RETURNS SETOF weir_jobs
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET enable_sort = off
AS $$
DECLARE
    v_limited text[];
    v_ids     bigint[];
BEGIN
    PERFORM weir_limits_lock(false);
    v_limited := ARRAY(SELECT kind FROM weir_limit_kinds);
    -- The three ranges in the claim order, each read only while the
    -- ranges before it left the claim short.
    v_ids := ARRAY(
        SELECT j.id FROM weir_jobs j
        WHERE j.queue = p_queue AND j.priority > p_from_priority
            AND (j.state = 'available' OR (j.state = 'scheduled' AND j.scheduled_at <= p_now))
            AND NOT (j.kind = ANY (v_limited))
            AND NOT EXISTS (SELECT 1 FROM weir_pauses p
                WHERE p.queue = p_queue AND p.kind IN ('', j.kind)
                    AND (p.cause <> 'retry_after' OR p.until_at > p_now))
        ORDER BY j.priority DESC, j.scheduled_at, j.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED);
    IF cardinality(v_ids) < p_limit THEN
        v_ids := v_ids || ARRAY(
        SELECT j.id FROM weir_jobs j
        WHERE j.queue = p_queue AND j.priority = p_from_priority AND (j.scheduled_at, j.id) >= (p_from_at, p_from_id)
            AND (j.state = 'available' OR (j.state = 'scheduled' AND j.scheduled_at <= p_now))
            AND NOT (j.kind = ANY (v_limited))
            AND NOT EXISTS (SELECT 1 FROM weir_pauses p
                WHERE p.queue = p_queue AND p.kind IN ('', j.kind)
                    AND (p.cause <> 'retry_after' OR p.until_at > p_now))
        ORDER BY j.priority DESC, j.scheduled_at, j.id
        LIMIT p_limit - cardinality(v_ids)
        FOR UPDATE SKIP LOCKED);
    END IF;
    IF cardinality(v_ids) < p_limit THEN
        v_ids := v_ids || ARRAY(
        SELECT j.id FROM weir_jobs j
        WHERE j.queue = p_queue AND j.priority < p_from_priority
            AND (j.state = 'available' OR (j.state = 'scheduled' AND j.scheduled_at <= p_now))
            AND NOT (j.kind = ANY (v_limited))
            AND NOT EXISTS (SELECT 1 FROM weir_pauses p
                WHERE p.queue = p_queue AND p.kind IN ('', j.kind)
                    AND (p.cause <> 'retry_after' OR p.until_at > p_now))
        ORDER BY j.priority DESC, j.scheduled_at, j.id
        LIMIT p_limit - cardinality(v_ids)
        FOR UPDATE SKIP LOCKED);
    END IF;
    RETURN QUERY UPDATE weir_jobs SET
        state = 'running',
        attempt = attempt + 1,
        attempted_at = p_now,
        updated_at = p_now,
        lease_owner = p_owner,
        lease_expires_at = p_expires
    WHERE id = ANY (v_ids)
    RETURNING *;
END
$$;
