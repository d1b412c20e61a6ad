package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// maxTxAttempts bounds how often an Executor from Store.Executor runs a
// transaction that PostgreSQL aborted for a deadlock or a serialization
// failure. In READ COMMITTED neither happens to a single insert; a deadlock
// needs two batches that share keys in opposite orders.
const maxTxAttempts = 3

// jobColumns are the columns scanJob reads, in its order.
const jobColumns = `id, kind, queue, payload, state, attempt, max_attempts, idempotency_key, source, priority,
	scheduled_at, created_at, updated_at, attempted_at, finalized_at, lease_owner, lease_expires_at, deadline_at, errors,
	progress, output`

// queries are the executor's SQL statements, with the schema's name in
// them: every statement names its schema, so it reads weir's tables however
// the connection's search_path is set (a caller's transaction may come from
// a pool of the caller's own).
type queries struct {
	schema                                                         string // quoted, for the statements built per call
	insert, insertMany, byKey, getJob, wake, wakeQueues, jobsPages string
	lifecycleQueries
	deadlineQueries
	messagingQueries
	workflowQueries
}

// newQueries returns the statements on the tables of schema, a quoted
// identifier, that announce available jobs on channel, an identifier that
// needs no quoting.
func newQueries(schema, channel string) queries {
	return queries{
		schema:           schema,
		lifecycleQueries: newLifecycleQueries(schema, channel),
		deadlineQueries:  newDeadlineQueries(schema),
		messagingQueries: newMessagingQueries(schema),
		workflowQueries:  newWorkflowQueries(schema),
		// Inserts a job, or, on a conflict with a job of the same key,
		// locks that job and reclaims it if it is stuck: running, with its
		// attempt started before the cutoff ($12), and no worker holding it
		// (its lease ended before $14, or it has none: a lease that
		// heartbeats keep alive is never reclaimed, however long the
		// attempt runs; RescueExpired reads expiry the same way). It returns the row only
		// when it inserted (xmax = 0) or reclaimed it; byKey then reads the
		// job it conflicted with.
		insert: `INSERT INTO ` + schema + `.weir_jobs AS j
	(kind, queue, payload, state, max_attempts, idempotency_key, source, priority,
	 scheduled_at, created_at, updated_at, deadline_at)
VALUES ($1, $2, $3::jsonb, $4, $5::integer, $6, $7, $8::integer,
	$9::timestamptz, $10::timestamptz, $10::timestamptz, $11::timestamptz)
ON CONFLICT (idempotency_key) WHERE idempotency_key <> '' DO UPDATE SET
	state = 'available',
	scheduled_at = $10::timestamptz,
	updated_at = $10::timestamptz,
	lease_owner = '',
	lease_expires_at = NULL,
	errors = j.errors || jsonb_build_array(jsonb_build_object(
		'attempt', j.attempt,
		'at', $13::text,
		'message', 'reclaimed after running '
			|| ` + schema + `.weir_duration_text((extract(epoch FROM $10::timestamptz - j.attempted_at) * 1000000)::bigint)
			|| ' without finishing',
		'type', '` + weirtype.ErrorTypeStuck + `'))
WHERE j.state = 'running' AND j.attempted_at < $12::timestamptz
	AND (j.lease_expires_at IS NULL OR j.lease_expires_at < $14::timestamptz)
RETURNING ` + jobColumns + `, (j.xmax = 0) AS inserted`,
		insertMany: insertManySQL(schema),
		// Reads the job a keyed insert found. The insert's ON CONFLICT DO
		// UPDATE has already locked it (PostgreSQL locks the conflicting
		// row even when the DO UPDATE's WHERE is false), and, as a new
		// statement in READ COMMITTED, this sees it as committed by
		// whichever transaction made it. FOR SHARE states the lock this
		// read relies on; it changes nothing while the stronger one is
		// held.
		byKey:  `SELECT ` + jobColumns + ` FROM ` + schema + `.weir_jobs WHERE idempotency_key = $1 AND idempotency_key <> '' FOR SHARE`,
		getJob: `SELECT ` + jobColumns + ` FROM ` + schema + `.weir_jobs WHERE id = $1`,
		// Announces, once each, the queues of the jobs an insert made
		// available: $1 the distinct queues of the jobs without a key that
		// it inserted available; $2 the keys of the others, each of whose
		// jobs it may have inserted, reclaimed (in the queue of the job it
		// found) or found waiting already (a wake that was not needed, and
		// costs one claim). Each key's job is read by a subquery of its
		// own, one probe of the key's index: a join, or a condition on
		// the jobs' state, would let the planner, misled by statistics
		// older than a fast-growing backlog, scan the table or every
		// waiting job instead. A job not available gives a NULL queue,
		// which the outer WHERE drops.
		wake: `SELECT pg_notify('` + channel + `', queue) FROM (
	SELECT unnest($1::text[]) AS queue
	UNION
	SELECT (SELECT CASE WHEN state = 'available' THEN queue END FROM ` + schema + `.weir_jobs
		WHERE idempotency_key = k.key AND idempotency_key <> '')
	FROM unnest($2::text[]) AS k(key)
) AS woken
WHERE octet_length(queue) <= ` + fmt.Sprint(maxPayloadLen),
		// The jobs table's size in pages, for sized; $1 its name.
		jobsPages: `SELECT pg_relation_size($1::regclass) / current_setting('block_size')::bigint`,
		// wake for an insert without keys, the producer's usual one: it
		// reads no table, so its plan does not depend on the arrays'
		// lengths, and a prepared statement's plan serves every call,
		// where wake's is made again at each (about 0.17 ms of the
		// server's CPU an insert at a steady producer's rate).
		wakeQueues: `SELECT pg_notify('` + channel + `', queue) FROM unnest($1::text[]) AS queue
WHERE octet_length(queue) <= ` + fmt.Sprint(maxPayloadLen),
	}
}

