-- weir_outbox_relay: the relay that holds the outbox. SQLite has one
-- writer, so several relays could not publish faster than one; instead of
-- a lease on every message, written at each claim, one row holds the whole
-- outbox for its owner until expires_at (INTEGER microseconds since the
-- Unix epoch, UTC). A claim takes or renews it and then only reads the
-- messages, and another relay takes it over once it has ended.
CREATE TABLE weir_outbox_relay (
    singleton  INTEGER PRIMARY KEY CHECK (singleton = 1),
    owner      TEXT    NOT NULL CHECK (owner <> ''),
    expires_at INTEGER NOT NULL
);

-- weir_outbox_marks: how far the relay has published. With one relay at a
-- time and ids drawn in commit order, a mark says that every message up
-- to through_id was published by published_at, except those set aside: a
-- message that failed at least once (attempts > 0), or that the mark found
-- unpublished below the batch it recorded (parked = 1: held back behind
-- an earlier message of its key, say). Those get their own published_at
-- when they go. The relay writes one mark per batch instead of one row
-- per message. The latest mark is the watermark; older ones date
-- published messages for the retention, and are deleted with them.
CREATE TABLE weir_outbox_marks (
    through_id   INTEGER PRIMARY KEY,
    published_at INTEGER NOT NULL
);
ALTER TABLE weir_outbox ADD COLUMN parked INTEGER NOT NULL DEFAULT 0 CHECK (parked IN (0, 1));

-- The messages set aside and not yet published: below the watermark, the
-- claim and the key order check find them here. Above it, the claim reads
-- weir_outbox by id.
CREATE INDEX weir_outbox_set_aside ON weir_outbox (id) WHERE published_at IS NULL AND (attempts > 0 OR parked = 1);
DROP INDEX weir_outbox_pending;

-- weir_outbox_pending: the messages not yet published, for operators and
-- their queries (published_at IS NULL alone no longer says so).
CREATE VIEW weir_outbox_pending AS
SELECT * FROM weir_outbox
WHERE published_at IS NULL AND id > (SELECT coalesce(max(through_id), 0) FROM weir_outbox_marks)
UNION ALL
SELECT * FROM weir_outbox
WHERE published_at IS NULL AND (attempts > 0 OR parked = 1) AND id <= (SELECT coalesce(max(through_id), 0) FROM weir_outbox_marks);

-- The messages' own leases are no longer kept.
ALTER TABLE weir_outbox DROP COLUMN lease_owner;
ALTER TABLE weir_outbox DROP COLUMN lease_expires_at;
