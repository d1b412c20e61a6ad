// Package sqlite is weir's embedded default store: its jobs in one SQLite
// file, through the pure-Go driver modernc.org/sqlite (no cgo).
//
// [Open] opens the file in WAL mode with synchronous=NORMAL, foreign keys
// on and a busy timeout (Config.BusyTimeout, 5 s by default), and
// [Store.Migrate] brings its schema up to date from the migrations embedded
// in the binary, recorded in the table weir_migrations. The jobs are in
// weir_jobs. Times are stored as INTEGER microseconds since the Unix epoch,
// UTC, with NULL for the zero time, and read back as UTC time.Time values.
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
//     never upgraded later). Weir's writes (Insert, Migrate) and the
//     callers' transactions on [Store.DB] queue for that connection inside
//     the process, in database/sql, honouring their contexts, instead of
//     contending for SQLite's lock; the busy timeout only has to cover
//     other processes on the same file and WAL checkpoints;
//   - a read pool of several query_only connections for GetJob and
//     SchemaVersion. In WAL mode readers see the last commit and neither
//     block the writer nor are blocked by it.
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
// past InsertParams.StuckAfter. Of any number of concurrent inserts of one
// key, exactly one makes the job.
package sqlite
