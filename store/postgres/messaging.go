package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// messagingQueries are the statements of the outbox and the inbox.
type messagingQueries struct {
	addOutbox, lockOutbox, claimOutbox, markPublished, retryOutbox, releaseOutbox, purgeOutbox string
	recordInbox, purgeInbox                                                                    string
	outboxBacklog, outboxIdentity                                                              string
}

// outboxColumns are the columns scanOutbox reads, in its order.
const outboxColumns = `id, topic, key, payload, headers, created_at, published_at, attempts, last_error,
	next_attempt_at, lease_owner, lease_expires_at`

// outboxHeld is the guard of a write by the relay that holds the messages:
// $1 the ids, $2 the relay. A lease that has ended, but whose message no
// other relay has claimed since, is still held.
//
// The writes that name messages by outboxHeld are planned at each call
// (planEachCall), as the heartbeat is: a prepared statement's generic
// plan, made while the outbox held a few hundred messages and kept while
// it grew (no ANALYZE without autovacuum), scanned the whole outbox to
// mark four messages of twenty thousand.
const outboxHeld = `id = ANY($1::bigint[]) AND lease_owner = $2 AND published_at IS NULL`

func newMessagingQueries(schema string) messagingQueries {
	outbox := schema + `.weir_outbox`
	inbox := schema + `.weir_inbox`
	return messagingQueries{
		// weir_outbox_pending indexes exactly these rows.
		outboxBacklog:  `SELECT count(*), min(created_at) FROM ` + outbox + ` WHERE published_at IS NULL`,
		outboxIdentity: `SELECT id, outbox_legacy_through FROM ` + schema + `.weir_store_identity`,
		// The messages come as arrays of one length; the identity is drawn
		// in the order of the SELECT, which is the order of the messages.
		addOutbox: `INSERT INTO ` + outbox + ` (topic, key, payload, headers, created_at, next_attempt_at)
SELECT m.topic, m.key, coalesce(m.payload, ''::bytea), m.headers::jsonb, $5::timestamptz, $5::timestamptz
FROM unnest($1::text[], $2::text[], $3::bytea[], $4::text[]) WITH ORDINALITY AS m(topic, key, payload, headers, n)
ORDER BY m.n
RETURNING id`,
		// Taken first in the claim's transaction (see ClaimOutbox).
		lockOutbox: `SELECT pg_advisory_xact_lock($1)`,
		// weir_claim_outbox (migration 0019) reads weir_outbox_pending in
		// id order: the messages due at $1 and not held by a live lease
		// (one that ends at $5 or later), up to the limit, skipping those
		// another writer has locked (a message changed and committed
		// since the statement's snapshot is re-checked when it is locked,
		// and dropped), and those of a key whose first unpublished
		// message is blocked. That first message is one probe of
		// weir_outbox_key, read in order and stopped at the first row: a
		// check of every earlier message of the key, which a plan reads
		// through whatever its form, cost a claim seconds behind a long
		// blocked key. It then keeps a keyed candidate only if every
		// earlier unpublished message of its key is a candidate too, so
		// that no message is taken without those before it: one held by
		// a live lease or waiting out a backoff behind the key's first,
		// or one skipped or dropped (a retry or a publish by the
		// message's previous relay, racing the claim), holds back the
		// key's later ones. The earlier messages of a candidate are, as
		// a rule, candidates before it: few. $1 is the claim's time
		// rounded down to the microsecond, $5 rounded up, so that each
		// comparison of a column of whole microseconds is exact. The
		// function turns sorts, bitmap scans and sequential scans off, so
		// the ordered read is chosen whatever the table's statistics say.
		claimOutbox: `SELECT ` + outboxColumns + ` FROM ` + schema + `.weir_claim_outbox($1::timestamptz, $2, $3, $4::timestamptz, $5::timestamptz)`,
		markPublished: `UPDATE ` + outbox + ` SET published_at = $3::timestamptz, ` + dropLease + `
WHERE ` + outboxHeld,
		retryOutbox: `UPDATE ` + outbox + ` SET
	attempts = attempts + 1,
	last_error = $3,
	next_attempt_at = $4::timestamptz,
	` + dropLease + `
WHERE ` + outboxHeld,
		releaseOutbox: `UPDATE ` + outbox + ` SET ` + dropLease + `
WHERE ` + outboxHeld,
		// The oldest first, read from weir_outbox_published, skipping the
		// rows another purge has locked.
		purgeOutbox: `DELETE FROM ` + outbox + ` WHERE id IN (
	SELECT id FROM ` + outbox + `
	WHERE published_at < $1::timestamptz
	ORDER BY published_at
	LIMIT $2
	FOR UPDATE SKIP LOCKED)`,
		// A record made by a transaction not yet committed makes this one
		// wait, then find it (a duplicate) or, if it rolled back, insert.
		recordInbox: `INSERT INTO ` + inbox + ` (topic, message_id, received_at) VALUES ($1, $2, $3::timestamptz)
ON CONFLICT (topic, message_id) DO NOTHING`,
		purgeInbox: `DELETE FROM ` + inbox + ` WHERE (topic, message_id) IN (
	SELECT topic, message_id FROM ` + inbox + `
	WHERE received_at < $1::timestamptz
	ORDER BY received_at
	LIMIT $2
	FOR UPDATE SKIP LOCKED)`,
	}
}

