package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// lifecycleQueries are the statements of a job's life after its insert.
// Each is one statement, so that on the pool it is a transaction of its
// own without a BEGIN and a COMMIT: a write that spans two tables (a job
// abandoned with its dead letter) is one statement with data-modifying
// CTEs.
type lifecycleQueries struct {
	claim, claimFrom, heartbeat, complete, completeMany, failRetry, failAbandon, snooze, cancel, jobLease string
	rescue, release, releaseExcept, getDeadLetter                                                         string
}

// deadLetterColumns are the columns scanDeadLetter reads, in its order.
const deadLetterColumns = `id, job_id, kind, queue, source, idempotency_key, payload, attempts,
	last_error, error_type, reason, errors, job_created_at, failed_at`

// dropLease is the SET list that drops a job's lease.
const dropLease = `lease_owner = '', lease_expires_at = NULL`

// insertLetterSQL is the head of an INSERT of dead letters into schema's
// weir_dead_letters, to be followed by a SELECT of deadLetterColumns but
// the id.
func insertLetterSQL(schema string) string {
	return `INSERT INTO ` + schema + `.weir_dead_letters (job_id, kind, queue, source, idempotency_key, payload,
		attempts, last_error, error_type, reason, errors, job_created_at, failed_at)`
}

// held is the guard of a write by the worker that holds the job's lease:
// $1 is the job's id, $2 the worker, $3 the attempt. A lease of an earlier
// attempt, even the same worker's, does not match.
const held = `id = $1 AND state = 'running' AND lease_owner = $2 AND attempt = $3::bigint`

// heldLeases is the FROM and WHERE of a statement on the jobs (as j) held
// by leases that come as three arrays of one length: $1 ids, $2 owners, $3
// attempts. Each job is found by one probe of its id. The state the job
// must be in is a column of the subquery, whose OFFSET 0 hides that it is
// a constant, so that the planner sees a join condition and not a
// condition on the jobs alone: a condition state = 'running' on the jobs
// matches the partial index of running jobs (weir_jobs_lease), and from
// the statistics a queue table usually has the planner would read that
// whole index and hash-join, visiting every job claimed since the table's
// last VACUUM (an index entry stays until then): 300 heap pages per
// completion after 20 s of a steady producer, and more every second.
// The leases are taken in the order of their ids, so that two statements
// on the same jobs (a heartbeat and a batch of completions of one client)
// lock them in one order: in the order of their arrays they deadlocked,
// and each deadlock held both for the server's deadlock_timeout (1 s)
// before one failed.
const heldLeases = `FROM (SELECT id, owner, attempt, 'running'::text AS state
	FROM unnest($1::bigint[], $2::text[], $3::bigint[]) AS l(id, owner, attempt) ORDER BY id OFFSET 0) AS l
WHERE j.id = l.id AND j.state = l.state AND j.lease_owner = l.owner AND j.attempt = l.attempt`

// planEachCall, as a statement's first argument, has it planned at each
// call for the table as it is then (an unnamed statement), where the
// pool otherwise prepares a statement once per connection. PostgreSQL
// adopts a prepared statement's generic plan after five calls and keeps
// it until the table's statistics change: a plan made while the jobs
// table had a few pages, kept while it grew without an ANALYZE
// (autovacuum off, or not yet come), read the whole table with a
// sequential scan and a hash join for each batch of completions, 1,000
// pages and 3.5 ms for 8 jobs after 30 s of a steady producer, where
// probing each job's id reads 3 pages a job. Used by the statements that
// join the leases' arrays to the jobs (heldLeases), whose plan depends
// on the table's size, and that run seldom (heartbeats, completions
// with outputs); CompleteMany, run for every batch of successes, is
// prepared instead, with the table's size class in its text (sized).
const planEachCall = pgx.QueryExecModeExec

// sizeEvery is how often a Store reads the size of its jobs table for
// sized, at most: one small query a second. Read every 10 s, the class of
// a table that a producer was filling from empty lagged by up to ten
// doublings, and for the first 10 s of a steady producer at 760 jobs/s
// each batch of completions kept a plan made for a one-page table, a
// sequential scan and a hash join: 2.4 ms a call against 0.5 to 0.6 ms
// once the class was read again.
const sizeEvery = time.Second

