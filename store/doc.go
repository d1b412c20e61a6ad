// Package store is the seam between weir's engine and the database that
// keeps its jobs.
//
// A driver implements [Store]: store/sqlite, the embedded default, on a
// SQLite file in WAL mode; store/postgres, for many worker processes on many
// machines. Every driver passes the same conformance suite, store/storetest,
// against a real database. Differences between drivers are declared in
// [Features], never found by a failing test.
//
// The engine reads time from its own clock and passes it in (the now
// arguments), so that leases, backoff and deadlines behave the same on both
// drivers and can be tested on a fake clock.
//
// Queries go through an [Executor]: Store.Executor runs each call in a
// transaction of its own, and each driver can also bind an Executor to the
// caller's open transaction (sqlite.Store.Tx, postgres.Store.Tx), so that a
// program saves its data and enqueues the job that processes it in one
// commit.
//
// Every driver keeps its jobs in a table named weir_jobs, with the job's
// idempotency key in a column idempotency_key that is unique where it is not
// empty; the conformance suite and operators' queries rely on those names.
package store