// outboxLockKey is the key of the advisory lock that serialises the
// outbox claims of one schema (see ClaimOutbox), derived from the schema's
// name like advisoryKey, under a prefix of its own.
func outboxLockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("weir/outbox-claim/"))
	h.Write([]byte(schema))
	return int64(h.Sum64())
}

// AddOutbox adds msgs to the outbox at now, in one statement, and returns
// their ids in order; see store.Executor. A message's headers are stored
// as a JSON object; its topic, key and headers may not hold a NUL byte
// (store.ErrInvalid).
func (e executor) AddOutbox(ctx context.Context, now time.Time, msgs []store.OutboxMessage) ([]int64, error) {
	const op = "add to the outbox"
	if err := refuse(op, store.CheckNow(now)); err != nil {
		return nil, err
	}
	topics := make([]string, len(msgs))
	keys := make([]string, len(msgs))
	payloads := make([][]byte, len(msgs))
	headers := make([]string, len(msgs))
	for i, m := range msgs {
		if err := m.Validate(); err != nil {
			return nil, refuse(op, fmt.Errorf("message %d: %w", i, err))
		}
		h := []byte("{}")
		if len(m.Headers) > 0 {
			var err error
			if h, err = json.Marshal(m.Headers); err != nil {
				return nil, invalid(op, "msgs[%d]: headers: %v", i, err)
			}
		}
		topics[i], keys[i], payloads[i], headers[i] = m.Topic, m.Key, m.Payload, string(h)
	}
	if len(msgs) == 0 {
		return []int64{}, nil
	}
	ids, err := e.queryIDs(ctx, op, e.s.sql.addOutbox, topics, keys, payloads, headers, micro(now))
	if err != nil {
		return nil, err
	}
	if len(ids) != len(msgs) {
		return nil, fmt.Errorf("postgres: %s: %d ids returned for %d messages", op, len(ids), len(msgs))
	}
	// RETURNING comes in no promised order; the ids were drawn in the
	// messages' order.
	slices.Sort(ids)
	return ids, nil
}