// sizeClass is the size of a Store's jobs table, as the bit length of
// its number of pages, read at most every sizeEvery.
type sizeClass struct {
	checkedAt atomic.Int64 // monotonic nanoseconds since sinceStart's epoch; 0 for never
	class     atomic.Int64
}

// epoch is sinceStart's origin.
var epoch = time.Now()

// sinceStart is the time since epoch on the monotonic clock, in
// nanoseconds, never 0.
func sinceStart() int64 { return int64(time.Since(epoch)) + 1 }

// sized returns sql with a comment that names the jobs table's size
// class, for a statement whose best plan depends on the table's size.
// The pool prepares a statement once per connection and text, and
// PostgreSQL keeps a prepared statement's plan (the generic plan it
// adopts after five calls) until the table's statistics change, which
// without an ANALYZE they do not: planned while the table had a few
// pages and kept while it grew, a batch of completions read the whole
// table, with a sequential scan and a hash join, 1,000 pages and 3.5 ms
// for 8 jobs after 30 s of a steady producer. With its size class in
// its text, the statement is prepared again, and planned for the table
// as it is, each time the table has doubled (or halved); planning it at
// every call instead cost as much of the server's CPU as running it.
// Inside a caller's transaction the class is the one last read, and no
// read is added to the transaction.
//
// One call at a time reads the size, at most once every sizeEvery, a
// failed read included (the store down): the others, and the calls
// until then, use the class last read.
func (e executor) sized(ctx context.Context, sql string) string {
	z := &e.s.jobsSize
	at, last := sinceStart(), z.checkedAt.Load()
	if e.tx == nil && (last == 0 || at-last >= int64(sizeEvery)) && z.checkedAt.CompareAndSwap(last, at) {
		var pages int64
		if err := e.s.pool.QueryRow(ctx, e.s.sql.jobsPages, e.s.sql.schema+".weir_jobs").Scan(&pages); err == nil {
			z.class.Store(int64(bits.Len64(uint64(pages))))
		}
	}
	return sql + "\n-- weir_jobs size class " + strconv.FormatInt(z.class.Load(), 10)
}

