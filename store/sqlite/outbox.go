package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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

// The relay's side of the SQLite outbox.
//
// One relay at a time holds the outbox (weir_outbox_relay), and ids are
// drawn in commit order (one writer), so published messages need not be
// marked one by one: a mark (weir_outbox_marks) says that every message
// up to its through_id was published by its time, except those set aside,
// which get their own published_at when they go: those that failed at
// least once (attempts > 0), and those parked (parked = 1). The latest
// mark is the watermark. A message is pending when published_at is NULL
// and it is above the watermark or set aside; weir_outbox_pending lists
// them.
//
// The mark of a batch walks, in its transaction, the pending messages
// between the old watermark and the batch's highest id, and parks those
// that are neither in the batch nor set aside already (a keyed message
// held back behind an earlier one of its key, say): the watermark then
// passes them all, and the claim finds them below it through
// weir_outbox_set_aside.

// claimColumns are the columns of a claimed message o, in the order
// claimBatch.scan reads them. published_at is not among them: a claimed
// message is pending, its published_at NULL. next_attempt_at is NULL
// where it equals created_at, as it does until a publish fails: one
// integer fewer for the driver to box per message.
const claimColumns = `o.id, o.topic, o.key, o.payload, o.headers, o.created_at, o.attempts, o.last_error, nullif(o.next_attempt_at, o.created_at)`

// watermark is the id up to which messages that never failed are
// published.
const watermark = `(SELECT coalesce(max(through_id), 0) FROM weir_outbox_marks)`

// relayLease and watermarkNow read the relay that holds the outbox and the
// watermark.
const (
	relayLease   = `SELECT owner, expires_at FROM weir_outbox_relay`
	watermarkNow = `SELECT ` + watermark
)

// pendingAt is the condition on a pending message o, against the
// watermark ?w.
func pendingAt(o, w string) string {
	return o + `.published_at IS NULL AND (` + o + `.id > ` + w + ` OR ` + setAside(o) + `)`
}

// setAside is the condition on a message o below the watermark that is
// not published by it, as weir_outbox_set_aside's.
func setAside(o string) string { return `(` + o + `.attempts > 0 OR ` + o + `.parked = 1)` }

// heldByOwner is the condition on a message that owner ?2 holds: one of
// the ids ?3, pending, while ?2 holds the outbox (its lease, ended or
// not, not taken over).
var heldByOwner = pendingAt("weir_outbox", watermark) + ` AND id IN (SELECT value FROM json_each(?3))
	AND EXISTS (SELECT 1 FROM weir_outbox_relay WHERE owner = ?2)`

// retryOutbox records a failed publish of the messages ids ?3 at ?1, while
// ?2 holds the outbox.
var retryOutbox = `UPDATE weir_outbox SET attempts = attempts + 1, last_error = ?4, next_attempt_at = ?5 WHERE ` + heldByOwner

// takeOutbox takes the outbox for ?1 until ?3, or renews its lease, unless
// another owner's lease lasts at ?2 (one that ends at ?2 has not ended).
const takeOutbox = `INSERT INTO weir_outbox_relay (singleton, owner, expires_at) VALUES (1, ?1, ?3)
	ON CONFLICT (singleton) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
	WHERE weir_outbox_relay.owner = excluded.owner OR weir_outbox_relay.expires_at < ?2`

// keyFree is the condition on a keyed candidate o that no earlier pending
// message of its key is held (between ?2 and ?3, the lowest and highest
// held ids) or waits out a backoff (due after ?1), against the watermark
// ?5. The earlier messages above the watermark are a range of
// weir_outbox_key; those below it are set aside, and few, in
// weir_outbox_set_aside.
var keyFree = `(o.key = '' OR NOT EXISTS (
		SELECT 1 FROM weir_outbox p
		WHERE p.key = o.key AND p.key <> '' AND p.id > ?5 AND p.id < o.id AND p.published_at IS NULL
			AND (p.next_attempt_at > ?1 OR p.id BETWEEN ?2 AND ?3))
	AND NOT EXISTS (
		SELECT 1 FROM weir_outbox p INDEXED BY weir_outbox_set_aside
		WHERE p.published_at IS NULL AND ` + setAside("p") + ` AND p.id < o.id AND p.key = o.key AND p.key <> ''
			AND (p.next_attempt_at > ?1 OR p.id BETWEEN ?2 AND ?3)))`

