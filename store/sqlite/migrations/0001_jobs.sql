-- weir_jobs: every job the engine knows, one row each.
--
-- Times are INTEGER microseconds since the Unix epoch, UTC; NULL is the zero
-- time ("never", "none"). payload is the job's JSON arguments; errors is a
-- JSON array of weirtype.AttemptError, oldest first.
CREATE TABLE weir_jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    kind             TEXT    NOT NULL CHECK (kind <> ''),
    queue            TEXT    NOT NULL CHECK (queue <> ''),
    payload          TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(payload)),
    state            TEXT    NOT NULL CHECK (state IN ('available', 'scheduled', 'running', 'completed', 'cancelled', 'dead')),
    attempt          INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts     INTEGER NOT NULL CHECK (max_attempts >= 0),
    idempotency_key  TEXT    NOT NULL DEFAULT '',
    source           TEXT    NOT NULL DEFAULT '',
    priority         INTEGER NOT NULL DEFAULT 0,
    scheduled_at     INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    attempted_at     INTEGER,
    finalized_at     INTEGER,
    lease_owner      TEXT    NOT NULL DEFAULT '',
    lease_expires_at INTEGER,
    deadline_at      INTEGER,
    errors           TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(errors) AND json_type(errors) = 'array')
);

-- One job per idempotency key; jobs without a key (the empty string) are
-- not constrained. Insert names this index in its ON CONFLICT clause.
CREATE UNIQUE INDEX weir_jobs_idempotency_key ON weir_jobs (idempotency_key) WHERE idempotency_key <> '';

-- Claiming: the next available jobs of a queue, highest priority first,
-- then oldest scheduled, then oldest inserted.
CREATE INDEX weir_jobs_claim ON weir_jobs (state, queue, priority DESC, scheduled_at, id);

-- Stuck jobs: running jobs whose attempt started before a threshold.
CREATE INDEX weir_jobs_stuck ON weir_jobs (state, attempted_at);
