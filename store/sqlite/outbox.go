package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// AddOutbox inserts the messages in one transaction (a savepoint in a
// caller's) and returns their ids in order.
func (e executor) AddOutbox(ctx context.Context, now time.Time, msgs []store.OutboxMessage) ([]int64, error) {
	if err := checkNow(now); err != nil {
		return nil, fmt.Errorf("add to the outbox: %w", err)
	}
	headers := make([]any, len(msgs))
	for i, m := range msgs {
		if err := m.Validate(); err != nil {
			return nil, fmt.Errorf("add to the outbox: message %d: %w", i, err)
		}
		if len(m.Headers) > 0 {
			b, err := json.Marshal(m.Headers)
			if err != nil {
				return nil, fmt.Errorf("add to the outbox: message %d: headers: %w", i, err)
			}
			headers[i] = string(b)
		}
	}
	ids := make([]int64, len(msgs))
	err := e.write(ctx, func(tx *sql.Tx) error {
		for i, m := range msgs {
			err := e.s.stmts.queryRow(ctx, tx, insertOutbox, m.Topic, m.Key, m.Payload, headers[i], encodeTime(now)).Scan(&ids[i])
			if err != nil {
				return fmt.Errorf("message %d: %w", i, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("add to the outbox: %w", err)
	}
	return ids, nil
}

// insertOutbox adds one message at ?5.
const insertOutbox = `INSERT INTO weir_outbox (topic, key, payload, headers, created_at, next_attempt_at)
	VALUES (?1, ?2, ?3, ?4, ?5, ?5) RETURNING id`

// RecordInbox records message id of topic, reporting whether it is new.
func (e executor) RecordInbox(ctx context.Context, now time.Time, topic, id string) (bool, error) {
	if err := store.FirstError(store.CheckInboxRecord(topic, id), checkNow(now)); err != nil {
		return false, fmt.Errorf("record in the inbox: %w", err)
	}
	n, err := e.execCount(ctx, "record in the inbox", `INSERT INTO weir_inbox (topic, message_id, received_at) VALUES (?1, ?2, ?3)
		ON CONFLICT (topic, message_id) DO NOTHING`, topic, id, encodeTime(now))
	return n == 1, err
}

// execCount runs query in a write transaction of its own (a savepoint in
// a caller's) and returns the rows it changed; op names it in the error.
func (e executor) execCount(ctx context.Context, op, query string, args ...any) (int, error) {
	var n int64
	err := e.write(ctx, func(tx *sql.Tx) error {
		res, err := e.s.stmts.exec(ctx, tx, query, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	return int(n), nil
}

// PurgeInbox deletes up to limit inbox records made before before.
func (e executor) PurgeInbox(ctx context.Context, before time.Time, limit int) (int, error) {
	return e.purge(ctx, "purge the inbox", before, limit, `DELETE FROM weir_inbox WHERE (topic, message_id) IN (
		SELECT topic, message_id FROM weir_inbox WHERE received_at < ?1 ORDER BY received_at LIMIT CAST(?2 AS INTEGER))`)
}

// purge runs del, whose ?1 is before and ?2 limit, and returns the rows it
// deleted.
func (e executor) purge(ctx context.Context, op string, before time.Time, limit int, del string) (int, error) {
	if err := store.FirstError(store.CheckLimit(limit), checkBefore(before)); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	return e.execCount(ctx, op, del, encodeTime(before), limit)
}

// claimBatch builds the messages of one claim from rows of
// claimColumns. It allocates them a block at a time, and copies their
// payloads into shared chunks, rather than allocating each message and
// each payload on its own: a payload scanned into a *[]byte is the
// driver's copy cloned again by database/sql, a second allocation per
// message; scanned into a sql.RawBytes, the driver's copy is read in
// place (valid until the next row) and copied into the chunk. A message
// kept after its batch keeps its block and its payload's chunk alive.
type claimBatch struct {
	owner   string
	expires time.Time
	msgs    []*weirtype.OutboxMessage
	block   []weirtype.OutboxMessage // the messages not used yet
	chunk   []byte                   // payload space not used yet
}

// Sizes of claimBatch's allocations.
const (
	claimBlock   = 64       // messages per block at most
	payloadChunk = 32 << 10 // bytes of payload per chunk
	payloadAlone = 4 << 10  // a payload from this size has an allocation of its own
)

// scan reads and closes rows, of claimColumns, up to limit in all.
func (c *claimBatch) scan(rows *sql.Rows, limit int) error {
	defer rows.Close()
	var (
		payload, headers sql.RawBytes
		created          int64
		next             sql.NullInt64
	)
	for rows.Next() {
		if len(c.block) == 0 {
			c.block = make([]weirtype.OutboxMessage, max(1, min(limit-len(c.msgs), claimBlock)))
		}
		m := &c.block[0]
		if err := rows.Scan(&m.ID, &m.Topic, &m.Key, &payload, &headers, &created, &m.Attempts, &m.LastError, &next); err != nil {
			return err
		}
		c.block = c.block[1:]
		if len(headers) > 0 {
			if err := json.Unmarshal(headers, &m.Headers); err != nil {
				return fmt.Errorf("outbox message %d: headers: %w", m.ID, err)
			}
		}
		m.Payload = c.keep(payload)
		m.CreatedAt = decodeTime(sql.NullInt64{Int64: created, Valid: true})
		m.NextAttemptAt = m.CreatedAt
		if next.Valid {
			m.NextAttemptAt = decodeTime(next)
		}
		m.LeaseOwner, m.LeaseExpiresAt = c.owner, c.expires
		c.msgs = append(c.msgs, m)
	}
	return rows.Err()
}

// keep returns a copy of b, nil if b is empty, in c's payload chunk when
// it is small.
func (c *claimBatch) keep(b []byte) []byte {
	switch {
	case len(b) == 0:
		return nil
	case len(b) >= payloadAlone:
		return bytes.Clone(b)
	}
	if len(c.chunk) < len(b) {
		c.chunk = make([]byte, payloadChunk)
	}
	kept := c.chunk[:len(b):len(b)]
	copy(kept, b)
	c.chunk = c.chunk[len(b):]
	return kept
}

// OutboxIdentity reads the store's identity (weir_store_identity); see
// store.Executor.
func (e executor) OutboxIdentity(ctx context.Context) (store.OutboxIdentity, error) {
	var id store.OutboxIdentity
	err := e.reader().QueryRowContext(ctx, `SELECT id, outbox_legacy_through FROM weir_store_identity`).Scan(&id.StoreID, &id.LegacyThrough)
	if errors.Is(err, sql.ErrNoRows) {
		err = errors.New("weir_store_identity is empty; was the store migrated by this weir?")
	}
	if err != nil {
		return store.OutboxIdentity{}, fmt.Errorf("outbox identity: %w", err)
	}
	return id, nil
}

// OutboxBacklog counts the pending messages (weir_outbox_pending's) and
// finds the oldest; see store.Executor.
func (e executor) OutboxBacklog(ctx context.Context) (store.OutboxBacklog, error) {
	var (
		b      store.OutboxBacklog
		oldest sql.NullInt64
	)
	err := e.reader().QueryRowContext(ctx, `SELECT count(*), min(created_at) FROM weir_outbox o WHERE `+pendingAt("o", watermark)).Scan(&b.Pending, &oldest)
	if err != nil {
		return store.OutboxBacklog{}, fmt.Errorf("outbox backlog: %w", err)
	}
	b.OldestCreatedAt = decodeTime(oldest)
	return b, nil
}