// claimAbove and claimBelow read up to ?4 pending messages due at ?1, not
// between ?2 and ?3, whose keys are free, in id order: those above the
// watermark ?5, and those at or below it set aside. Leaving out the whole
// held range, not just the held ids, keeps the scan on the index (a held
// id is typically among the latest few hundred): what it leaves out, a
// later claim takes. When the held range starts just above the watermark,
// as it does while the relay publishes batch after batch, claimAbove's
// scan starts above the held range rather than stepping over its rows.
var (
	claimAbove = `SELECT ` + claimColumns + ` FROM weir_outbox o
	WHERE o.id > iif(?2 <= ?5 + 1, max(?3, ?5), ?5) AND o.published_at IS NULL AND o.next_attempt_at <= ?1 AND o.id NOT BETWEEN ?2 AND ?3 AND ` + keyFree + `
	ORDER BY o.id LIMIT CAST(?4 AS INTEGER)`
	claimBelow = `SELECT ` + claimColumns + ` FROM weir_outbox o INDEXED BY weir_outbox_set_aside
	WHERE o.published_at IS NULL AND ` + setAside("o") + ` AND o.id <= ?5 AND o.next_attempt_at <= ?1 AND o.id NOT BETWEEN ?2 AND ?3 AND ` + keyFree + `
	ORDER BY o.id LIMIT CAST(?4 AS INTEGER)`
)

// ClaimOutbox returns up to p.Limit messages for p.Owner while it holds
// the outbox, none while another owner's lease lasts; see store.Executor.
// While more than half of p.Owner's lease remains the claim only reads,
// on the read pool, beside the store's writes (the relay's marks among
// them); otherwise it takes or renews the lease, one row written, and
// reads in the same transaction.
func (e executor) ClaimOutbox(ctx context.Context, p store.OutboxClaimParams) ([]*weirtype.OutboxMessage, error) {
	if err := store.FirstError(p.Validate(), checkNow(p.Now)); err != nil {
		return nil, fmt.Errorf("claim the outbox: %w", err)
	}
	if e.tx == nil {
		msgs, held, err := e.readClaim(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("claim the outbox: %w", err)
		}
		if held {
			return msgs, nil
		}
	}
	expires := p.Now.Add(p.LeaseFor)
	var msgs []*weirtype.OutboxMessage
	err := e.write(ctx, func(tx *sql.Tx) error {
		res, err := e.s.stmts.exec(ctx, tx, takeOutbox, p.Owner, encodeTime(p.Now), encodeTime(expires))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err // another relay holds the outbox
		}
		msgs, err = claimPending(ctx, &e.s.stmts, tx, p, expires)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim the outbox: %w", err)
	}
	return msgs, nil
}

// readClaim reads the claim on the read pool if p.Owner holds the outbox
// with more than half of p.LeaseFor left at p.Now, reporting whether it
// did.
func (e executor) readClaim(ctx context.Context, p store.OutboxClaimParams) ([]*weirtype.OutboxMessage, bool, error) {
	e.s.readStmts.prepare(ctx, e.s.read)
	tx, err := e.s.read.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, err
	}
	defer tx.Rollback()
	var (
		owner   string
		expires int64
	)
	err = e.s.readStmts.queryRow(ctx, tx, relayLease).Scan(&owner, &expires)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	until := decodeTime(sql.NullInt64{Int64: expires, Valid: true})
	if owner != p.Owner || until.Sub(p.Now) <= p.LeaseFor/2 {
		return nil, false, nil
	}
	msgs, err := claimPending(ctx, &e.s.readStmts, tx, p, until)
	return msgs, err == nil, err
}

// claimPending reads, in tx, with the statements of stmts, the messages
// of a claim for p, held until expires: those set aside below the
// watermark first, then those above it.
func claimPending(ctx context.Context, stmts *stmtCache, tx *sql.Tx, p store.OutboxClaimParams, expires time.Time) ([]*weirtype.OutboxMessage, error) {
	var w int64
	if err := stmts.queryRow(ctx, tx, watermarkNow).Scan(&w); err != nil {
		return nil, err
	}
	lo, hi := int64(1), int64(0) // an empty range
	if len(p.Holding) > 0 {
		lo, hi = slices.Min(p.Holding), slices.Max(p.Holding)
	}
	c := claimBatch{owner: p.Owner, expires: expires}
	for _, q := range []string{claimBelow, claimAbove} {
		if len(c.msgs) == p.Limit {
			break
		}
		rows, err := stmts.query(ctx, tx, q, encodeTime(p.Now), lo, hi, p.Limit-len(c.msgs), w)
		if err != nil {
			return nil, err
		}
		if err := c.scan(rows, p.Limit); err != nil {
			return nil, err
		}
	}
	return c.msgs, nil
}

