-- One index for running jobs instead of three. Every claim wrote an entry
-- into each of weir_jobs_running (attempted_at), weir_jobs_lease
-- (lease_expires_at) and weir_jobs_lease_owner; the rescuer needs running
-- jobs by lease expiry, while releasing a worker's jobs and listing stuck
-- ones are rare and read the running jobs, a set as small as the workers,
-- through weir_jobs_lease.
DROP INDEX weir_jobs_running;
DROP INDEX weir_jobs_lease_owner;

-- Claiming, as a function so that it always reads weir_jobs_claim in its
-- order. A queue table's statistics are stale as a rule (a bulk insert
-- lands between two autovacuums), and from stale statistics the planner
-- reads every waiting job with a bitmap scan and sorts them, spilling to
-- disk, on each claim: 40 ms per claim with 90,000 jobs waiting, where the
-- ordered index scan stops after LIMIT rows. Turning sorts off for the
-- function's statement leaves the ordered scan as the only cheap plan.
-- The function's search_path is the schema it is made in.
CREATE FUNCTION weir_claim(
    p_now timestamptz, p_queue text, p_limit bigint, p_owner text, p_expires timestamptz
) RETURNS SETOF weir_jobs
LANGUAGE sql
SET search_path FROM CURRENT
SET enable_sort = off
AS $$
UPDATE weir_jobs SET
    state = 'running',
    attempt = attempt + 1,
    attempted_at = p_now,
    updated_at = p_now,
    lease_owner = p_owner,
    lease_expires_at = p_expires
WHERE id IN (
    SELECT id FROM weir_jobs
    WHERE queue = p_queue
        AND (state = 'available' OR (state = 'scheduled' AND scheduled_at <= p_now))
    ORDER BY priority DESC, scheduled_at, id
    LIMIT p_limit
    FOR UPDATE SKIP LOCKED)
RETURNING *
$$;
