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
//	DO UPDATE SET <reclaim> WHERE <the job is running and stuck>
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
// A claim is one statement,
//
//	UPDATE weir_jobs SET state = 'running', attempt = attempt + 1, lease_owner = …, lease_expires_at = …
//	WHERE id IN (SELECT id FROM weir_jobs
//	             WHERE queue = $2 AND (state = 'available' OR (state = 'scheduled' AND scheduled_at <= $1))
//	             ORDER BY priority DESC, scheduled_at, id LIMIT $3
//	             FOR UPDATE SKIP LOCKED)
//	RETURNING …
//
// whose subquery reads the partial index weir_jobs_claim in its order and
// skips the jobs other claims hold locked: concurrent claims, in any number
// of processes, never take one job. The claimed jobs are sorted back into
// claim order, which RETURNING does not keep.
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
// The errors the database records itself (a stuck, expired or released
// attempt) are written as encoding/json writes a weirtype.AttemptError,
// their time in RFC 3339 with fractional seconds, UTC, so that they read
// back equal to what weir would have written.
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