// The statements of MarkPublished.
var (
	// markScan counts the pending messages above the watermark ?1 up to
	// ?2, and those of them set aside. It runs in SQLite, rather than
	// returning each message's row to Go, when the mark's ids are every
	// id in that range, as they are while the relay publishes batch after
	// batch: then only a message set aside needs more.
	markScan = `SELECT count(*), coalesce(sum(` + setAside("weir_outbox") + `), 0) FROM weir_outbox WHERE id > ?1 AND id <= ?2 AND published_at IS NULL`
	// markRows reads the pending messages above the watermark ?1 up to
	// ?2, each with whether it is set aside.
	markRows = `SELECT id, ` + setAside("weir_outbox") + ` FROM weir_outbox WHERE id > ?1 AND id <= ?2 AND published_at IS NULL ORDER BY id`
	// markEach marks published at ?1 the pending ids ?2 (a JSON array),
	// against the watermark ?3.
	markEach = `UPDATE weir_outbox SET published_at = ?1
		WHERE id IN (SELECT value FROM json_each(?2)) AND ` + pendingAt("weir_outbox", "?3")
	// park sets aside the ids ?1.
	park       = `UPDATE weir_outbox SET parked = 1 WHERE id IN (SELECT value FROM json_each(?1))`
	insertMark = `INSERT INTO weir_outbox_marks (through_id, published_at) VALUES (?1, ?2)`
)

