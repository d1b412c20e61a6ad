-- Deadlines: the jobs abandoned past their deadline, the late results of
-- the attempts that finished after it, and the stuck-job report. Runs with
-- search_path set to weir's schema.

-- A late result is the success of an attempt that finished after its job's
-- deadline had abandoned it. It changes nothing until an operator accepts
-- it, which completes the job; accepted or not, it stays as a record (a
-- purge of the job's dead letter keeps it). Like a dead letter it names its
-- job without a foreign key. An attempt finishes once: one result per job
-- and attempt, so that a worker that reports twice stores one.
CREATE TABLE weir_late_results (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id      bigint      NOT NULL,
    kind        text        NOT NULL,
    queue       text        NOT NULL,
    -- The attempt that finished and the worker that ran it: the job's
    -- attempt and lease_owner, both kept when the deadline abandoned it.
    attempt     integer     NOT NULL CHECK (attempt >= 1),
    owner       text        NOT NULL,
    deadline_at timestamptz NOT NULL,
    received_at timestamptz NOT NULL,
    -- NULL until an operator accepts the result.
    accepted_at timestamptz,
    CONSTRAINT weir_late_results_job_attempt UNIQUE (job_id, attempt)
);

-- Listing is by id, filtered by job (the unique constraint's index), by
-- kind, or to the results still pending; kind carries id so that a
-- filtered page comes out of the index in order.
CREATE INDEX weir_late_results_kind ON weir_late_results (kind, id);
CREATE INDEX weir_late_results_pending ON weir_late_results (id)
    WHERE accepted_at IS NULL;

-- Expiring deadlines: the jobs not final that have a deadline, earliest
-- first, read with FOR UPDATE SKIP LOCKED. Jobs without a deadline, and
-- finished ones, are left out, so the index stays as small as the work
-- that can still miss its deadline.
CREATE INDEX weir_jobs_deadline ON weir_jobs (deadline_at, id)
    WHERE deadline_at IS NOT NULL AND state IN ('available', 'scheduled', 'running');