// newLifecycleQueries returns the statements on the tables of schema; those
// that make jobs available announce their queues on channel (see
// Store.Listen).
func newLifecycleQueries(schema, channel string) lifecycleQueries {
	jobs := schema + `.weir_jobs`
	letters := schema + `.weir_dead_letters`
	insertLetter := insertLetterSQL(schema)
	return lifecycleQueries{
		// weir_claim (migration 0004) is an UPDATE whose subquery reads
		// weir_jobs_claim in the claim's order (queue is fixed, then
		// priority DESC, scheduled_at, id), stops at the limit, and skips
		// the rows another claim has locked; a row another claim took and
		// committed since this statement's snapshot is re-checked when it
		// is locked, and dropped. The function turns sorts off, so the
		// ordered scan is chosen whatever the table's statistics say.
		claim:     `SELECT ` + jobColumns + ` FROM ` + schema + `.weir_claim($1::timestamptz, $2, $3, $4, $5::timestamptz)`,
		claimFrom: `SELECT ` + jobColumns + ` FROM ` + schema + `.weir_claim_from($1::timestamptz, $2, $3, $4, $5::timestamptz, $6::integer, $7::timestamptz, $8::bigint)`,
		// The leases come as three arrays of one length: job ids, owners
		// and attempts. A job named twice is updated once.
		heartbeat: `UPDATE ` + jobs + ` AS j SET lease_expires_at = $5::timestamptz, updated_at = $4::timestamptz
` + heldLeases + `
RETURNING j.id, j.lease_owner, j.attempt`,
		// Completing a breaker's probe ends its pause (see endProbes).
		complete: `WITH job AS (
	UPDATE ` + jobs + ` SET state = 'completed', finalized_at = $4::timestamptz, updated_at = $4::timestamptz, ` + dropLease + `
	WHERE ` + held + `
	RETURNING ` + jobColumns + `
), ` + endProbes(schema, "job") + `
SELECT ` + jobColumns + ` FROM job`,
		// The leases come as Heartbeat's do.
		completeMany: `WITH job AS (
	UPDATE ` + jobs + ` AS j SET state = 'completed', finalized_at = $4::timestamptz, updated_at = $4::timestamptz, ` + dropLease + `
	` + heldLeases + `
	RETURNING j.id
), ` + endProbes(schema, "job") + `
SELECT id FROM job`,
		// A retry at once ($7 available) announces the job's queue.
		failRetry: `WITH job AS (
	UPDATE ` + jobs + ` SET
		state = $7,
		scheduled_at = $6::timestamptz,
		updated_at = $4::timestamptz,
		` + dropLease + `,
		errors = errors || jsonb_build_array($5::jsonb)
	WHERE ` + held + `
	RETURNING ` + jobColumns + `
), ` + wokenCTE(channel, "job") + `
SELECT ` + jobColumns + ` FROM job WHERE ` + readWoken,
		// The job and its dead letter, in one statement: the INSERT reads
		// the row the UPDATE returns, errors with the new one appended.
		failAbandon: `WITH job AS (
	UPDATE ` + jobs + ` SET
		state = 'dead',
		finalized_at = $4::timestamptz,
		updated_at = $4::timestamptz,
		` + dropLease + `,
		errors = errors || jsonb_build_array($5::jsonb)
	WHERE ` + held + `
	RETURNING ` + jobColumns + `
), letter AS (
	` + insertLetter + `
	SELECT id, kind, queue, source, idempotency_key, payload,
		attempt, $6::text, $7::text, $8::text, errors, created_at, $4::timestamptz
	FROM job
)
SELECT ` + jobColumns + ` FROM job`,
		snooze: `UPDATE ` + jobs + ` SET
	state = 'scheduled',
	scheduled_at = $5::timestamptz,
	attempt = greatest(attempt - 1, 0),
	updated_at = $4::timestamptz,
	` + dropLease + `
WHERE ` + held + `
RETURNING ` + jobColumns,
		cancel: `UPDATE ` + jobs + ` SET state = 'cancelled', finalized_at = $2::timestamptz, updated_at = $2::timestamptz, ` + dropLease + `
WHERE id = $1 AND state IN ('available', 'scheduled', 'running')
RETURNING ` + jobColumns,
		jobLease: `SELECT state, lease_owner, attempt FROM ` + jobs + ` WHERE id = $1`,
		// Oldest lease first, read from weir_jobs_lease in its order
		// (no tie-break by id, which would sort), skipping the jobs
		// another rescuer (or any writer) has locked: two rescuers never
		// handle one job. A lease that ends at $1 has not expired. The SET expressions read the
		// row as it was, so the error names the lease's owner and end
		// and the attempt that did not finish; the dead letters read the
		// rows as they became, their last error that one.
		rescue: `WITH expired AS MATERIALIZED (
	SELECT id FROM ` + jobs + `
	WHERE state = 'running' AND lease_expires_at < $1::timestamptz
	ORDER BY lease_expires_at
	LIMIT $2
	FOR UPDATE SKIP LOCKED
), rescued AS (
	UPDATE ` + jobs + ` AS j SET
		state = CASE WHEN j.attempt < j.max_attempts THEN 'available' ELSE 'dead' END,
		scheduled_at = CASE WHEN j.attempt < j.max_attempts THEN $3::timestamptz ELSE j.scheduled_at END,
		finalized_at = CASE WHEN j.attempt < j.max_attempts THEN NULL ELSE $3::timestamptz END,
		updated_at = $3::timestamptz,
		` + dropLease + `,
		errors = j.errors || jsonb_build_array(jsonb_build_object(
			'attempt', j.attempt,
			'at', $4::text,
			'message', 'lease held by ' || j.lease_owner || ' expired at ' || ` + schema + `.weir_time_text(j.lease_expires_at),
			'type', '` + weirtype.ErrorTypeLeaseExpired + `'))
	FROM expired
	WHERE j.id = expired.id AND j.state = 'running'
	RETURNING j.id, j.state, j.kind, j.queue, j.source, j.idempotency_key, j.payload, j.attempt, j.errors, j.created_at
), letters AS (
	` + spentLetters(insertLetter, "rescued", "$3") + `
), ` + wokenCTE(channel, "rescued") + `
SELECT id, kind, queue, state = 'dead' FROM rescued WHERE ` + readWoken + ` ORDER BY id`,
		// A counted attempt that was the job's last ends it, as a rescue
		// does.
		release: releaseSQL(jobs, insertLetter, channel, ""),
		// The leases to keep come as three arrays of one length, as
		// Heartbeat's do: ids $6, owners $7, attempts $8.
		releaseExcept: releaseSQL(jobs, insertLetter, channel, `
		AND NOT EXISTS (SELECT 1 FROM unnest($6::bigint[], $7::text[], $8::bigint[]) AS k(kid, kowner, kattempt)
			WHERE k.kid = id AND k.kowner = lease_owner AND k.kattempt = attempt)`),
		getDeadLetter: `SELECT ` + deadLetterColumns + ` FROM ` + letters + ` WHERE id = $1`,
	}
}