// Executor returns an Executor that runs each call in a transaction of its
// own, at READ COMMITTED. Every call but Insert, CompleteLate and
// AcceptLateResult is one statement, its own transaction without a BEGIN;
// when a guarded write finds the lease lost, or Cancel finds nothing to
// cancel, a second statement reads the job to say why.
func (s *Store) Executor() store.Executor { return executor{s: s} }

// Tx returns an Executor bound to the caller's transaction, so that the
// caller's own writes and the jobs that process them commit together. The
// transaction may come from any pool on the store's database. When a call
// fails, PostgreSQL has aborted the transaction: roll it back. At
// REPEATABLE READ or SERIALIZABLE, a call that races another on the same
// job (an insert of the same key; a claim, rescue or guarded write of a job
// changed since the transaction's snapshot) can fail with a serialization
// error (SQLSTATE 40001), which the caller retries with its transaction.
// The lock a claim, a rescue, an expiry or a late completion takes on its
// jobs (and an accept on its late result) is held until the caller's
// transaction ends.
func (s *Store) Tx(tx pgx.Tx) store.Executor { return executor{s: s, tx: tx} }

// RunTx runs fn in a transaction of its own, with an Executor bound to it,
// and commits if fn returned nil (rolling back otherwise): the caller's
// writes and weir's (an inbox record, an outbox message, a job) commit as
// one.
func (s *Store) RunTx(ctx context.Context, fn func(tx pgx.Tx, ex store.Executor) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return fn(tx, s.Tx(tx)) })
}

type executor struct {
	s  *Store
	tx pgx.Tx // nil: a transaction per call
}

var _ store.Executor = executor{}

// Insert inserts jobs at now, all or none; see store.Executor. Times are
// kept to the microsecond, as PostgreSQL keeps them.
func (e executor) Insert(ctx context.Context, now time.Time, jobs []store.InsertParams) ([]store.InsertResult, error) {
	ps := make([]store.InsertParams, len(jobs))
	for i, p := range jobs {
		p, err := p.Normalize()
		if err != nil {
			return nil, fmt.Errorf("postgres: insert jobs[%d]: %w", i, err)
		}
		switch {
		case p.MaxAttempts > math.MaxInt32:
			return nil, fmt.Errorf("postgres: insert jobs[%d]: %w: max attempts %d is too large", i, store.ErrInvalid, p.MaxAttempts)
		case p.Priority > math.MaxInt32 || p.Priority < math.MinInt32:
			return nil, fmt.Errorf("postgres: insert jobs[%d]: %w: priority %d is out of range", i, store.ErrInvalid, p.Priority)
		}
		ps[i] = p
	}
	if len(ps) == 0 {
		return []store.InsertResult{}, nil
	}
	// A lease that ends before expiredBefore has expired (see RescueExpired).
	expiredBefore := microCeil(now)
	now = now.UTC().Truncate(time.Microsecond)
	if e.tx != nil {
		return e.s.insert(ctx, e.tx, false, now, expiredBefore, ps)
	}
	// Outside a transaction of the caller's, the batch begins its own
	// (READ COMMITTED), without a round trip for the BEGIN, and commits
	// once every result has been read and checked.
	for attempt := 1; ; attempt++ {
		res, err := e.s.insert(ctx, e.s.pool, true, now, expiredBefore, ps)
		if err == nil {
			return res, nil
		}
		if attempt >= maxTxAttempts || !retryable(err) || ctx.Err() != nil {
			return nil, err
		}
	}
}

