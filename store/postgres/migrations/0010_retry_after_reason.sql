-- A fifth abandon reason, retry_after_exceeds_limit: a job whose error
-- asked for a wait (a Retry-After) longer than its kind allows is
-- abandoned at once rather than run again before the server allows.
ALTER TABLE weir_dead_letters
    DROP CONSTRAINT weir_dead_letters_reason_check,
    ADD CONSTRAINT weir_dead_letters_reason_check
        CHECK (reason IN ('max_attempts_exceeded', 'ttl_exceeded', 'non_retryable', 'deadline_exceeded', 'retry_after_exceeds_limit'));