// releaseSQL is the statement that makes the running jobs of owner $2,
// those that also match the condition more, available at $1, the attempt
// given back when $3 is true and counted otherwise, with an error at $4
// (text) of message $5; a counted attempt that was the job's last ends
// it, with its dead letter, as a rescue does. It returns the ids.
func releaseSQL(jobs, insertLetter, channel, more string) string {
	return `WITH released AS (
	UPDATE ` + jobs + ` SET
		state = CASE WHEN $3::boolean OR attempt < max_attempts THEN 'available' ELSE 'dead' END,
		scheduled_at = CASE WHEN $3::boolean OR attempt < max_attempts THEN $1::timestamptz ELSE scheduled_at END,
		finalized_at = CASE WHEN $3::boolean OR attempt < max_attempts THEN NULL ELSE $1::timestamptz END,
		attempt = CASE WHEN $3::boolean THEN greatest(attempt - 1, 0) ELSE attempt END,
		updated_at = $1::timestamptz,
		` + dropLease + `,
		errors = errors || jsonb_build_array(jsonb_build_object(
			'attempt', attempt,
			'at', $4::text,
			'message', $5::text,
			'type', '` + weirtype.ErrorTypeReleased + `'))
	WHERE state = 'running' AND lease_owner = $2` + more + `
	RETURNING id, queue, state, kind, source, idempotency_key, payload, attempt, errors, created_at
), letters AS (
	` + spentLetters(insertLetter, "released", "$1") + `
), ` + wokenCTE(channel, "released") + `
SELECT id FROM released WHERE ` + readWoken
}

// spentLetters writes, with insertLetter, the dead letters, reason
// max_attempts_exceeded, of the rows of the CTE from (a job's columns and
// its new state) that ended dead, failed at the parameter at.
func spentLetters(insertLetter, from, at string) string {
	return insertLetter + `
	SELECT id, kind, queue, source, idempotency_key, payload,
		attempt, errors -> -1 ->> 'message', errors -> -1 ->> 'type', '` + string(weirtype.AbandonMaxAttempts) + `',
		errors, created_at, ` + at + `::timestamptz
	FROM ` + from + `
	WHERE state = 'dead'`
}

// querier is what a pool and a transaction both offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// run calls fn with the caller's transaction, or with the pool, on which
// each statement is a transaction of its own. On the pool, a statement that
// PostgreSQL aborted for a deadlock or a serialization failure changed
// nothing, and fn runs again, up to maxTxAttempts times.
func (e executor) run(ctx context.Context, fn func(q querier) error) error {
	if e.tx != nil {
		return fn(e.tx)
	}
	for attempt := 1; ; attempt++ {
		err := fn(e.s.pool)
		if err == nil || attempt >= maxTxAttempts || !retryable(err) || ctx.Err() != nil {
			return err
		}
	}
}

// queryIDs runs sql with args as run does and returns the ids of its
// rows, the error wrapped as op's.
func (e executor) queryIDs(ctx context.Context, op, sql string, args ...any) ([]int64, error) {
	var ids []int64
	err := e.run(ctx, func(q querier) error {
		rows, err := q.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	})
	if err != nil {
		return nil, dbError(op, err)
	}
	return ids, nil
}