// batchSender sends a batch of statements: a transaction, or the pool.
type batchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// insert runs the jobs' statements in tx as one pipelined batch: one round
// trip however many jobs. Each run of consecutive jobs without a key is
// one INSERT over arrays (see insertManySQL); each job with a key is one
// INSERT … ON CONFLICT, followed by the read of the job it may have
// conflicted with. The jobs get their ids in the order given.
// The batch ends with one statement that announces the queues of the jobs
// made available, each once (see Store.Listen). With begin, the batch
// begins a transaction of its own, committed once every result has been
// read and checked, and rolled back otherwise.
func (s *Store) insert(ctx context.Context, tx batchSender, begin bool, now, expiredBefore time.Time, ps []store.InsertParams) (_ []store.InsertResult, err error) {
	at := now.Format(time.RFC3339Nano) // as encoding/json writes a time
	b := &pgx.Batch{}
	if begin {
		b.BeginTx(pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	}
	var (
		queues []string // of the jobs without a key made available, each once
		keys   []string
		seen   map[string]bool
	)
	for i, p := range ps {
		if run := unkeyedRun(ps, i); run > 0 {
			s.queueUnkeyed(b, now, ps[i:i+run])
		}
		switch {
		case p.IdempotencyKey != "":
			keys = append(keys, p.IdempotencyKey)
		case p.InitialState(now) == weirtype.StateAvailable && !seen[p.Queue]:
			if seen == nil {
				seen = make(map[string]bool)
			}
			seen[p.Queue] = true
			queues = append(queues, p.Queue)
		}
		if p.IdempotencyKey == "" {
			continue
		}
		scheduledAt := p.ScheduledFor(now)
		// Running for exactly StuckAfter is not stuck: stuck is
		// now - attempted_at > StuckAfter, that is attempted_at < now -
		// StuckAfter, which at microsecond precision holds exactly when it
		// holds for StuckAfter truncated to the microsecond.
		cutoff := now.Add(-p.StuckAfter.Truncate(time.Microsecond))
		b.Queue(s.sql.insert,
			p.Kind, p.Queue, string(p.Payload), string(p.InitialState(now)), p.MaxAttempts,
			p.IdempotencyKey, p.Source, p.Priority, scheduledAt, now, nullTime(p.DeadlineAt),
			cutoff, at, expiredBefore)
		b.Queue(s.sql.byKey, p.IdempotencyKey)
	}
	wake := len(queues) > 0 || len(keys) > 0
	switch {
	case len(keys) > 0:
		b.Queue(s.sql.wake, queues, keys)
	case wake:
		b.Queue(s.sql.wakeQueues, queues)
	}
	br := tx.SendBatch(ctx, b)
	if begin {
		own := br.Tx()
		// Deferred before br.Close, so run after it: a transaction is
		// used only once the batch is closed.
		defer func() {
			if err != nil {
				_ = own.Rollback(context.WithoutCancel(ctx))
			}
		}()
	}
	defer br.Close()
	if begin {
		if _, err := br.Exec(); err != nil {
			return nil, fmt.Errorf("postgres: insert: begin: %w", err)
		}
	}

	res := make([]store.InsertResult, len(ps))
	for i, p := range ps {
		if run := unkeyedRun(ps, i); run > 0 {
			if err := readUnkeyed(br, i, now, ps[i:i+run], res[i:i+run]); err != nil {
				return nil, err
			}
		}
		if p.IdempotencyKey == "" {
			continue
		}
		var inserted bool
		job, err := scanJob(br.QueryRow(), &inserted)
		switch {
		case err == nil && inserted:
			res[i] = store.InsertResult{Job: job, Outcome: weirtype.Inserted}
		case err == nil:
			res[i] = store.InsertResult{Job: job, Outcome: weirtype.Reclaimed}
		case errors.Is(err, pgx.ErrNoRows):
			// A conflict whose DO UPDATE did not fire: byKey says why.
		default:
			return nil, insertError(i, err)
		}
		found, err := scanJob(br.QueryRow())
		if err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				err = fmt.Errorf("the job with idempotency key %q that the insert conflicted with is gone", p.IdempotencyKey)
			}
			return nil, insertError(i, err)
		}
		if res[i].Job != nil {
			continue
		}
		outcome, err := duplicateOutcome(found.State)
		if err != nil {
			return nil, insertError(i, err)
		}
		res[i] = store.InsertResult{Job: found, Outcome: outcome}
	}
	if wake {
		if _, err := br.Exec(); err != nil {
			return nil, fmt.Errorf("postgres: insert: notify: %w", err)
		}
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("postgres: insert: %w", err)
	}
	if begin {
		if err := br.Tx().Commit(ctx); err != nil {
			return nil, fmt.Errorf("postgres: insert: commit: %w", err)
		}
	}
	return res, nil
}

