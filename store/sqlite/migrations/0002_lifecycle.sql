-- weir_dead_letters: jobs abandoned to the dead-letter store, one row per
-- abandonment, with a copy of what an operator needs to decide what to do
-- with the job. The job's own row stays (state dead), so that its
-- idempotency key keeps absorbing duplicates; requeueing deletes the dead
-- letter and makes the job available again, purging deletes both.
--
-- The row is a snapshot that does not depend on the job's: there is no
-- foreign key, so a later cleanup of old job rows cannot take dead letters
-- with it. Times are INTEGER microseconds since the Unix epoch, UTC; errors
-- is the job's JSON array of weirtype.AttemptError, oldest first, and
-- last_error and error_type repeat its last element's message and type.
CREATE TABLE weir_dead_letters (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id          INTEGER NOT NULL,
    kind            TEXT    NOT NULL,
    queue           TEXT    NOT NULL,
    source          TEXT    NOT NULL DEFAULT '',
    idempotency_key TEXT    NOT NULL DEFAULT '',
    payload         TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(payload)),
    attempts        INTEGER NOT NULL CHECK (attempts >= 0),
    last_error      TEXT    NOT NULL DEFAULT '',
    error_type      TEXT    NOT NULL DEFAULT '',
    reason          TEXT    NOT NULL CHECK (reason IN ('max_attempts_exceeded', 'ttl_exceeded', 'non_retryable', 'deadline_exceeded')),
    errors          TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(errors) AND json_type(errors) = 'array'),
    job_created_at  INTEGER NOT NULL,
    failed_at       INTEGER NOT NULL
);

-- Listing and selecting dead letters: by when they failed, by kind, by
-- reason (each index also orders its rows by id, the listing order), and
-- the dead letters of given jobs.
CREATE INDEX weir_dead_letters_failed_at ON weir_dead_letters (failed_at);
CREATE INDEX weir_dead_letters_kind ON weir_dead_letters (kind);
CREATE INDEX weir_dead_letters_reason ON weir_dead_letters (reason);
CREATE INDEX weir_dead_letters_job_id ON weir_dead_letters (job_id);

-- Rescue: running jobs whose lease ended, oldest lease first.
CREATE INDEX weir_jobs_lease_expiry ON weir_jobs (lease_expires_at) WHERE state = 'running';

-- Heartbeat and release: the running jobs a worker holds.
CREATE INDEX weir_jobs_lease_owner ON weir_jobs (lease_owner) WHERE state = 'running';