// dbError wraps the error of op. PostgreSQL's data exceptions (class 22:
// a NUL byte in a text, a time out of range) are the caller's bad
// parameter, so they also wrap store.ErrInvalid.
func dbError(op string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22") {
		return fmt.Errorf("postgres: %s: %w: %w", op, store.ErrInvalid, err)
	}
	return fmt.Errorf("postgres: %s: %w", op, err)
}

// refuse returns the first of errs, the checks of op's parameters (the
// store's, see store.FirstError), as op's error.
func refuse(op string, errs ...error) error {
	if err := store.FirstError(errs...); err != nil {
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	return nil
}

// invalid is op's error for a parameter only PostgreSQL cannot take.
func invalid(op, format string, args ...any) error {
	return refuse(op, weirtype.Invalidf(format, args...))
}

// micro is t in UTC, to the microsecond PostgreSQL keeps (rounded down, as
// pgx sends it).
func micro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// microCeil is t in UTC rounded up to the microsecond. For a column c of
// whole microseconds, c < t exactly when c < microCeil(t), and c >= t
// exactly when c >= microCeil(t).
func microCeil(t time.Time) time.Time {
	m := micro(t)
	if m.Before(t) {
		m = m.Add(time.Microsecond)
	}
	return m
}

// timeText is t as encoding/json writes it, which is how the errors column
// keeps it.
func timeText(t time.Time) string { return t.Format(time.RFC3339Nano) }

// storable returns s as PostgreSQL can store it in a text or a jsonb: valid
// UTF-8 without NUL bytes, each bad byte or NUL replaced by U+FFFD. An
// attempt's error message comes from arbitrary Go errors, and recording a
// failure must not fail because of its text.
func storable(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

// queryJobs runs a statement that returns rows of jobColumns.
func queryJobs(ctx context.Context, q querier, sql string, args ...any) ([]*weirtype.Job, error) {
	return queryAll(ctx, q, sql, args, func(row pgx.Row) (*weirtype.Job, error) { return scanJob(row) })
}

// leaseArrays returns leases as three arrays of one length, their ids,
// owners and attempts: how the statements that take many leases take
// them.
func leaseArrays(leases []store.Lease) (ids []int64, owners []string, attempts []int64) {
	ids = make([]int64, len(leases))
	owners = make([]string, len(leases))
	attempts = make([]int64, len(leases))
	for i, l := range leases {
		ids[i], owners[i], attempts[i] = l.ID, l.Owner, int64(l.Attempt)
	}
	return ids, owners, attempts
}

// claimOrder orders jobs as Claim takes them: higher priority first, then
// earlier scheduled time, then lower id.
func claimOrder(a, b *weirtype.Job) int {
	if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
		return c
	}
	if c := a.ScheduledAt.Compare(b.ScheduledAt); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// Claim takes up to p.Limit jobs of p.Queue that may run at p.Now, in one
// UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED); see
// store.Executor. The jobs are returned in the order they were claimed.
func (e executor) Claim(ctx context.Context, p store.ClaimParams) ([]*weirtype.Job, error) {
	const op = "claim"
	if p.Queue == "" {
		p.Queue = store.DefaultQueue
	}
	if err := refuse(op, p.Validate()); err != nil {
		return nil, err
	}
	sql, args := e.claimStatement(p)
	var jobs []*weirtype.Job
	err := e.run(ctx, func(q querier) error {
		var err error
		jobs, err = queryJobs(ctx, q, sql, args...)
		return err
	})
	if err != nil {
		return nil, dbError(op, err)
	}
	// RETURNING comes in no promised order.
	slices.SortFunc(jobs, claimOrder)
	return jobs, nil
}

// claimStatement is the claim of p, a valid ClaimParams with its queue
// set, and its arguments.
func (e executor) claimStatement(p store.ClaimParams) (string, []any) {
	now := micro(p.Now)
	expires := micro(now.Add(p.LeaseFor))
	sql, args := e.s.sql.claim, []any{now, p.Queue, p.Limit, p.Owner, expires}
	if !p.From.IsZero() {
		sql, args = e.s.sql.claimFrom, append(args, p.From.Priority, micro(p.From.ScheduledAt), p.From.ID)
	}
	return sql, args
}

// CompleteAndClaim completes the jobs of the leases done still held and
// claims, as CompleteMany then Claim, in one pipelined batch: one round
// trip, and one implicit transaction (one commit) for both statements;
// see store.CompletingClaimer.
func (e executor) CompleteAndClaim(ctx context.Context, done []store.Lease, p store.ClaimParams) ([]int64, []*weirtype.Job, error) {
	const op = "complete and claim"
	if p.Queue == "" {
		p.Queue = store.DefaultQueue
	}
	if err := refuse(op, store.CheckLeases(done), p.Validate()); err != nil {
		return nil, nil, err
	}
	if len(done) == 0 {
		jobs, err := e.Claim(ctx, p)
		return nil, jobs, err
	}
	ids, owners, attempts := leaseArrays(done)
	complete := e.sized(ctx, e.s.sql.completeMany)
	claim, claimArgs := e.claimStatement(p)
	var (
		completed []int64
		jobs      []*weirtype.Job
	)
	err := e.run(ctx, func(q querier) error {
		b := &pgx.Batch{}
		b.Queue(complete, ids, owners, attempts, micro(p.Now))
		b.Queue(claim, claimArgs...)
		br := q.SendBatch(ctx, b)
		rows, err := br.Query()
		if err == nil {
			completed, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		}
		if err == nil {
			rows, err = br.Query()
		}
		if err == nil {
			jobs, err = collect(rows, func(row pgx.Row) (*weirtype.Job, error) { return scanJob(row) })
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return nil, nil, dbError(op, err)
	}
	slices.SortFunc(jobs, claimOrder)
	return notDone(done, completed), jobs, nil
}

// Heartbeat extends the leases still held, in one statement, and returns
// the ids of the jobs of the others, in the order of leases, each once; see
// store.Executor. A lease that has ended but whose job has not been rescued
// yet is still held, and is extended.
func (e executor) Heartbeat(ctx context.Context, now time.Time, leases []store.Lease, leaseFor time.Duration) ([]int64, error) {
	const op = "heartbeat"
	if err := refuse(op, store.CheckLeases(leases), store.CheckLeaseFor(leaseFor), store.CheckNow(now)); err != nil {
		return nil, err
	}
	ids, owners, attempts := leaseArrays(leases)
	if len(leases) == 0 {
		return nil, nil
	}
	now = micro(now)
	var kept []store.Lease
	err := e.run(ctx, func(q querier) error {
		rows, err := q.Query(ctx, e.s.sql.heartbeat, planEachCall, ids, owners, attempts, now, micro(now.Add(leaseFor)))
		if err != nil {
			return err
		}
		kept, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Lease, error) {
			var l store.Lease
			err := row.Scan(&l.ID, &l.Owner, &l.Attempt)
			return l, err
		})
		return err
	})
	if err != nil {
		return nil, dbError(op, err)
	}
	extended := make(map[store.Lease]bool, len(kept))
	for _, l := range kept {
		extended[l] = true
	}
	reported := make(map[int64]bool)
	var lost []int64
	for _, l := range leases {
		if !extended[l] && !reported[l.ID] {
			reported[l.ID] = true
			lost = append(lost, l.ID)
		}
	}
	return lost, nil
}

// Complete makes the job of a lease still held completed; see
// store.Executor.
func (e executor) Complete(ctx context.Context, now time.Time, l store.Lease) (*weirtype.Job, error) {
	const op = "complete"
	if err := refuse(op, l.Validate(), store.CheckNow(now)); err != nil {
		return nil, err
	}
	return e.held(ctx, op, l, e.s.sql.complete, micro(now))
}

// CompleteMany completes the jobs of the leases still held, in one
// statement, and returns the ids of the jobs of the others, in the order
// of leases, each once; see store.Executor.
func (e executor) CompleteMany(ctx context.Context, now time.Time, leases []store.Lease) ([]int64, error) {
	const op = "complete many"
	if err := refuse(op, store.CheckLeases(leases), store.CheckNow(now)); err != nil {
		return nil, err
	}
	ids, owners, attempts := leaseArrays(leases)
	if len(leases) == 0 {
		return nil, nil
	}
	done, err := e.queryIDs(ctx, op, e.sized(ctx, e.s.sql.completeMany), ids, owners, attempts, micro(now))
	if err != nil {
		return nil, err
	}
	return notDone(leases, done), nil
}

// notDone returns the ids of the jobs of leases that are not among done,
// the jobs a statement completed, in the order of leases, each once: a
// job named under several leases, one of them held, is done.
func notDone(leases []store.Lease, done []int64) []int64 {
	completed := make(map[int64]bool, len(done))
	for _, id := range done {
		completed[id] = true
	}
	return store.LostIDs(leases, func(l store.Lease) bool { return completed[l.ID] })
}

// Fail records a failed attempt of the job of a lease still held; see
// store.Executor. The error's At is kept to the microsecond, in UTC, and
// its Message and Type with any NUL byte or invalid UTF-8 replaced by
// U+FFFD, which PostgreSQL cannot store. A zero RetryAt retries at Now.
func (e executor) Fail(ctx context.Context, p store.FailParams) (*weirtype.Job, error) {
	const op = "fail"
	if err := refuse(op, p.Validate()); err != nil {
		return nil, err
	}
	now := micro(p.Now)
	ae := p.Error
	ae.At = micro(ae.At)
	ae.Message = storable(ae.Message)
	ae.Type = storable(ae.Type)
	errJSON, err := json.Marshal(ae)
	if err != nil {
		// Only a time past year 9999 fails to marshal.
		return nil, invalid(op, "error: %v", err)
	}
	if p.Abandon != "" {
		return e.held(ctx, op, p.Lease, e.s.sql.failAbandon, now, string(errJSON), ae.Message, ae.Type, string(p.Abandon))
	}
	retryAt := now
	if !p.RetryAt.IsZero() {
		retryAt = micro(p.RetryAt)
	}
	state := weirtype.StateAvailable
	if retryAt.After(now) {
		state = weirtype.StateScheduled
	}
	return e.held(ctx, op, p.Lease, e.s.sql.failRetry, now, string(errJSON), retryAt, string(state))
}

// Snooze puts the job of a lease still held back to scheduled at until,
// giving back its attempt; see store.Executor.
func (e executor) Snooze(ctx context.Context, now time.Time, l store.Lease, until time.Time) (*weirtype.Job, error) {
	const op = "snooze"
	if err := refuse(op, l.Validate(), store.CheckNow(now), store.CheckSet("until", until)); err != nil {
		return nil, err
	}
	return e.held(ctx, op, l, e.s.sql.snooze, micro(now), micro(until))
}

// held runs sql, a write guarded by the lease, with $1 the job's id, $2
// the owner, $3 the attempt and args after them, and returns the job it
// wrote. When it writes nothing, the lease is not held: the error wraps
// store.ErrLeaseLost, and store.ErrNotFound too when there is no such job.
func (e executor) held(ctx context.Context, op string, l store.Lease, sql string, args ...any) (*weirtype.Job, error) {
	var job *weirtype.Job
	err := e.run(ctx, func(q querier) error {
		var err error
		job, err = scanJob(q.QueryRow(ctx, sql, append([]any{l.ID, l.Owner, int64(l.Attempt)}, args...)...))
		if errors.Is(err, pgx.ErrNoRows) {
			return e.leaseLost(ctx, q, op, l)
		}
		if err != nil {
			return dbError(fmt.Sprintf("%s job %d", op, l.ID), err)
		}
		return nil
	})
	return job, err
}

// leaseLost says why a write guarded by lease l wrote nothing. It reads the
// job after the fact, for the message: it only explains.
func (e executor) leaseLost(ctx context.Context, q querier, op string, l store.Lease) error {
	var state weirtype.State
	var holder string
	var attempt int
	err := q.QueryRow(ctx, e.s.sql.jobLease, l.ID).Scan(&state, &holder, &attempt)
	who := fmt.Sprintf("postgres: %s job %d by %s at attempt %d", op, l.ID, l.Owner, l.Attempt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%s: %w: %w", who, store.ErrNotFound, store.ErrLeaseLost)
	case err != nil:
		return dbError(fmt.Sprintf("%s job %d", op, l.ID), err)
	case state == weirtype.StateRunning:
		return fmt.Errorf("%s: held by %s at attempt %d: %w", who, holder, attempt, store.ErrLeaseLost)
	default:
		return fmt.Errorf("%s: job is %s: %w", who, state, store.ErrLeaseLost)
	}
}

// Cancel makes a job that is not final cancelled; see store.Executor.
func (e executor) Cancel(ctx context.Context, now time.Time, id int64) (*weirtype.Job, error) {
	const op = "cancel"
	if err := refuse(op, store.CheckNow(now)); err != nil {
		return nil, err
	}
	now = micro(now)
	var job *weirtype.Job
	err := e.run(ctx, func(q querier) error {
		// The UPDATE writes nothing for a final job or a missing one; the
		// read after it tells which. A job the read finds not final was
		// made so in between (a dead letter requeued): try again.
		for range maxTxAttempts {
			var err error
			job, err = scanJob(q.QueryRow(ctx, e.s.sql.cancel, id, now))
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			var state weirtype.State
			err = q.QueryRow(ctx, e.s.sql.jobLease, id).Scan(&state, nil, nil)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				return fmt.Errorf("job %d: %w", id, store.ErrNotFound)
			case err != nil:
				return err
			case state.Final():
				return fmt.Errorf("job %d is %s: %w", id, state, store.ErrFinal)
			}
		}
		return fmt.Errorf("job %d kept changing state", id)
	})
	if err != nil {
		return nil, dbError(op, err)
	}
	return job, nil
}

// RescueExpired takes up to limit running jobs whose lease ended before
// now, in one statement; see store.Executor. The error recorded for each
// is of type lease_expired, with the message "lease held by <owner>
// expired at <RFC 3339 time>". Both lists are in id order.
func (e executor) RescueExpired(ctx context.Context, now time.Time, limit int) (rescued, dead []store.JobRef, err error) {
	const op = "rescue expired leases"
	if err := refuse(op, store.CheckNow(now), store.CheckLimit(limit)); err != nil {
		return nil, nil, err
	}
	at := micro(now)
	err = e.run(ctx, func(q querier) error {
		rescued, dead = nil, nil
		rows, err := q.Query(ctx, e.s.sql.rescue, microCeil(now), limit, at, timeText(at))
		if err != nil {
			return err
		}
		var j store.JobRef
		var isDead bool
		_, err = pgx.ForEachRow(rows, []any{&j.ID, &j.Kind, &j.Queue, &isDead}, func() error {
			if isDead {
				dead = append(dead, j)
			} else {
				rescued = append(rescued, j)
			}
			return nil
		})
		return err
	})
	if err != nil {
		return nil, nil, dbError(op, err)
	}
	return rescued, dead, nil
}

// ReleaseOwnedExcept gives back every running job owner holds at a lease
// not among keep, in one statement; see store.Executor. The ids are in
// ascending order.
func (e executor) ReleaseOwnedExcept(ctx context.Context, now time.Time, owner string, keep []store.Lease) ([]int64, error) {
	const op = "release owned jobs not running"
	if err := refuse(op, store.CheckOwner(owner), store.CheckNow(now), store.CheckLeases(keep)); err != nil {
		return nil, err
	}
	ids, owners, attempts := leaseArrays(keep)
	now = micro(now)
	msg := "released by " + owner + ", which claimed it but does not run it (the claim's reply was lost); the attempt is given back"
	released, err := e.queryIDs(ctx, op, e.s.sql.releaseExcept, now, owner, true, timeText(now), storable(msg), ids, owners, attempts)
	if err != nil {
		return nil, err
	}
	slices.Sort(released)
	return released, nil
}

// ReleaseOwned makes every running job owner holds available at now; see
// store.Executor. The ids are in ascending order.
func (e executor) ReleaseOwned(ctx context.Context, now time.Time, owner string, giveBack bool) ([]int64, error) {
	const op = "release owned jobs"
	if err := refuse(op, store.CheckOwner(owner), store.CheckNow(now)); err != nil {
		return nil, err
	}
	now = micro(now)
	msg := "released by " + owner + "; the attempt counts"
	if giveBack {
		msg = "released by " + owner + "; the attempt is given back"
	}
	ids, err := e.queryIDs(ctx, op, e.s.sql.release, now, owner, giveBack, timeText(now), storable(msg))
	if err != nil {
		return nil, err
	}
	slices.Sort(ids)
	return ids, nil
}