// duplicateOutcome is the outcome of an insert that found a job with its
// key in state, and left it as it is.
func duplicateOutcome(state weirtype.State) (weirtype.InsertOutcome, error) {
	switch state {
	case weirtype.StateAvailable, weirtype.StateScheduled:
		return weirtype.DuplicatePending, nil
	case weirtype.StateRunning:
		return weirtype.DuplicateRunning, nil
	case weirtype.StateCompleted:
		return weirtype.DuplicateCompleted, nil
	case weirtype.StateCancelled, weirtype.StateDead:
		return weirtype.DuplicateFinal, nil
	}
	return "", fmt.Errorf("existing job is in unknown state %q", state)
}

// insertError wraps the error of jobs[i]. PostgreSQL's data exceptions
// (class 22: a NUL byte in a text, a \u0000 in a JSON payload, a time out
// of range) are the caller's bad parameter, so they also wrap
// store.ErrInvalid.
func insertError(i int, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && len(pgErr.Code) == 5 && pgErr.Code[:2] == "22" {
		return fmt.Errorf("postgres: insert jobs[%d]: %w: %w", i, store.ErrInvalid, err)
	}
	return fmt.Errorf("postgres: insert jobs[%d]: %w", i, err)
}

// retryable reports whether err is PostgreSQL aborting a transaction that
// may succeed if run again: a serialization failure or a deadlock.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

// GetJob returns the job with the id, or an error wrapping
// store.ErrNotFound.
func (e executor) GetJob(ctx context.Context, id int64) (*weirtype.Job, error) {
	var row pgx.Row
	if e.tx != nil {
		row = e.tx.QueryRow(ctx, e.s.sql.getJob, id)
	} else {
		row = e.s.pool.QueryRow(ctx, e.s.sql.getJob, id)
	}
	job, err := scanJob(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: job %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: get job %d: %w", id, err)
	}
	return job, nil
}

// jobTargets are the columns of a job row that scanJob reads into
// something other than the job itself. They are allocated together, once
// a row: each of them given to Scan on its own escaped to the heap, ten
// allocations a row.
type jobTargets struct {
	state                                                string
	payload, errs, progress, output                      []byte
	attemptedAt, finalizedAt, leaseExpiresAt, deadlineAt pgtype.Timestamptz
	dest                                                 [21]any
}

// scanJob reads a row of jobColumns, then extra.
func scanJob(row pgx.Row, extra ...any) (*weirtype.Job, error) {
	j, t := new(weirtype.Job), new(jobTargets)
	t.dest = [...]any{
		&j.ID, &j.Kind, &j.Queue, &t.payload, &t.state, &j.Attempt, &j.MaxAttempts, &j.IdempotencyKey, &j.Source, &j.Priority,
		&j.ScheduledAt, &j.CreatedAt, &j.UpdatedAt, &t.attemptedAt, &t.finalizedAt, &j.LeaseOwner, &t.leaseExpiresAt, &t.deadlineAt, &t.errs,
		&t.progress, &t.output,
	}
	dest := t.dest[:]
	if len(extra) > 0 {
		dest = append(dest[:len(dest):len(dest)], extra...)
	}
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	j.Payload = json.RawMessage(t.payload)
	j.State = weirtype.State(t.state)
	j.ScheduledAt = j.ScheduledAt.UTC()
	j.CreatedAt = j.CreatedAt.UTC()
	j.UpdatedAt = j.UpdatedAt.UTC()
	j.AttemptedAt = fromNull(t.attemptedAt)
	j.FinalizedAt = fromNull(t.finalizedAt)
	j.LeaseExpiresAt = fromNull(t.leaseExpiresAt)
	j.DeadlineAt = fromNull(t.deadlineAt)
	// Most jobs have no errors: '[]', which needs no decoder.
	if string(t.errs) != "[]" {
		if err := json.Unmarshal(t.errs, &j.Errors); err != nil {
			return nil, fmt.Errorf("job %d: errors column: %w", j.ID, err)
		}
		if len(j.Errors) == 0 {
			j.Errors = nil
		}
	}
	for i := range j.Errors {
		j.Errors[i].At = j.Errors[i].At.UTC()
	}
	if t.progress != nil {
		j.Progress = new(weirtype.Progress)
		if err := json.Unmarshal(t.progress, j.Progress); err != nil {
			return nil, fmt.Errorf("job %d: progress column: %w", j.ID, err)
		}
		j.Progress.At = j.Progress.At.UTC()
	}
	if t.output != nil {
		j.Output = json.RawMessage(t.output)
	}
	return j, nil
}

// nullTime is NULL for the zero time.
func nullTime(t time.Time) pgtype.Timestamptz {
	return pgtype.Timestamptz{Time: t, Valid: !t.IsZero()}
}

// fromNull is the zero time for NULL, and UTC otherwise.
func fromNull(t pgtype.Timestamptz) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}