// ClaimOutbox takes up to p.Limit messages due at p.Now, lowest id first;
// see store.Executor. p.Holding changes nothing: the owner's leases keep
// the messages it holds, and the later ones of their keys, out already.
// The claim is a pipelined batch of two statements, one round trip, in
// one transaction (the batch's implicit transaction on the pool, or the
// caller's). The first takes the schema's outbox advisory
// lock (pg_advisory_xact_lock), which serialises claims: the second, at
// READ COMMITTED, takes its snapshot once the lock is held and sees every
// earlier claim committed, so that concurrent relays do not skip each
// other's rows, which would leave a key's later messages out of both
// claims. The second statement (claimOutbox) takes a keyed message only
// with every earlier unpublished message of its key, checked against the
// rows it has locked, so that the rule holds even against writers that do
// not take the lock (a relay's retry or publish racing the claim), and
// with a snapshot older than the lock (a caller's REPEATABLE READ
// transaction). In a caller's transaction the lock is held until it ends:
// other relays' claims wait for it.
func (e executor) ClaimOutbox(ctx context.Context, p store.OutboxClaimParams) ([]*weirtype.OutboxMessage, error) {
	const op = "claim outbox"
	if err := refuse(op, p.Validate()); err != nil {
		return nil, err
	}
	expires := micro(p.Now.Add(p.LeaseFor))
	var msgs []*weirtype.OutboxMessage
	err := e.run(ctx, func(q querier) error {
		b := &pgx.Batch{}
		b.Queue(e.s.sql.lockOutbox, e.s.outboxKey)
		b.Queue(e.s.sql.claimOutbox, micro(p.Now), p.Limit, p.Owner, expires, microCeil(p.Now))
		br := q.SendBatch(ctx, b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		msgs, err = collect(rows, scanOutbox)
		if err != nil {
			return err
		}
		return br.Close()
	})
	if err != nil {
		return nil, dbError(op, err)
	}
	// RETURNING comes in no promised order.
	slices.SortFunc(msgs, func(a, b *weirtype.OutboxMessage) int { return cmp.Compare(a.ID, b.ID) })
	return msgs, nil
}

// MarkPublished marks published at now the messages ids that owner holds,
// in one statement; see store.Executor.
func (e executor) MarkPublished(ctx context.Context, now time.Time, owner string, ids []int64) (int, error) {
	const op = "mark published"
	if err := refuse(op, store.CheckOwner(owner), store.CheckNow(now)); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, nil
	}
	return e.execCount(ctx, op, e.s.sql.markPublished, planEachCall, ids, owner, micro(now))
}

// RetryOutbox records a failed publish of the messages ids that owner
// holds, in one statement; see store.Executor. A zero retryAt makes them
// due at now. lastError is kept with any NUL byte or invalid UTF-8
// replaced by U+FFFD, which PostgreSQL cannot store.
func (e executor) RetryOutbox(ctx context.Context, now time.Time, owner string, ids []int64, lastError string, retryAt time.Time) (int, error) {
	const op = "retry outbox"
	if err := refuse(op, store.CheckOwner(owner), store.CheckNow(now)); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, nil
	}
	if retryAt.IsZero() {
		retryAt = now
	}
	return e.execCount(ctx, op, e.s.sql.retryOutbox, planEachCall, ids, owner, storable(lastError), micro(retryAt))
}

// ReleaseOutbox drops owner's leases on the messages ids, in one
// statement; see store.Executor.
func (e executor) ReleaseOutbox(ctx context.Context, now time.Time, owner string, ids []int64) (int, error) {
	const op = "release outbox"
	if err := refuse(op, store.CheckOwner(owner), store.CheckNow(now)); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, nil
	}
	return e.execCount(ctx, op, e.s.sql.releaseOutbox, planEachCall, ids, owner)
}

// PurgeOutbox deletes up to limit messages published before before, oldest
// first, in one statement; see store.Executor. Unpublished messages are
// never deleted.
func (e executor) PurgeOutbox(ctx context.Context, before time.Time, limit int) (int, error) {
	const op = "purge outbox"
	if err := refuse(op, store.CheckLimit(limit), store.CheckSet("before", before)); err != nil {
		return 0, err
	}
	return e.execCount(ctx, op, e.s.sql.purgeOutbox, microCeil(before), limit)
}

