-- weir_store_identity: the store's own identity, 16 random hex digits,
-- made once, by this migration, and never changed. The outbox relay puts
-- it in each message's broker id ("<Source>-<id>-<outbox id>"): two stores
-- publishing to one broker, or a store made again in place of a deleted
-- one (whose outbox ids start again at 1), never give two messages one
-- id, which the broker's dedupe window or a consumer's inbox would drop as
-- a duplicate.
--
-- outbox_legacy_through is the highest outbox id when the migration ran:
-- those messages were added by a weir that gave them the broker id
-- "<Source>-<outbox id>", and keep it, so that a republish of one is
-- still recognised as a duplicate. 0 in a store made by this weir.
CREATE TABLE weir_store_identity (
    singleton             INTEGER PRIMARY KEY CHECK (singleton = 1),
    id                    TEXT    NOT NULL CHECK (length(id) = 16),
    outbox_legacy_through INTEGER NOT NULL CHECK (outbox_legacy_through >= 0)
);

INSERT INTO weir_store_identity (singleton, id, outbox_legacy_through)
SELECT 1, lower(hex(randomblob(8))), coalesce(max(id), 0) FROM weir_outbox;
