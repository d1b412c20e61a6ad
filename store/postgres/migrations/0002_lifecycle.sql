-- The job lifecycle: leases, and the dead letters of abandoned jobs. Runs
-- with search_path set to weir's schema.

-- A dead letter is a copy of an abandoned job with why it was abandoned,
-- everything an operator needs to decide whether to requeue or purge it.
-- It names its job (job_id) but has no foreign key: the job row stays,
-- state dead, so that its idempotency key keeps absorbing duplicates, and a
-- purge deletes both; the copy stands on its own either way.
CREATE TABLE weir_dead_letters (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id          bigint      NOT NULL,
    kind            text        NOT NULL,
    queue           text        NOT NULL,
    source          text        NOT NULL DEFAULT '',
    idempotency_key text        NOT NULL DEFAULT '',
    payload         jsonb       NOT NULL DEFAULT '{}',
    -- How many attempts were made: the job's attempt when it was abandoned.
    attempts        integer     NOT NULL CHECK (attempts >= 0),
    -- The last attempt's error (weirtype.AttemptError's Message and Type).
    last_error      text        NOT NULL DEFAULT '',
    error_type      text        NOT NULL DEFAULT '',
    -- weirtype.AbandonReason.
    reason          text        NOT NULL
        CHECK (reason IN ('max_attempts_exceeded', 'ttl_exceeded', 'non_retryable', 'deadline_exceeded')),
    -- weirtype.AttemptError objects, oldest first, the last one included.
    errors          jsonb       NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(errors) = 'array'),
    job_created_at  timestamptz NOT NULL,
    failed_at       timestamptz NOT NULL
);

-- Listing is by id; the filters an operator reaches for first are time,
-- kind and reason. kind and reason carry id so that a filtered page comes
-- out of the index in order.
CREATE INDEX weir_dead_letters_failed_at ON weir_dead_letters (failed_at);
CREATE INDEX weir_dead_letters_kind ON weir_dead_letters (kind, id);
CREATE INDEX weir_dead_letters_reason ON weir_dead_letters (reason, id);
CREATE INDEX weir_dead_letters_job_id ON weir_dead_letters (job_id);

-- Releasing a worker's jobs: running jobs by lease owner. (Rescuing expired
-- leases uses weir_jobs_lease, on lease_expires_at, from 0001.)
CREATE INDEX weir_jobs_lease_owner ON weir_jobs (lease_owner)
    WHERE state = 'running';

-- weir_time_text formats t as Go's time.RFC3339Nano in UTC ("2026-01-21T15:30:00Z",
-- "2026-01-21T15:30:00.5Z"), so that the times in the messages the database
-- writes itself (an expired lease's error) read like the ones weir writes.
-- STABLE, not IMMUTABLE: to_char is.
CREATE FUNCTION weir_time_text(t timestamptz) RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
AS $$
SELECT rtrim(rtrim(to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '0'), '.') || 'Z'
$$;
