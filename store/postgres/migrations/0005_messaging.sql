-- Messaging: the outbox of messages to publish and the inbox of messages
-- handled. Runs with search_path set to weir's schema.

-- A message is added to the outbox in the caller's transaction, with the
-- caller's data, then published by a relay, which claims it with a lease
-- (lease_owner until lease_expires_at), as a worker claims a job. Its id is
-- the message's stable id: the broker's message id, so that a republish
-- after a crash is recognised as a duplicate. A published message stays,
-- published_at set, until a purge.
CREATE TABLE weir_outbox (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    topic            text        NOT NULL CHECK (topic <> ''),
    -- Empty for none; the messages of one key are published in id order.
    key              text        NOT NULL DEFAULT '',
    payload          bytea       NOT NULL DEFAULT '',
    -- Carried to the broker: an object of strings.
    headers          jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(headers) = 'object'),
    created_at       timestamptz NOT NULL,
    -- NULL until the broker confirms the message.
    published_at     timestamptz,
    -- Failed publishes, and the last one's error.
    attempts         integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_error       text        NOT NULL DEFAULT '',
    -- When it may be published (again): created_at, then a failed
    -- publish's backoff.
    next_attempt_at  timestamptz NOT NULL,
    -- The relay that holds it; NULL stands for the zero time, as in weir_jobs.
    lease_owner      text        NOT NULL DEFAULT '',
    lease_expires_at timestamptz
);

-- Claiming: the pending messages in id order, read with FOR UPDATE SKIP
-- LOCKED up to the claim's limit. Only the unpublished are indexed, so the
-- index stays as small as the backlog however many published messages the
-- table keeps until a purge.
CREATE INDEX weir_outbox_pending ON weir_outbox (id)
    WHERE published_at IS NULL;

-- The per-key rule: a keyed message is claimable only when no earlier
-- unpublished message of its key is held or waits out a backoff, one probe
-- of this index per keyed candidate. Unkeyed messages, the published and
-- the empty key are left out.
CREATE INDEX weir_outbox_key ON weir_outbox (key, id)
    WHERE published_at IS NULL AND key <> '';

-- Purging: the published messages, oldest first.
CREATE INDEX weir_outbox_published ON weir_outbox (published_at)
    WHERE published_at IS NOT NULL;

-- A record that the message message_id of topic was handled, written in
-- the consumer's transaction with the handler's effects: the primary key
-- makes a redelivered message a duplicate (INSERT ... ON CONFLICT DO
-- NOTHING), and a rolled-back handler leaves no record.
CREATE TABLE weir_inbox (
    topic       text        NOT NULL CHECK (topic <> ''),
    message_id  text        NOT NULL CHECK (message_id <> ''),
    received_at timestamptz NOT NULL,
    PRIMARY KEY (topic, message_id)
);

-- Purging: the oldest records first.
CREATE INDEX weir_inbox_received_at ON weir_inbox (received_at);