// OutboxBacklog counts the unpublished messages and finds the oldest, in
// one statement; see store.Executor.
func (e executor) OutboxBacklog(ctx context.Context) (store.OutboxBacklog, error) {
	var (
		b      store.OutboxBacklog
		oldest pgtype.Timestamptz
	)
	err := e.run(ctx, func(q querier) error {
		return q.QueryRow(ctx, e.s.sql.outboxBacklog).Scan(&b.Pending, &oldest)
	})
	if err != nil {
		return store.OutboxBacklog{}, dbError("outbox backlog", err)
	}
	if oldest.Valid {
		b.OldestCreatedAt = oldest.Time.UTC()
	}
	return b, nil
}

// OutboxIdentity reads the store's identity (weir_store_identity), in one
// statement; see store.Executor.
func (e executor) OutboxIdentity(ctx context.Context) (store.OutboxIdentity, error) {
	var id store.OutboxIdentity
	err := e.run(ctx, func(q querier) error {
		return q.QueryRow(ctx, e.s.sql.outboxIdentity).Scan(&id.StoreID, &id.LegacyThrough)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return store.OutboxIdentity{}, errors.New("postgres: outbox identity: weir_store_identity is empty; was the schema migrated by this weir?")
	}
	if err != nil {
		return store.OutboxIdentity{}, dbError("outbox identity", err)
	}
	return id, nil
}

// RecordInbox records that the message id of topic was handled, in one
// statement; see store.Executor. An empty topic or id, or one with a NUL
// byte, is store.ErrInvalid.
func (e executor) RecordInbox(ctx context.Context, now time.Time, topic, id string) (bool, error) {
	const op = "record inbox"
	if err := refuse(op, store.CheckInboxRecord(topic, id), store.CheckNow(now)); err != nil {
		return false, err
	}
	n, err := e.execCount(ctx, op, e.s.sql.recordInbox, topic, id, micro(now))
	return n == 1, err
}

// PurgeInbox deletes up to limit inbox records made before before, oldest
// first, in one statement; see store.Executor.
func (e executor) PurgeInbox(ctx context.Context, before time.Time, limit int) (int, error) {
	const op = "purge inbox"
	if err := refuse(op, store.CheckLimit(limit), store.CheckSet("before", before)); err != nil {
		return 0, err
	}
	return e.execCount(ctx, op, e.s.sql.purgeInbox, microCeil(before), limit)
}

// execCount runs sql, a write, and returns how many rows it wrote.
func (e executor) execCount(ctx context.Context, op, sql string, args ...any) (int, error) {
	var n int64
	err := e.run(ctx, func(q querier) error {
		tag, err := q.Exec(ctx, sql, args...)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, dbError(op, err)
	}
	return int(n), nil
}

// scanOutbox reads a row of outboxColumns. Headers stored as an empty
// object read back as nil.
func scanOutbox(row pgx.Row) (*weirtype.OutboxMessage, error) {
	var (
		m                           weirtype.OutboxMessage
		headers                     []byte
		publishedAt, leaseExpiresAt pgtype.Timestamptz
	)
	if err := row.Scan(&m.ID, &m.Topic, &m.Key, &m.Payload, &headers, &m.CreatedAt, &publishedAt, &m.Attempts,
		&m.LastError, &m.NextAttemptAt, &m.LeaseOwner, &leaseExpiresAt); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(headers, &m.Headers); err != nil {
		return nil, fmt.Errorf("outbox message %d: headers column: %w", m.ID, err)
	}
	if len(m.Headers) == 0 {
		m.Headers = nil
	}
	m.CreatedAt = m.CreatedAt.UTC()
	m.PublishedAt = fromNull(publishedAt)
	m.NextAttemptAt = m.NextAttemptAt.UTC()
	m.LeaseExpiresAt = fromNull(leaseExpiresAt)
	return &m, nil
}
