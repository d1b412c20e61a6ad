-- The indexes of weir_jobs hold only the jobs that are waiting or running,
-- so that claiming and completing a job write as few index entries as
-- possible. A job's state changes twice in the common case (available to
-- running, running to completed); each index whose key or whose WHERE
-- clause involves the state is rewritten at both. Completed jobs, most of
-- the table, are in none of these indexes.
--
-- SQLite uses a partial index only for a query whose WHERE clause contains
-- the index's own terms: the queries name the state they read
-- (state = 'available', state = 'scheduled', state = 'running').

DROP INDEX weir_jobs_claim;
DROP INDEX weir_jobs_stuck;
DROP INDEX weir_jobs_lease_owner;
-- Made by 0003_deadlines.sql as it stood before it shipped; a database
-- migrated then still has it.
DROP INDEX IF EXISTS weir_jobs_waiting_since;

-- Claiming: the next available jobs of a queue, highest priority first,
-- then oldest scheduled, then oldest inserted; and the same order for the
-- scheduled jobs, of which a claim takes those due.
CREATE INDEX weir_jobs_available ON weir_jobs (queue, priority DESC, scheduled_at, id)
    WHERE state = 'available';
CREATE INDEX weir_jobs_scheduled ON weir_jobs (queue, priority DESC, scheduled_at, id)
    WHERE state = 'scheduled';

-- The running jobs, by lease expiry (weir_jobs_lease_expiry, from
-- 0002_lifecycle.sql, stays): the rescue takes the oldest expired leases
-- first; releasing an owner's jobs, rare, reads every running job. The
-- lease owner's own index is gone: heartbeats and completions look jobs up
-- by id.
