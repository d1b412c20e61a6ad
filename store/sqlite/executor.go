package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// executor runs the engine's queries: in tx when it is bound to a caller's
// transaction, otherwise each call in a transaction of its own on the
// store's pools.
type executor struct {
	s  *Store
	tx *sql.Tx
}

var _ store.Executor = executor{}

// jobColumns are weir_jobs' columns in the order scanJob reads them.
const jobColumns = `id, kind, queue, payload, state, attempt, max_attempts, idempotency_key, source, priority,
	scheduled_at, created_at, updated_at, attempted_at, finalized_at, lease_owner, lease_expires_at, deadline_at, errors`

// insertJob inserts one job, or nothing when a job with its (non-empty)
// idempotency key exists: then it returns no row and the caller reads the
// existing job. The ON CONFLICT target names the partial unique index.
const insertJob = `INSERT INTO weir_jobs
	(kind, queue, payload, state, max_attempts, idempotency_key, source, priority, scheduled_at, created_at, updated_at, deadline_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (idempotency_key) WHERE idempotency_key <> '' DO NOTHING
	RETURNING ` + jobColumns

// Insert inserts jobs at time now, all or none, in one write transaction
// (the caller's, for an Executor from Tx).
func (e executor) Insert(ctx context.Context, now time.Time, jobs []store.InsertParams) ([]store.InsertResult, error) {
	// Every job is checked before anything is written.
	ps := make([]store.InsertParams, len(jobs))
	for i, p := range jobs {
		np, err := p.Normalize()
		if err != nil {
			return nil, fmt.Errorf("insert jobs: job %d: %w", i, err)
		}
		if err := checkTimes(now, np); err != nil {
			return nil, fmt.Errorf("insert jobs: job %d: %w", i, err)
		}
		ps[i] = np
	}
	if len(ps) == 0 {
		return nil, nil
	}
	if e.tx != nil {
		res, err := insertAll(ctx, e.tx, now, ps)
		if err != nil {
			return nil, fmt.Errorf("insert jobs: %w", err)
		}
		return res, nil
	}
	// BEGIN IMMEDIATE (the write pool's _txlock): the transaction holds
	// SQLite's write lock from its first statement, so no other writer, in
	// this process or another, runs between a key's check and its insert.
	tx, err := e.s.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("insert jobs: begin: %w", err)
	}
	defer tx.Rollback()
	res, err := insertAll(ctx, tx, now, ps)
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("insert jobs: commit: %w", err)
	}
	return res, nil
}

// insertAll inserts the normalised jobs ps inside tx.
//
// The idempotency check and insert are atomic. The INSERT ... ON CONFLICT DO
// NOTHING is one statement against the unique index, so two inserts of one
// key can never both make a job, whatever the isolation; and the read of the
// existing job that follows a conflict happens in the same write
// transaction, which SQLite runs alone (one writer at a time, and a
// transaction that reads an older snapshot than the latest commit cannot
// write: it fails with SQLITE_BUSY_SNAPSHOT rather than act on stale data).
// So the outcome is decided on the job as it is, and nothing can change it
// between the read and a reclaim's update. A key repeated within ps finds
// the job the first occurrence made, earlier in the same transaction.
func insertAll(ctx context.Context, tx *sql.Tx, now time.Time, ps []store.InsertParams) ([]store.InsertResult, error) {
	res := make([]store.InsertResult, len(ps))
	for i, p := range ps {
		r, err := insertOne(ctx, tx, now, p)
		if err != nil {
			return nil, fmt.Errorf("job %d (kind %q): %w", i, p.Kind, err)
		}
		res[i] = r
	}
	return res, nil
}

func insertOne(ctx context.Context, tx *sql.Tx, now time.Time, p store.InsertParams) (store.InsertResult, error) {
	scheduledAt := p.ScheduledAt
	if scheduledAt.IsZero() {
		scheduledAt = now
	}
	job, err := scanJob(tx.QueryRowContext(ctx, insertJob,
		p.Kind, p.Queue, string(p.Payload), string(p.InitialState(now)), p.MaxAttempts, p.IdempotencyKey,
		p.Source, p.Priority, encodeTime(scheduledAt), encodeTime(now), encodeTime(now), encodeTime(p.DeadlineAt)))
	if err == nil {
		return store.InsertResult{Job: job, Outcome: weirtype.Inserted}, nil
	}
	if !errors.Is(err, sql.ErrNoRows) || p.IdempotencyKey == "" {
		return store.InsertResult{}, err
	}

	// A job with the key exists.
	job, err = scanJob(tx.QueryRowContext(ctx,
		"SELECT "+jobColumns+" FROM weir_jobs WHERE idempotency_key = ?", p.IdempotencyKey))
	if err != nil {
		return store.InsertResult{}, fmt.Errorf("read the job with its idempotency key: %w", err)
	}
	outcome, err := duplicateOutcome(job, now, p.StuckAfter)
	if err != nil {
		return store.InsertResult{}, err
	}
	if outcome == weirtype.Reclaimed {
		if job, err = reclaim(ctx, tx, now, job); err != nil {
			return store.InsertResult{}, err
		}
	}
	return store.InsertResult{Job: job, Outcome: outcome}, nil
}

