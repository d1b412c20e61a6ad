-- weir_late_results: successes of attempts that finished after their job's
-- deadline had abandoned it (state dead, last error of type
-- deadline_exceeded). A late result changes nothing until an operator
-- accepts it: then its job becomes completed, its dead letters are deleted
-- and accepted_at is set. One result per job and attempt: a second late
-- completion of the same attempt finds the first.
--
-- Like a dead letter, the row is an audit record that does not depend on
-- the job's: there is no foreign key, and purging the job's dead letters
-- (which deletes the job) keeps it. Times are INTEGER microseconds since
-- the Unix epoch, UTC; accepted_at is NULL until the result is accepted.
CREATE TABLE weir_late_results (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id      INTEGER NOT NULL,
    kind        TEXT    NOT NULL,
    queue       TEXT    NOT NULL,
    attempt     INTEGER NOT NULL CHECK (attempt >= 1),
    owner       TEXT    NOT NULL CHECK (owner <> ''),
    deadline_at INTEGER NOT NULL,
    received_at INTEGER NOT NULL,
    accepted_at INTEGER,
    UNIQUE (job_id, attempt)
);

-- Listing late results: by kind, and those not accepted yet (each index
-- also orders its rows by id, the listing order). The unique constraint
-- serves the results of one job.
CREATE INDEX weir_late_results_kind ON weir_late_results (kind);
CREATE INDEX weir_late_results_pending ON weir_late_results (id) WHERE accepted_at IS NULL;

-- The deadline sweep: jobs not final that have a deadline, earliest
-- deadline first. Final jobs, and jobs without a deadline, are not in it.
CREATE INDEX weir_jobs_deadline ON weir_jobs (deadline_at)
    WHERE deadline_at IS NOT NULL AND state IN ('available', 'scheduled', 'running');
