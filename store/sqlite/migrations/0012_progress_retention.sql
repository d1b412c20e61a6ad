-- What a running attempt reports, kept with its job: progress, the JSON
-- of weirtype.Progress (NULL until an attempt records one), and output,
-- the JSON its latest success returned (NULL for none).
ALTER TABLE weir_jobs ADD COLUMN progress TEXT CHECK (progress IS NULL OR json_valid(progress));
ALTER TABLE weir_jobs ADD COLUMN output TEXT CHECK (output IS NULL OR json_valid(output));

-- Retention: the completed and cancelled jobs of a kind, oldest first, so
-- that each delete batch reads only the rows it deletes. Jobs waiting or
-- running are not in it; dead jobs are deleted with their dead letters.
CREATE INDEX weir_jobs_finalized ON weir_jobs (kind, finalized_at)
    WHERE state IN ('completed', 'cancelled');

-- Leases of the sweeps that one process at a time runs (the retention
-- sweep): a process takes the row of a name, or renews it, while no other
-- owner's lease lasts. expires_at is INTEGER microseconds since the Unix
-- epoch, UTC.
CREATE TABLE weir_sweep_leases (
    name       TEXT    PRIMARY KEY CHECK (name <> ''),
    owner      TEXT    NOT NULL CHECK (owner <> ''),
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
