// Package postgres is weir's scale-out store: jobs in PostgreSQL, through
// pgx/v5, for many worker processes on many machines.
//
// [Open] connects with a pgxpool pool, creates the configured schema if it
// is missing and points every connection's search_path at it; [Store.Migrate]
// brings the schema to the version this weir knows. Every statement names
// the schema, so several weir deployments (or test cases) can share one
// database, each in a schema of its own.
//
// # Migrations
//
// The migrations are embedded (migrations/NNNN_name.sql) and recorded in
// weir_migrations. Each is applied in a transaction of its own that first
// takes a transaction-scoped advisory lock keyed by the schema's name, then
// reads the version: processes that start at once wait for each other and
// apply each migration once. A schema migrated by a newer weir is refused
// with store.ErrSchemaTooNew and left untouched.
//
// # Idempotent inserts
//
// A job with an idempotency key is inserted with one statement,
//
//	INSERT … ON CONFLICT (idempotency_key) WHERE idempotency_key <> ''
//	DO UPDATE SET <reclaim> WHERE <the job is running, stuck and its lease expired>
//	RETURNING …, (xmax = 0) AS inserted
//
// whose check and write are one step in the unique index: of any number of
// concurrent inserts of a key, in any number of processes, one inserts and
// the others wait for it to commit, then find its row and lock it. When
// the DO UPDATE does not fire, the next statement of the same pipelined
// batch reads the locked row, and its state gives the duplicate outcome.
// Batches of jobs are sent as one pgx.Batch, one round trip.
//
// # Claims, leases and dead letters
//
// A claim is one call of a PL/pgSQL function, weir_claim (from the head
// of the claim order) or weir_claim_from (from a hint), which turn sorts
// and sequential scans off so that their plans keep this shape whatever
// the table's statistics say. Leaving aside the pauses, limits and a
// breaker's probe they also obey, each is, in effect, two statements,
//
//	rows := ARRAY(SELECT ctid FROM weir_jobs
//	              WHERE queue = $2 AND (state = 'available' OR (state = 'scheduled' AND scheduled_at <= $1))
//	              ORDER BY priority DESC, scheduled_at, id LIMIT $3
//	              FOR UPDATE SKIP LOCKED);
//	UPDATE weir_jobs SET state = 'running', attempt = attempt + 1, lease_owner = …, lease_expires_at = …
//	WHERE ctid = ANY (rows)
//	RETURNING …
//
// the first of which reads the partial index weir_jobs_claim in its order
// and skips the jobs other claims hold locked: concurrent claims, in any
// number of processes, never take one job. The second updates the locked
// rows where they are (their addresses cannot change while the lock is
// held) rather than finding each again through the primary key, and runs
// on a snapshot taken after the lock, so it sees a row's latest version.
// The claimed jobs are sorted back into claim order, which RETURNING does
// not keep.
//
// Heartbeat, Complete, Fail and Snooze are guarded by the lease in their
// WHERE (state = 'running' AND lease_owner = the worker AND attempt = the
// lease's attempt): a worker whose lease was lost writes nothing and gets
// store.ErrLeaseLost, even when it has claimed the job again since, for a
// later attempt. Heartbeat extends any number of leases in one UPDATE … FROM
// unnest(ids, owners, attempts). RescueExpired takes
// the oldest expired leases with FOR UPDATE SKIP LOCKED, so rescuers that
// run at once never handle one job twice. A job abandoned by Fail or by a
// rescue, and its row in weir_dead_letters, are written by one statement
// (data-modifying CTEs); so are a requeue and a purge.
//
// The errors the database records itself (a stuck, expired, released or
// deadline-exceeded attempt) are written as encoding/json writes a
// weirtype.AttemptError, their time in RFC 3339 with fractional seconds,
// UTC, so that they read back equal to what weir would have written.
//
// # Deadlines and late results
//
// ExpireDeadlines takes the jobs not final whose deadline has passed,
// earliest first, from the partial index weir_jobs_deadline with FOR UPDATE
// SKIP LOCKED, so that sweeps that run at once never abandon one job twice;
// one statement makes them dead and writes their dead letters. A running
// job keeps its lease owner and attempt, and loses its lease's expiry, so
// that its worker's heartbeat finds the lease lost and its success is
// recognised as late: CompleteLate locks the job, abandons it first if the
// lease is still held, and stores a row in weir_late_results, one per job
// and attempt, in one transaction. AcceptLateResult completes the job and
// deletes its dead letters only if the job is still dead past its deadline
// at the result's attempt and owner (store.ErrConflict otherwise, after a
// requeue or a purge). A purge keeps late results, as a record. ListStuck
// reads the partial index of running jobs (weir_jobs_lease).
//
// # Outbox and inbox
//
// [Store.Tx]'s AddOutbox writes messages into weir_outbox in the caller's
// transaction, one INSERT … SELECT FROM unnest(…) for the lot, so that they
// commit or roll back with the caller's data; a message's id, drawn from
// the table's identity, is its stable id at the broker. Relays claim them
// with a lease, as workers claim jobs, in a pipelined batch of two
// statements, one round trip, the second a call of weir_claim_outbox
// (which reads weir_outbox_pending in id order whatever the table's
// statistics say):
//
//	SELECT pg_advisory_xact_lock(<the schema's outbox key>);
//	-- weir_claim_outbox(now, limit, owner, expires, now rounded up):
//	WITH candidate AS (SELECT id, key FROM weir_outbox
//	                   WHERE <unpublished, due, no live lease, its key's first unpublished message not blocked>
//	                   ORDER BY id LIMIT <limit> FOR UPDATE SKIP LOCKED),
//	     taken AS (SELECT id FROM candidate
//	               WHERE <every earlier unpublished message of its key is a candidate>)
//	UPDATE weir_outbox SET lease_owner = …, lease_expires_at = … FROM taken … RETURNING …
//
// The advisory lock serialises claims, and the UPDATE, at READ COMMITTED,
// sees every earlier claim committed: concurrent relays neither take one
// message twice nor skip each other's rows. Messages of one key are taken
// in id order, none while an earlier one is held by a live lease or waits
// out a backoff: the taken check, against the rows the claim has locked,
// keeps the rule even against a relay's late retry or publish racing the
// claim, whose row the claim skips. The candidates are read from the
// partial index weir_outbox_pending in id order; a key's first unpublished
// message is one probe of weir_outbox_key, read in order and stopped at
// the first row. A key blocked behind its first message still costs a
// claim one such probe for each of its messages that lie before the claim's
// last candidate. MarkPublished and RetryOutbox write only the messages the
// relay still holds (lease_owner, not yet published); PurgeOutbox deletes
// the oldest published messages, read from weir_outbox_published.
//
// RecordInbox is INSERT … ON CONFLICT (topic, message_id) DO NOTHING into
// weir_inbox: in the consumer's transaction, a redelivered message finds
// the record and is a duplicate, a record another transaction has not yet
// committed makes it wait for that one, and a rolled-back handler leaves
// none. PurgeInbox deletes the oldest records, read from
// weir_inbox_received_at.
//
// # LISTEN/NOTIFY
//
// Every write that makes a job available announces its queue with
// pg_notify on the schema's channel, "weir_" and 16 hex digits of a hash
// of the schema's name ([Store.NotifyChannel]): a short identifier of its
// own per schema, so that deployments (and test cases) that share a
// database never wake each other. [Store.Listen] takes a connection of its
// own, LISTENs there and calls wake with each queue. An insert announces
// each distinct queue once, from one more statement in its pipelined batch
// (no extra round trip); an immediate retry, a rescue, a release and a
// requeue announce from their own statement (a CTE the statement reads).
// PostgreSQL delivers the notifications of a transaction when it commits,
// and none of one that rolls back, so an insert in a caller's transaction
// wakes workers once its job is visible to them.
//
// # Transactions
//
// [Store.Executor] runs each call in a transaction of its own; [Store.Tx]
// binds an Executor to the caller's pgx transaction, so that a program's
// own writes and the jobs that process them commit together:
//
//	tx, err := s.Pool().Begin(ctx)
//	…
//	_, err = tx.Exec(ctx, "INSERT INTO documents …")
//	_, err = s.Tx(tx).Insert(ctx, now, []store.InsertParams{{Kind: "index", IdempotencyKey: docID}})
//	err = tx.Commit(ctx)
//
// Times are stored as timestamptz, to the microsecond, and returned in UTC;
// NULL stands for a zero time.
package postgres
