-- weir's jobs. Runs with search_path set to weir's schema.

CREATE TABLE weir_jobs (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind             text        NOT NULL,
    queue            text        NOT NULL,
    payload          jsonb       NOT NULL DEFAULT '{}',
    state            text        NOT NULL
        CHECK (state IN ('available', 'scheduled', 'running', 'completed', 'cancelled', 'dead')),
    attempt          integer     NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts     integer     NOT NULL CHECK (max_attempts >= 0),
    -- Empty for none; unique where set (weir_jobs_idempotency_key).
    idempotency_key  text        NOT NULL DEFAULT '',
    source           text        NOT NULL DEFAULT '',
    priority         integer     NOT NULL DEFAULT 0,
    scheduled_at     timestamptz NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    -- NULL stands for the zero time of weirtype.Job in every nullable column.
    attempted_at     timestamptz,
    finalized_at     timestamptz,
    lease_owner      text        NOT NULL DEFAULT '',
    lease_expires_at timestamptz,
    deadline_at      timestamptz,
    -- weirtype.AttemptError objects, oldest first.
    errors           jsonb       NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(errors) = 'array'),
    -- A running job's attempt has started; stuck-job reclaim measures from it.
    CONSTRAINT weir_jobs_running_attempted CHECK (state <> 'running' OR attempted_at IS NOT NULL)
);

-- The arbiter of INSERT ... ON CONFLICT (idempotency_key) WHERE idempotency_key <> ''.
CREATE UNIQUE INDEX weir_jobs_idempotency_key ON weir_jobs (idempotency_key)
    WHERE idempotency_key <> '';

-- Claiming: the next jobs of a queue that are due, highest priority first,
-- then oldest, read with FOR UPDATE SKIP LOCKED. Only the claimable states
-- are indexed, so the index stays as small as the backlog however many
-- finished jobs the table keeps. Both states are in one index, in the order
-- a claim wants them, so a due scheduled job is claimable without first
-- being promoted to available.
CREATE INDEX weir_jobs_claim ON weir_jobs (queue, priority DESC, scheduled_at, id)
    WHERE state IN ('available', 'scheduled');

-- Stuck and expired work: running jobs by when their attempt started and by
-- when their lease runs out. Partial on state = 'running', which makes the
-- state a fixed part of the key rather than a column of it.
CREATE INDEX weir_jobs_running ON weir_jobs (attempted_at)
    WHERE state = 'running';
CREATE INDEX weir_jobs_lease ON weir_jobs (lease_expires_at)
    WHERE state = 'running';

-- weir_duration_text formats a duration of us microseconds as Go's
-- time.Duration.String does ("1h2m3.5s", "1.5ms", "0s"), so that the messages
-- the database writes itself (a reclaimed job's stuck error) read like the
-- ones weir writes.
CREATE FUNCTION weir_duration_text(us bigint) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
SELECT CASE WHEN us < 0 THEN '-' ELSE '' END ||
    CASE
        WHEN a = 0 THEN '0s'
        WHEN a < 1000 THEN a::text || 'µs'
        WHEN a < 1000000 THEN (a / 1000)::text || rtrim('.' || lpad((a % 1000)::text, 3, '0'), '.0') || 'ms'
        ELSE CASE WHEN a >= 3600000000 THEN (a / 3600000000)::text || 'h' ELSE '' END
            || CASE WHEN a >= 60000000 THEN (a / 60000000 % 60)::text || 'm' ELSE '' END
            || (a / 1000000 % 60)::text || rtrim('.' || lpad((a % 1000000)::text, 6, '0'), '.0') || 's'
    END
FROM (SELECT abs(us) AS a) AS d
$$;
