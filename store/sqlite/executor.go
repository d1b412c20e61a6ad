package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
	scheduled_at, created_at, updated_at, attempted_at, finalized_at, lease_owner, lease_expires_at, deadline_at, errors,
	progress, output`

// insertJob inserts one job, or nothing when a job with its (non-empty)
// idempotency key exists: then it returns no row and the caller reads the
// existing job. The ON CONFLICT target names the partial unique index.
const insertJob = `INSERT INTO weir_jobs
	(kind, queue, payload, state, max_attempts, idempotency_key, source, priority, scheduled_at, created_at, updated_at, deadline_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (idempotency_key) WHERE idempotency_key <> '' DO NOTHING
	RETURNING ` + jobColumns

// jobByKey reads the job with the idempotency key ?1, which is not empty.
// The condition on the empty key repeats the unique index's own: SQLite
// uses a partial index only for a query that implies its WHERE clause, and
// without it would read every job.
const jobByKey = `SELECT ` + jobColumns + ` FROM weir_jobs WHERE idempotency_key = ?1 AND idempotency_key <> ''`

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
	var res []store.InsertResult
	err := e.write(ctx, func(tx *sql.Tx) (err error) {
		res, err = e.insertAll(ctx, tx, now, ps)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	return res, nil
}

// write runs fn in a write transaction, so that a call is all or nothing.
//
// Bound to a caller's transaction, fn runs in it inside a savepoint: a call
// that fails undoes its own writes and leaves the caller's, so a caller
// that goes on and commits never commits half a call (a dead job without
// its dead letter). Otherwise fn runs in a transaction of its own on the
// write connection, begun with BEGIN IMMEDIATE (the write pool's _txlock):
// it holds SQLite's write lock from its first statement, so no other
// writer, in this process or another, runs between its reads and its
// writes.
func (e executor) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if e.tx != nil {
		if _, err := e.tx.ExecContext(ctx, "SAVEPOINT weir_call"); err != nil {
			return err
		}
		// The savepoint is closed even when ctx has ended: an open one
		// would swallow the caller's later statements.
		bg := context.WithoutCancel(ctx)
		if err := fn(e.tx); err != nil {
			_, rerr := e.tx.ExecContext(bg, "ROLLBACK TO weir_call")
			if rerr == nil {
				_, rerr = e.tx.ExecContext(bg, "RELEASE weir_call")
			}
			if rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
				return errors.Join(err, fmt.Errorf("roll back to the savepoint: %w", rerr))
			}
			return err
		}
		if _, err := e.tx.ExecContext(bg, "RELEASE weir_call"); err != nil {
			return fmt.Errorf("release the savepoint: %w", err)
		}
		return nil
	}
	// Prepare the hot statements first, if they are not yet: it needs
	// the connection that the transaction is about to hold.
	e.s.stmts.prepare(ctx, e.s.write)
	tx, err := e.s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// reader is where reads go: the caller's transaction, which sees its own
// writes, or the read pool.
func (e executor) reader() querier {
	if e.tx != nil {
		return e.tx
	}
	return e.s.read
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
func (e executor) insertAll(ctx context.Context, tx *sql.Tx, now time.Time, ps []store.InsertParams) ([]store.InsertResult, error) {
	res := make([]store.InsertResult, len(ps))
	for i, p := range ps {
		r, err := e.insertOne(ctx, tx, now, p)
		if err != nil {
			return nil, fmt.Errorf("job %d (kind %q): %w", i, p.Kind, err)
		}
		res[i] = r
	}
	return res, nil
}

func (e executor) insertOne(ctx context.Context, tx *sql.Tx, now time.Time, p store.InsertParams) (store.InsertResult, error) {
	scheduledAt := p.ScheduledFor(now)
	job, err := scanJob(e.s.stmts.queryRow(ctx, tx, insertJob,
		p.Kind, p.Queue, string(p.Payload), string(p.InitialState(now)), p.MaxAttempts, p.IdempotencyKey,
		p.Source, p.Priority, encodeTime(scheduledAt), encodeTime(now), encodeTime(now), encodeTime(p.DeadlineAt)))
	if err == nil {
		return store.InsertResult{Job: job, Outcome: weirtype.Inserted}, nil
	}
	if !errors.Is(err, sql.ErrNoRows) || p.IdempotencyKey == "" {
		return store.InsertResult{}, err
	}

	// A job with the key exists.
	job, err = scanJob(tx.QueryRowContext(ctx, jobByKey, p.IdempotencyKey))
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
// A running job is reclaimed only when it is stuck and no worker holds it:
// it has been running for strictly longer than stuckAfter, and its lease
// has expired (ended before now, as RescueExpired reads it) or it has
// none. A job whose lease is alive is a duplicate however long it has
// run: its worker heartbeats, and its kind may allow it longer than the
// inserting process knows (the stuck sweep of a process that registers
// the kind takes back one that hangs).
func duplicateOutcome(job *weirtype.Job, now time.Time, stuckAfter time.Duration) (weirtype.InsertOutcome, error) {
	switch job.State {
	case weirtype.StateAvailable, weirtype.StateScheduled:
		return weirtype.DuplicatePending, nil
	case weirtype.StateRunning:
		leaseAlive := !job.LeaseExpiresAt.IsZero() && !job.LeaseExpiresAt.Before(storedTime(now))
		if now.Sub(job.AttemptedAt) > stuckAfter && !leaseAlive {
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

// reclaim makes the stuck running job, whose lease has expired, available
// again at now, drops its lease and records the attempt that never
// finished.
func reclaim(ctx context.Context, tx *sql.Tx, now time.Time, job *weirtype.Job) (*weirtype.Job, error) {
	running := now.Sub(job.AttemptedAt)
	errs := append(job.Errors, weirtype.AttemptError{
		Attempt: job.Attempt,
		At:      storedTime(now),
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
	job, err := scanJob(e.reader().QueryRowContext(ctx, "SELECT "+jobColumns+" FROM weir_jobs WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get job %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, err)
	}
	return job, nil
}

// queryAll runs the query q on db and scans every row it returns with
// scan.
func queryAll[T any](ctx context.Context, db interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, q string, args []any, scan func(scanner) (T, error)) ([]T, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return scanRows(rows, nil, scan)
}

// scanRows reads and closes rows, appending each row to out as scan reads
// it.
func scanRows[T any](rows *sql.Rows, out []T, scan func(scanner) (T, error)) ([]T, error) {
	defer rows.Close()
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// queryPage runs queryAll with q, which ends with its ORDER BY, limited to
// limit rows when limit is positive.
func queryPage[T any](ctx context.Context, db querier, q string, args []any, limit int, scan func(scanner) (T, error)) ([]T, error) {
	if limit > 0 {
		q += " LIMIT ?"
		args = append(args, limit)
	}
	return queryAll(ctx, db, q, args, scan)
}

// conds gathers the conditions of a WHERE clause, joined by AND, and
// their arguments in order.
type conds struct {
	list []string
	args []any
}

// add appends the condition cond, whose placeholders take args.
func (c *conds) add(cond string, args ...any) {
	c.list = append(c.list, cond)
	c.args = append(c.args, args...)
}

// where is the clause, with a space before it, or "" when there is no
// condition.
func (c *conds) where() string {
	if len(c.list) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(c.list, " AND ")
}

// scanner is what *sql.Row and *sql.Rows share.
type scanner interface {
	Scan(dest ...any) error
}

// scanJob reads one row of jobColumns. It returns sql.ErrNoRows, unwrapped,
// when a *sql.Row has none.
func scanJob(row scanner) (*weirtype.Job, error) {
	var (
		j                                            weirtype.Job
		payload, state, errs                         string
		scheduled, created, updated                  sql.NullInt64
		attempted, finalized, leaseExpires, deadline sql.NullInt64
		progress, output                             sql.NullString
	)
	err := row.Scan(&j.ID, &j.Kind, &j.Queue, &payload, &state, &j.Attempt, &j.MaxAttempts, &j.IdempotencyKey,
		&j.Source, &j.Priority, &scheduled, &created, &updated, &attempted, &finalized, &j.LeaseOwner,
		&leaseExpires, &deadline, &errs, &progress, &output)
	if err != nil {
		return nil, err
	}
	if j.Progress, err = decodeProgress(progress); err != nil {
		return nil, fmt.Errorf("job %d: progress column: %w", j.ID, err)
	}
	if output.Valid {
		j.Output = json.RawMessage(output.String)
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
	if j.Errors, err = decodeErrors(errs); err != nil {
		return nil, fmt.Errorf("job %d: errors column: %w", j.ID, err)
	}
	return &j, nil
}

// decodeErrors reads an errors column: nil for an empty array.
func decodeErrors(s string) ([]weirtype.AttemptError, error) {
	if s == "[]" {
		return nil, nil // most jobs: skip the decoder
	}
	var errs []weirtype.AttemptError
	if err := json.Unmarshal([]byte(s), &errs); err != nil {
		return nil, err
	}
	if len(errs) == 0 {
		return nil, nil
	}
	return errs, nil
}
