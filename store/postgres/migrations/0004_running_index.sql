-- One index for running jobs instead of three. Every claim wrote an entry
-- into each of weir_jobs_running (attempted_at), weir_jobs_lease
-- (lease_expires_at) and weir_jobs_lease_owner; the rescuer needs running
-- jobs by lease expiry, while releasing a worker's jobs and listing stuck
-- ones are rare and read the running jobs, a set as small as the workers,
-- through weir_jobs_lease.
DROP INDEX weir_jobs_running;
DROP INDEX weir_jobs_lease_owner;
