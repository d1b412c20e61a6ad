-- weir_outbox: messages added in a caller's transaction, published by a
-- relay. id is the message's stable id, carried to the broker, so that a
-- republish after a crash is recognised as a duplicate. Times are INTEGER
-- microseconds since the Unix epoch, UTC; published_at is NULL until the
-- broker confirmed the message; headers is a JSON object or NULL.
CREATE TABLE weir_outbox (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    topic            TEXT    NOT NULL CHECK (topic <> ''),
    key              TEXT    NOT NULL DEFAULT '',
    payload          BLOB,
    headers          TEXT    CHECK (headers IS NULL OR json_valid(headers)),
    created_at       INTEGER NOT NULL,
    published_at     INTEGER,
    attempts         INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT    NOT NULL DEFAULT '',
    next_attempt_at  INTEGER NOT NULL,
    lease_owner      TEXT    NOT NULL DEFAULT '',
    lease_expires_at INTEGER
);

-- Claiming: the unpublished messages in id order. Published ones, most of
-- the table in time, are in neither this index nor the next.
CREATE INDEX weir_outbox_pending ON weir_outbox (id) WHERE published_at IS NULL;

-- The per-key order check: the earlier unpublished messages of a key.
CREATE INDEX weir_outbox_key ON weir_outbox (key, id) WHERE published_at IS NULL AND key <> '';

-- Purging: published messages, oldest first.
CREATE INDEX weir_outbox_published ON weir_outbox (published_at) WHERE published_at IS NOT NULL;

-- weir_inbox: the messages a consumer handled, one row per topic and
-- message id, written in the handler's transaction; a redelivery or a
-- duplicate finds its row and is not handled again.
CREATE TABLE weir_inbox (
    topic       TEXT    NOT NULL CHECK (topic <> ''),
    message_id  TEXT    NOT NULL CHECK (message_id <> ''),
    received_at INTEGER NOT NULL,
    PRIMARY KEY (topic, message_id)
) WITHOUT ROWID;

-- Purging: records by age.
CREATE INDEX weir_inbox_received_at ON weir_inbox (received_at);
