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
