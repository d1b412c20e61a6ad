-- What a running attempt reports, kept with its job. Runs with
-- search_path set to weir's schema. progress is weirtype.Progress as JSON
-- (NULL until an attempt records one); output is what the job's latest
-- success returned (NULL for none).
ALTER TABLE weir_jobs ADD COLUMN progress jsonb;
ALTER TABLE weir_jobs ADD COLUMN output jsonb;

-- Retention: the completed and cancelled jobs of a kind, oldest first, so
-- that each delete batch reads only the rows it deletes. Jobs waiting or
-- running are not in it; dead jobs are deleted with their dead letters.
CREATE INDEX weir_jobs_finalized ON weir_jobs (kind, finalized_at)
    WHERE state IN ('completed', 'cancelled');

-- Leases of the sweeps that one process at a time runs (the retention
-- sweep): a process takes the row of a name, or renews it, while no other
-- owner's lease lasts.
CREATE TABLE weir_sweep_leases (
    name       text        PRIMARY KEY CHECK (name <> ''),
    owner      text        NOT NULL CHECK (owner <> ''),
    expires_at timestamptz NOT NULL
);
