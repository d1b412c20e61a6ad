// Package sqlite is weir's embedded default store: its jobs in one SQLite
// file, through the pure-Go driver modernc.org/sqlite (no cgo).
//
// [Open] opens the file in WAL mode with synchronous=NORMAL, foreign keys
// on and a busy timeout (Config.BusyTimeout, 5 s by default), and
// [Store.Migrate] brings its schema up to date from the migrations embedded
// in the binary, recorded in the table weir_migrations. The jobs are in
// weir_jobs, the dead letters in weir_dead_letters, the late results in
// weir_late_results. Times are stored as INTEGER microseconds since the
// Unix epoch, UTC, with NULL for the zero time, and read back as UTC
// time.Time values.
//
// # Connections and locking
//
// SQLite runs one write transaction at a time per database file. A
// connection that wants to write while another holds the write lock waits
// up to busy_timeout, but not always: a transaction that began as a reader
// (plain BEGIN) and then tries to write fails at once with SQLITE_BUSY
// ("database is locked") when another connection committed in between,
// because its snapshot is stale. With a pool of connections that all write,
// every read-then-write transaction (a claim, a caller's check-then-save)
// can fail that way under load; and even where the busy handler does wait,
// it waits by sleeping and polling, which is slower than a queue.
//
// A Store therefore keeps two pools on the file:
//
//   - a write pool of exactly one connection, which begins every
//     transaction with BEGIN IMMEDIATE (the write lock is taken at BEGIN,
//     never upgraded later). Weir's writes (Migrate and every write of
//     the Executor: Insert, Claim, Complete, Fail...) and the
//     callers' transactions on [Store.DB] queue for that connection inside
//     the process, in database/sql, honouring their contexts, instead of
//     contending for SQLite's lock; the busy timeout only has to cover
//     other processes on the same file and WAL checkpoints;
//   - a read pool of several query_only connections for GetJob, the
//     listings (dead letters, late results, stuck jobs, the job counts)
//     and SchemaVersion. In WAL mode readers see the last commit and
//     neither block the writer nor are blocked by it.
//
// One writer connection costs little: SQLite would serialise the writes
// anyway, and a queue in the process is fairer and cheaper than retries
// on SQLITE_BUSY. Features().ConcurrentWriters is false accordingly.
//
// # Transactional enqueue
//
// [Store.DB] is the handle for the caller's own tables and transactions. A
// program begins its transaction on it, saves its data, and enqueues the
// job that processes the data through [Store.Tx]; both commit or roll back
// together. Because the handle is the store's single write connection,
// such a transaction serialises with weir's own writes; but while it is
// open, nothing else can use the handle or [Store.Executor]'s writes, so
// inside it use only the transaction and the Executor bound to it.
//
// # Idempotent inserts
//
// A job with an idempotency key is inserted with INSERT ... ON CONFLICT DO
// NOTHING against a partial unique index (keys that are not empty); when a
// job with the key exists, the same write transaction reads it and decides
// the outcome (see weirtype.InsertOutcome), reclaiming a running job stuck
// past InsertParams.StuckAfter whose lease has expired (a live lease is
// never taken). Of any number of concurrent inserts of one
// key, exactly one makes the job.
//
// # The job lifecycle
//
// Because the store's writes are serialised on one connection, a claim is
// one UPDATE ... WHERE id IN (SELECT ... ORDER BY priority DESC,
// scheduled_at, id LIMIT n) RETURNING ...: no row locks are needed for
// two claims never to take the same job. A worker's writes to a job it
// holds (Heartbeat, Complete, Fail, Snooze) are single UPDATEs guarded by
// its store.Lease: state = 'running' AND lease_owner = the lease's owner
// AND attempt = the lease's attempt. When the guard fails, because the
// lease expired and the job was rescued, released or cancelled (and
// perhaps claimed again, even by the same owner, for a later attempt), the
// call returns store.ErrLeaseLost and changes nothing. An attempt's error
// is appended to the job's JSON array of errors by SQLite's json_insert.
//
// A job abandoned (Fail with a reason, or a rescue out of attempts) gets a
// dead letter in the same transaction: a row of weir_dead_letters with a
// copy of the job's kind, queue, source, key, payload and errors, the last
// error and the reason. The job's row stays, state dead, so its
// idempotency key still absorbs duplicates; RequeueDeadLetters makes the
// job available again and deletes the dead letter, PurgeDeadLetters
// deletes both.
//
// # Deadlines and late results
//
// ExpireDeadlines is one UPDATE of the jobs not final whose deadline_at
// has passed, earliest first, through a partial index of those jobs: each
// becomes dead with an error of type deadline_exceeded and a dead letter,
// in the same transaction. A running job keeps its lease_owner and
// attempt, only its lease expiry cleared, so its worker's heartbeats and
// Complete find the lease lost, while CompleteLate recognises the success
// of that attempt: it stores a row of weir_late_results, one per job and
// attempt, and leaves the job dead. AcceptLateResult completes the job,
// deletes its dead letters and marks the result accepted, if the job is
// still dead past its deadline at the result's attempt and owner;
// otherwise (requeued, completed, purged) it is a store.ErrConflict. Late
// results are audit records: purging a job keeps them.
//
// ListStuck reads the jobs not final through the partial indexes of their
// states (see Indexes) and sorts them by how long they have waited (a
// running job since its attempt started, a waiting one since it was due),
// so it never reads a final job; CountJobs groups every job by queue, kind
// and state, an operator's query that reads the whole table.
//
// # Indexes
//
// A job's row changes state twice in the common case, available to
// running at its claim and running to completed at its completion, and
// every index whose key or WHERE clause involves the state is written at
// both. So the indexes of weir_jobs are partial and hold only the jobs the
// engine looks for by state, never the final ones (completed, cancelled,
// dead), which are most of the table:
//
//   - weir_jobs_available and weir_jobs_scheduled, (queue, priority DESC,
//     scheduled_at, id) of the jobs in that state: the claim walks them
//     in claim order;
//   - weir_jobs_lease_expiry, the running jobs by lease expiry: the rescue
//     takes the oldest expired leases, ReleaseOwned walks them all;
//   - weir_jobs_deadline, the jobs not final that have a deadline, by
//     deadline: the deadline sweep;
//   - weir_jobs_idempotency_key, unique, every job with a key, final or
//     not: the key absorbs duplicates for as long as the job exists.
//
// A claim thus writes two index entries per job (out of available, into
// running) and a completion one, besides the row. Heartbeats, completions
// and the other writes to a held job look it up by id. SQLite uses a
// partial index only for a query whose WHERE clause implies the index's,
// so each query names the state it reads (state = 'available'), and the
// read of a job by key repeats the index's condition that the key is not
// empty. A query of final jobs by state, such as counting the completed
// ones, reads the table.
//
// A call through [Store.Tx] runs inside a savepoint of the caller's
// transaction: when it fails, its own writes are undone and the caller's
// kept, so a caller that commits anyway never commits half a call. The
// hot statements are prepared once, on the write connection, after the
// schema exists; the driver would parse them on every call otherwise. Their
// limits are cast (LIMIT CAST(?3 AS INTEGER)): SQLite compiles a bare
// parameter in a LIMIT into the statement, and compiles the statement
// again whenever that parameter changes, as a claim's limit does.
package sqlite
