package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// outboxColumns are weir_outbox's columns in the order scanOutbox reads
// them.
const outboxColumns = `id, topic, key, payload, headers, created_at, published_at, attempts, last_error,
	next_attempt_at, lease_owner, lease_expires_at`

// AddOutbox inserts the messages in one transaction (a savepoint in a
// caller's) and returns their ids in order.
func (e executor) AddOutbox(ctx context.Context, now time.Time, msgs []store.OutboxMessage) ([]int64, error) {
	if err := checkNow(now); err != nil {
		return nil, fmt.Errorf("add to the outbox: %w", err)
	}
	headers := make([]any, len(msgs))
	for i, m := range msgs {
		if m.Topic == "" {
			return nil, fmt.Errorf("add to the outbox: %w: message %d has no topic", store.ErrInvalid, i)
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

// markPublished and retryOutbox update the messages that owner ?2 holds,
// of the ids ?3 (a JSON array), at ?1.
const (
	markPublished = `UPDATE weir_outbox SET published_at = ?1, lease_owner = '', lease_expires_at = NULL WHERE ` + heldByOwner
	retryOutbox   = `UPDATE weir_outbox SET attempts = attempts + 1, last_error = ?4, next_attempt_at = ?5, lease_owner = '', lease_expires_at = NULL
		WHERE ` + heldByOwner
)

// claimOutbox leases, to ?2 until ?3, up to ?4 messages unpublished, due
// at ?1 and not held by a live lease, in id order; a keyed message only if
// no earlier unpublished message of its key is held or waits out a
// backoff. SQLite's single writer makes the check and the update one step.
const claimOutbox = `UPDATE weir_outbox SET lease_owner = ?2, lease_expires_at = ?3
	WHERE id IN (
		SELECT o.id FROM weir_outbox o
		WHERE o.published_at IS NULL AND o.next_attempt_at <= ?1
			AND (o.lease_expires_at IS NULL OR o.lease_expires_at < ?1)
			AND (o.key = '' OR NOT EXISTS (
				SELECT 1 FROM weir_outbox p
				WHERE p.key = o.key AND p.key <> '' AND p.published_at IS NULL AND p.id < o.id
					AND (p.next_attempt_at > ?1 OR p.lease_expires_at >= ?1)))
		ORDER BY o.id LIMIT CAST(?4 AS INTEGER))
	RETURNING ` + outboxColumns

// ClaimOutbox takes up to p.Limit messages for p.Owner; see store.Executor.
func (e executor) ClaimOutbox(ctx context.Context, p store.OutboxClaimParams) ([]*weirtype.OutboxMessage, error) {
	switch {
	case p.Limit < 1:
		return nil, fmt.Errorf("claim the outbox: %w: limit %d is less than 1", store.ErrInvalid, p.Limit)
	case p.Owner == "":
		return nil, fmt.Errorf("claim the outbox: %w: owner is empty", store.ErrInvalid)
	case p.LeaseFor <= 0:
		return nil, fmt.Errorf("claim the outbox: %w: lease %v is not positive", store.ErrInvalid, p.LeaseFor)
	}
	if err := checkNow(p.Now); err != nil {
		return nil, fmt.Errorf("claim the outbox: %w", err)
	}
	var msgs []*weirtype.OutboxMessage
	err := e.write(ctx, func(tx *sql.Tx) error {
		var err error
		rows, err := e.s.stmts.query(ctx, tx, claimOutbox, encodeTime(p.Now), p.Owner, encodeTime(p.Now.Add(p.LeaseFor)), p.Limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			m, err := scanOutbox(rows)
			if err != nil {
				return err
			}
			msgs = append(msgs, m)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("claim the outbox: %w", err)
	}
	slices.SortFunc(msgs, func(a, b *weirtype.OutboxMessage) int { return cmp.Compare(a.ID, b.ID) })
	return msgs, nil
}

// heldByOwner is the condition on a message that owner holds: ?2 is the
// owner, ?3 the ids as a JSON array.
const heldByOwner = `published_at IS NULL AND lease_owner = ?2 AND id IN (SELECT value FROM json_each(?3))`

// MarkPublished marks published the messages ids that owner holds.
func (e executor) MarkPublished(ctx context.Context, now time.Time, owner string, ids []int64) (int, error) {
	return e.updateHeld(ctx, "mark published", now, owner, ids, markPublished)
}

// RetryOutbox records a failed publish of the messages ids that owner
// holds.
func (e executor) RetryOutbox(ctx context.Context, now time.Time, owner string, ids []int64, lastError string, retryAt time.Time) (int, error) {
	if err := checkTime("retry at", retryAt); err != nil {
		return 0, fmt.Errorf("retry the outbox: %w", err)
	}
	if retryAt.IsZero() {
		retryAt = now
	}
	return e.updateHeld(ctx, "retry the outbox", now, owner, ids, retryOutbox, lastError, encodeTime(retryAt))
}

// updateHeld runs update, whose ?1 is now, ?2 owner and ?3 the ids, with
// more arguments after those, and returns the rows it changed.
func (e executor) updateHeld(ctx context.Context, op string, now time.Time, owner string, ids []int64, update string, more ...any) (int, error) {
	if err := checkNow(now); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	if owner == "" {
		return 0, fmt.Errorf("%s: %w: owner is empty", op, store.ErrInvalid)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	idsJSON, err := json.Marshal(ids)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	var n int64
	err = e.write(ctx, func(tx *sql.Tx) error {
		res, err := e.s.stmts.exec(ctx, tx, update, append([]any{encodeTime(now), owner, string(idsJSON)}, more...)...)
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

// PurgeOutbox deletes up to limit messages published before before.
func (e executor) PurgeOutbox(ctx context.Context, before time.Time, limit int) (int, error) {
	return e.purge(ctx, "purge the outbox", before, limit, `DELETE FROM weir_outbox WHERE id IN (
		SELECT id FROM weir_outbox WHERE published_at IS NOT NULL AND published_at < ?1 ORDER BY published_at LIMIT CAST(?2 AS INTEGER))`)
}

// RecordInbox records message id of topic, reporting whether it is new.
func (e executor) RecordInbox(ctx context.Context, now time.Time, topic, id string) (bool, error) {
	switch {
	case topic == "":
		return false, fmt.Errorf("record in the inbox: %w: topic is empty", store.ErrInvalid)
	case id == "":
		return false, fmt.Errorf("record in the inbox: %w: message id is empty", store.ErrInvalid)
	}
	if err := checkNow(now); err != nil {
		return false, fmt.Errorf("record in the inbox: %w", err)
	}
	var n int64
	err := e.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO weir_inbox (topic, message_id, received_at) VALUES (?1, ?2, ?3)
			ON CONFLICT (topic, message_id) DO NOTHING`, topic, id, encodeTime(now))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("record in the inbox: %w", err)
	}
	return n == 1, nil
}

// PurgeInbox deletes up to limit inbox records made before before.
func (e executor) PurgeInbox(ctx context.Context, before time.Time, limit int) (int, error) {
	return e.purge(ctx, "purge the inbox", before, limit, `DELETE FROM weir_inbox WHERE (topic, message_id) IN (
		SELECT topic, message_id FROM weir_inbox WHERE received_at < ?1 ORDER BY received_at LIMIT CAST(?2 AS INTEGER))`)
}

// purge runs del, whose ?1 is before and ?2 limit, and returns the rows it
// deleted.
func (e executor) purge(ctx context.Context, op string, before time.Time, limit int, del string) (int, error) {
	if limit < 1 {
		return 0, fmt.Errorf("%s: %w: limit %d is less than 1", op, store.ErrInvalid, limit)
	}
	if err := checkTime("before", before); err != nil || before.IsZero() {
		return 0, fmt.Errorf("%s: %w: before %v is not a time that can be stored", op, store.ErrInvalid, before)
	}
	var n int64
	err := e.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, del, encodeTime(before), limit)
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

// scanOutbox reads one row of outboxColumns.
func scanOutbox(row scanner) (*weirtype.OutboxMessage, error) {
	var (
		m                                     weirtype.OutboxMessage
		headers                               sql.NullString
		created, published, next, leaseExpiry sql.NullInt64
	)
	if err := row.Scan(&m.ID, &m.Topic, &m.Key, &m.Payload, &headers, &created, &published, &m.Attempts, &m.LastError,
		&next, &m.LeaseOwner, &leaseExpiry); err != nil {
		return nil, err
	}
	if headers.Valid && headers.String != "" {
		if err := json.Unmarshal([]byte(headers.String), &m.Headers); err != nil {
			return nil, fmt.Errorf("outbox message %d: headers: %w", m.ID, err)
		}
	}
	m.CreatedAt, m.PublishedAt, m.NextAttemptAt, m.LeaseExpiresAt = decodeTime(created), decodeTime(published), decodeTime(next), decodeTime(leaseExpiry)
	return &m, nil
}
