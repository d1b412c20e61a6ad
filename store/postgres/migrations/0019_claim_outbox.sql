-- The relay's claim is a function, so that it reads weir_outbox_pending in
-- id order and stops at the limit whatever the table's statistics say.
-- Before it, the claim was a prepared statement, which the planner costed
-- from statistics that, without an ANALYZE since a burst of messages (a
-- broker outage, say), counted a few dozen pending: it read every pending
-- message with a bitmap scan and sorted them, 20,000 rows and 7 ms to
-- take 4, a full read of the backlog at every claim. The function turns
-- sorts, bitmap scans and sequential scans off (weir_claim turns sorts
-- off, weir_limit_room bitmap and sequential scans), so that its plans,
-- made at a call or cached, all have that shape. Its statement is the
-- one the store sent before (see the comment on claimOutbox in the
-- store's messaging.go): the
-- candidates due at p_now and not held by a live lease (one that ends at
-- p_live or later), skipping those another writer has locked and those of
-- a key whose first unpublished message is blocked; then only keyed
-- candidates whose earlier unpublished messages are all candidates too.
-- Runs with search_path set to weir's schema.
CREATE FUNCTION weir_claim_outbox(
    p_now timestamptz, p_limit bigint, p_owner text, p_expires timestamptz, p_live timestamptz
) RETURNS SETOF weir_outbox
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET enable_sort = off
SET enable_bitmapscan = off
SET enable_seqscan = off
AS $$
BEGIN
    RETURN QUERY
    WITH candidate AS MATERIALIZED (
        SELECT o.id, o.key FROM weir_outbox AS o
        WHERE o.published_at IS NULL
            AND o.next_attempt_at <= p_now
            AND (o.lease_expires_at IS NULL OR o.lease_expires_at < p_live)
            AND (o.key = '' OR NOT EXISTS (
                SELECT 1 FROM (
                    SELECT e.next_attempt_at, e.lease_expires_at FROM weir_outbox AS e
                    WHERE e.key = o.key AND e.key <> '' AND e.published_at IS NULL
                    ORDER BY e.key, e.id
                    LIMIT 1) AS head
                WHERE head.next_attempt_at > p_now OR head.lease_expires_at >= p_live))
        ORDER BY o.id
        LIMIT p_limit
        FOR UPDATE OF o SKIP LOCKED
    ), taken AS (
        SELECT c.id AS taken_id FROM candidate AS c
        WHERE c.key = '' OR NOT EXISTS (
            SELECT 1 FROM weir_outbox AS e
            WHERE e.key = c.key AND e.key <> '' AND e.published_at IS NULL AND e.id < c.id
                AND e.id NOT IN (SELECT id FROM candidate))
    )
    UPDATE weir_outbox AS o SET lease_owner = p_owner, lease_expires_at = p_expires
    FROM taken
    WHERE o.id = taken.taken_id
    RETURNING o.*;
END
$$;
