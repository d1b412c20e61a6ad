-- A fifth abandon reason, retry_after_exceeds_limit: a job whose error
-- asked for a wait (a Retry-After) longer than its kind allows is
-- abandoned at once rather than run again before the server allows.
-- SQLite cannot change a CHECK constraint in place, so the dead-letter
-- table is made again with the new list, its rows copied with their ids,
-- AUTOINCREMENT's counter carried over (so that no purged dead letter's
-- id is ever given again), and its indexes made again.
CREATE TABLE weir_dead_letters_new (
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
    reason          TEXT    NOT NULL CHECK (reason IN ('max_attempts_exceeded', 'ttl_exceeded', 'non_retryable', 'deadline_exceeded', 'retry_after_exceeds_limit')),
    errors          TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(errors) AND json_type(errors) = 'array'),
    job_created_at  INTEGER NOT NULL,
    failed_at       INTEGER NOT NULL
);

INSERT INTO weir_dead_letters_new
    (id, job_id, kind, queue, source, idempotency_key, payload, attempts,
     last_error, error_type, reason, errors, job_created_at, failed_at)
SELECT id, job_id, kind, queue, source, idempotency_key, payload, attempts,
       last_error, error_type, reason, errors, job_created_at, failed_at
FROM weir_dead_letters;

DELETE FROM sqlite_sequence WHERE name = 'weir_dead_letters_new';
INSERT INTO sqlite_sequence (name, seq)
SELECT 'weir_dead_letters_new', seq FROM sqlite_sequence WHERE name = 'weir_dead_letters';

DROP TABLE weir_dead_letters;
ALTER TABLE weir_dead_letters_new RENAME TO weir_dead_letters;

CREATE INDEX weir_dead_letters_failed_at ON weir_dead_letters (failed_at);
CREATE INDEX weir_dead_letters_kind ON weir_dead_letters (kind);
CREATE INDEX weir_dead_letters_reason ON weir_dead_letters (reason);
CREATE INDEX weir_dead_letters_job_id ON weir_dead_letters (job_id);
