package sqlite

import (
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
