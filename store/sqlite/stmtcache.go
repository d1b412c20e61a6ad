package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
)

// hotQueries are the statements a busy store runs all the time. They are
// prepared once on the write connection: modernc.org/sqlite parses a query
// on every call otherwise, which is a third of the time of a claim or a
// completion.
var hotQueries = []string{
	insertJob, claimJobs, claimUnlimited, claimLimited, loadLimits, countRunning, heartbeatJobs, completeJob, completeJobs, retryJob, abandonJob,
	insertDeadLetter, snoozeJob, cancelJob, rescueExpired, releaseOwned, expireDeadlines,
	insertOutbox, markScan, markRows, markEach, park, insertMark, retryOutbox,
}

// readQueries are the hot statements of the read pool: the relay's claim.
var readQueries = []string{relayLease, watermarkNow, claimAbove, claimBelow}

// stmtCache holds queries prepared on a pool (hotQueries on the write
// pool, readQueries on the read pool), once the schema they need exists.
type stmtCache struct {
	queries []string
	mu      sync.Mutex // held while preparing
	stmts   atomic.Pointer[map[string]*sql.Stmt]
}

// prepare prepares c's queries on db, unless they are already, or another
// goroutine is preparing them. It must not run while the caller holds db's
// connection (in a transaction): it needs the connection itself. Before
// Migrate has made the tables, preparing fails; then nothing is cached and
// the next call tries again.
func (c *stmtCache) prepare(ctx context.Context, db *sql.DB) {
	if c.stmts.Load() != nil || !c.mu.TryLock() {
		return
	}
	defer c.mu.Unlock()
	if c.stmts.Load() != nil {
		return
	}
	m := make(map[string]*sql.Stmt, len(c.queries))
	for _, q := range c.queries {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			closeAll(m)
			return
		}
		m[q] = st
	}
	if !c.stmts.CompareAndSwap(nil, &m) {
		closeAll(m) // the store was closed meanwhile
	}
}

func closeAll(m map[string]*sql.Stmt) {
	for _, st := range m {
		st.Close()
	}
}

// stmt returns query prepared for tx, or nil when it is not cached.
func (c *stmtCache) stmt(ctx context.Context, tx *sql.Tx, query string) *sql.Stmt {
	m := c.stmts.Load()
	if m == nil {
		return nil
	}
	st, ok := (*m)[query]
	if !ok {
		return nil
	}
	// The statement was prepared on the write pool's one connection,
	// which tx holds: database/sql reuses it rather than preparing again.
	return tx.StmtContext(ctx, st)
}

// close closes the cached statements; the cache stays empty after. It
// does not wait for a prepare under way (which may be waiting for the
// connection): that one finds the cache closed and closes what it made.
func (c *stmtCache) close() {
	if m := c.stmts.Swap(&map[string]*sql.Stmt{}); m != nil {
		closeAll(*m)
	}
}

// query runs query in tx, prepared when the cache has it.
func (c *stmtCache) query(ctx context.Context, tx *sql.Tx, query string, args ...any) (*sql.Rows, error) {
	if st := c.stmt(ctx, tx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return tx.QueryContext(ctx, query, args...)
}

// queryRow runs query in tx, prepared when the cache has it.
func (c *stmtCache) queryRow(ctx context.Context, tx *sql.Tx, query string, args ...any) *sql.Row {
	if st := c.stmt(ctx, tx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return tx.QueryRowContext(ctx, query, args...)
}

// exec runs query in tx, prepared when the cache has it.
func (c *stmtCache) exec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	if st := c.stmt(ctx, tx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, query, args...)
}