// duplicateOutcome is what an insert of the key of job does at time now.
// A running job is stuck when it has been running for strictly longer
// than stuckAfter.
func duplicateOutcome(job *weirtype.Job, now time.Time, stuckAfter time.Duration) (weirtype.InsertOutcome, error) {
	switch job.State {
	case weirtype.StateAvailable, weirtype.StateScheduled:
		return weirtype.DuplicatePending, nil
	case weirtype.StateRunning:
		if now.Sub(job.AttemptedAt) > stuckAfter {
			return weirtype.Reclaimed, nil
		}
		return weirtype.DuplicateRunning, nil
	case weirtype.StateCompleted:
		return weirtype.DuplicateCompleted, nil
	case weirtype.StateCancelled, weirtype.StateDead:
		return weirtype.DuplicateFinal, nil
	}
	return "", fmt.Errorf("job %d has unknown state %q", job.ID, job.State)
}

// reclaim makes the stuck running job available again at now, drops its
// lease and records the attempt that never finished.
func reclaim(ctx context.Context, tx *sql.Tx, now time.Time, job *weirtype.Job) (*weirtype.Job, error) {
	running := now.Sub(job.AttemptedAt)
	errs := append(job.Errors, weirtype.AttemptError{
		Attempt: job.Attempt,
		At:      now.UTC().Truncate(time.Microsecond),
		Message: fmt.Sprintf("reclaimed after running %v without finishing", running),
		Type:    weirtype.ErrorTypeStuck,
	})
	b, err := json.Marshal(errs)
	if err != nil {
		return nil, fmt.Errorf("reclaim job %d: %w", job.ID, err)
	}
	job, err = scanJob(tx.QueryRowContext(ctx, `UPDATE weir_jobs SET
		state = ?, scheduled_at = ?, updated_at = ?, lease_owner = '', lease_expires_at = NULL, errors = ?
		WHERE id = ? RETURNING `+jobColumns,
		string(weirtype.StateAvailable), encodeTime(now), encodeTime(now), string(b), job.ID))
	if err != nil {
		return nil, fmt.Errorf("reclaim job %d: %w", job.ID, err)
	}
	return job, nil
}

// GetJob returns the job with the id, or an error wrapping
// store.ErrNotFound.
func (e executor) GetJob(ctx context.Context, id int64) (*weirtype.Job, error) {
	var q querier = e.s.read
	if e.tx != nil {
		q = e.tx
	}
	job, err := scanJob(q.QueryRowContext(ctx, "SELECT "+jobColumns+" FROM weir_jobs WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get job %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, err)
	}
	return job, nil
}

// scanJob reads one row of jobColumns. It returns sql.ErrNoRows, unwrapped,
// when there is none.
func scanJob(row *sql.Row) (*weirtype.Job, error) {
	var (
		j                                            weirtype.Job
		payload, state, errs                         string
		scheduled, created, updated                  sql.NullInt64
		attempted, finalized, leaseExpires, deadline sql.NullInt64
	)
	err := row.Scan(&j.ID, &j.Kind, &j.Queue, &payload, &state, &j.Attempt, &j.MaxAttempts, &j.IdempotencyKey,
		&j.Source, &j.Priority, &scheduled, &created, &updated, &attempted, &finalized, &j.LeaseOwner,
		&leaseExpires, &deadline, &errs)
	if err != nil {
		return nil, err
	}
	j.Payload = json.RawMessage(payload)
	j.State = weirtype.State(state)
	j.ScheduledAt = decodeTime(scheduled)
	j.CreatedAt = decodeTime(created)
	j.UpdatedAt = decodeTime(updated)
	j.AttemptedAt = decodeTime(attempted)
	j.FinalizedAt = decodeTime(finalized)
	j.LeaseExpiresAt = decodeTime(leaseExpires)
	j.DeadlineAt = decodeTime(deadline)
	if err := json.Unmarshal([]byte(errs), &j.Errors); err != nil {
		return nil, fmt.Errorf("job %d: errors column: %w", j.ID, err)
	}
	if len(j.Errors) == 0 {
		j.Errors = nil
	}
	return &j, nil
}