// MarkPublished marks published the messages ids that owner holds: it
// moves the watermark up to the highest of them, parking on the way the
// pending messages that are not among them, and marks one by one those
// set aside.
func (e executor) MarkPublished(ctx context.Context, now time.Time, owner string, ids []int64) (int, error) {
	const op = "mark published"
	if err := store.FirstError(checkNow(now), store.CheckOwner(owner)); err != nil || len(ids) == 0 {
		if err != nil {
			err = fmt.Errorf("%s: %w", op, err)
		}
		return 0, err
	}
	var marked int
	err := e.write(ctx, func(tx *sql.Tx) error {
		marked = 0
		var holds bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM weir_outbox_relay WHERE owner = ?1)`, owner).Scan(&holds); err != nil || !holds {
			return err
		}
		var w int64
		var last sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(through_id), 0), max(published_at) FROM weir_outbox_marks`).Scan(&w, &last); err != nil {
			return err
		}
		at := now.UnixMicro()
		if last.Valid && last.Int64 > at {
			at = last.Int64 // marks keep their order in time too
		}
		var one []int64 // to mark one by one
		top := w
		for _, id := range ids {
			if id > w {
				top = max(top, id)
			} else {
				one = append(one, id) // set aside, if pending at all
			}
		}
		if top > w {
			n := -1 // given, and published by the watermark; -1 until counted
			if everyID(ids, w, top) {
				var pending, aside int
				if err := e.s.stmts.queryRow(ctx, tx, markScan, w, top).Scan(&pending, &aside); err != nil {
					return err
				}
				if aside == 0 {
					n = pending
				}
			}
			if n < 0 {
				var (
					odd []int64
					err error
				)
				if n, odd, err = e.markRows(ctx, tx, w, top, ids); err != nil {
					return err
				}
				one = append(one, odd...)
			}
			if _, err := e.s.stmts.exec(ctx, tx, insertMark, top, at); err != nil {
				return err
			}
			marked += n
		}
		if len(one) > 0 {
			b, err := json.Marshal(one)
			if err != nil {
				return err
			}
			res, err := e.s.stmts.exec(ctx, tx, markEach, at, string(b), top)
			if err != nil {
				return err
			}
			m, err := res.RowsAffected()
			marked += int(m)
			return err
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	return marked, nil
}

// everyID reports whether ids holds every id above w up to top.
func everyID(ids []int64, w, top int64) bool {
	if int64(len(ids)) < top-w {
		return false
	}
	seen := make([]bool, top-w)
	n := int64(0)
	for _, id := range ids {
		if id > w && !seen[id-w-1] {
			seen[id-w-1] = true
			n++
		}
	}
	return n == top-w
}

// markRows reads, in tx, the pending messages above the watermark w up
// to top: it returns how many of them are among ids and not set aside,
// which the watermark passes, and those among ids set aside, to be
// marked one by one, and it parks the others not set aside.
func (e executor) markRows(ctx context.Context, tx *sql.Tx, w, top int64, ids []int64) (int, []int64, error) {
	given := make(map[int64]bool, len(ids))
	for _, id := range ids {
		given[id] = true
	}
	rows, err := tx.QueryContext(ctx, markRows, w, top)
	if err != nil {
		return 0, nil, err
	}
	n := 0
	var one, parked []int64
	for rows.Next() {
		var (
			id    int64
			aside bool
		)
		if err := rows.Scan(&id, &aside); err != nil {
			rows.Close()
			return 0, nil, err
		}
		switch {
		case given[id] && aside:
			one = append(one, id)
		case given[id]:
			n++
		case !aside:
			parked = append(parked, id)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, nil, err
	}
	if len(parked) > 0 {
		b, err := json.Marshal(parked)
		if err != nil {
			return 0, nil, err
		}
		if _, err := e.s.stmts.exec(ctx, tx, park, string(b)); err != nil {
			return 0, nil, err
		}
	}
	return n, one, nil
}

// RetryOutbox records a failed publish of the messages ids that owner
// holds.
func (e executor) RetryOutbox(ctx context.Context, now time.Time, owner string, ids []int64, lastError string, retryAt time.Time) (int, error) {
	const op = "retry the outbox"
	if err := checkTime("retry at", retryAt); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	if retryAt.IsZero() {
		retryAt = now
	}
	idsJSON, err := heldArgs(op, now, owner, ids)
	if err != nil || idsJSON == "" {
		return 0, err
	}
	return e.execCount(ctx, op, retryOutbox, encodeTime(now), owner, idsJSON, lastError, encodeTime(retryAt))
}

// heldArgs checks the arguments of a write to messages that owner holds,
// and returns ids as a JSON array, or "" when there are none.
func heldArgs(op string, now time.Time, owner string, ids []int64) (string, error) {
	if err := store.FirstError(checkNow(now), store.CheckOwner(owner)); err != nil {
		return "", fmt.Errorf("%s: %w", op, err)
	}
	if len(ids) == 0 {
		return "", nil
	}
	b, err := json.Marshal(ids)
	if err != nil {
		return "", fmt.Errorf("%s: %w", op, err)
	}
	return string(b), nil
}

// ReleaseOutbox ends owner's lease on the outbox, giving back every
// message it holds, ids or not; see store.Executor.
func (e executor) ReleaseOutbox(ctx context.Context, now time.Time, owner string, ids []int64) (int, error) {
	const op = "release the outbox"
	if err := store.FirstError(checkNow(now), store.CheckOwner(owner)); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	idsJSON, err := json.Marshal(ids)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	var n int
	err = e.write(ctx, func(tx *sql.Tx) error {
		// The ids it held, as it says: those pending.
		err := tx.QueryRowContext(ctx, `SELECT count(*) FROM weir_outbox WHERE `+heldByOwner, nil, owner, string(idsJSON)).Scan(&n)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM weir_outbox_relay WHERE owner = ?1`, owner)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	return n, nil
}

// PurgeOutbox deletes up to limit messages published before before: those
// marked one by one, then those under the latest mark made before it,
// oldest first; then the marks under that one, which no message needs
// any more.
func (e executor) PurgeOutbox(ctx context.Context, before time.Time, limit int) (int, error) {
	const op = "purge the outbox"
	if err := store.FirstError(store.CheckLimit(limit), checkBefore(before)); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	var total int64
	err := e.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM weir_outbox WHERE id IN (
			SELECT id FROM weir_outbox WHERE published_at IS NOT NULL AND published_at < ?1 ORDER BY published_at LIMIT CAST(?2 AS INTEGER))`,
			encodeTime(before), limit)
		if err != nil {
			return err
		}
		if total, err = res.RowsAffected(); err != nil || total == int64(limit) {
			return err
		}
		var through sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT max(through_id) FROM weir_outbox_marks WHERE published_at < ?1`, encodeTime(before)).Scan(&through); err != nil || !through.Valid {
			return err
		}
		res, err = tx.ExecContext(ctx, `DELETE FROM weir_outbox WHERE id IN (
			SELECT id FROM weir_outbox WHERE id <= ?1 AND published_at IS NULL AND attempts = 0 AND parked = 0 ORDER BY id LIMIT CAST(?2 AS INTEGER))`,
			through.Int64, int64(limit)-total)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		total += n
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM weir_outbox_marks WHERE through_id < ?1`, through.Int64)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	return int(total), nil
}
