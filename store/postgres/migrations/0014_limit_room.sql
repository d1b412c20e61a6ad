-- weir_limit_room, cheaper (migration 0013 has the rest of the limits).
--
-- A claim holds the limit's key with a transaction-level advisory lock in
-- place of a lock on its weir_limits row. A row lock writes the row at
-- every claim, a second write beside weir_limit_took's; the advisory lock
-- lives in memory. The guarantee is the same: a claim that holds the key
-- reads the row as the last holder committed it, and one that cannot take
-- the key gets no room at once, because the holder takes what the limit
-- allows. The key's lock is a single bigint, apart from weir_limits_lock's
-- pair of integers.
--
-- It counts the running attempts through an index scan of
-- weir_jobs_lease, never a bitmap scan. The index holds an entry for
-- every attempt that ran since the table was last vacuumed; a bitmap scan
-- visits each one's row again at every count, so that the count grew with
-- the history (with a MaxRunning of 200 and 100 workers, a count every 100
-- claims took most of the claim's time after 20,000 jobs). An index scan
-- marks the entries of finished attempts dead as it meets them, and later
-- counts pass over them without reading their rows.
CREATE OR REPLACE FUNCTION weir_limit_room(p_key text, p_kinds text[], p_now timestamptz, p_want bigint) RETURNS bigint
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET enable_bitmapscan = off
SET enable_seqscan = off
AS $$
DECLARE
    l      weir_limits;
    v_room bigint := p_want;
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtextextended(current_schema() || '.weir_limits.' || p_key, 0)) THEN
        RETURN 0;
    END IF;
    SELECT * INTO l FROM weir_limits WHERE key = p_key;
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
