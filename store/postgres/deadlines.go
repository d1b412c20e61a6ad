package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// deadlineQueries are the statements of deadlines, late results and the
// stuck-job report.
type deadlineQueries struct {
	expire, expireOne, lockLate, insertLate, lateByAttempt string
	lockResult, accept, listStuck, countJobs               string
}

// lateResultColumns are the columns scanLateResult reads, in its order.
const lateResultColumns = `id, job_id, kind, queue, attempt, owner, deadline_at, received_at, accepted_at`

// notFinal is the condition on a job that is not final. It implies the
// predicate of the partial index weir_jobs_deadline.
const notFinal = `state IN ('available', 'scheduled', 'running')`

// stuckSince is since when a job not final has waited: a running job since
// its attempt started, a waiting one since it was due.
const stuckSince = `CASE WHEN state = 'running' THEN attempted_at ELSE scheduled_at END`

func newDeadlineQueries(schema string) deadlineQueries {
	jobs := schema + `.weir_jobs`
	late := schema + `.weir_late_results`
	return deadlineQueries{
		// The oldest deadlines first, read from weir_jobs_deadline in its
		// order, skipping the jobs another sweep (or any writer) has
		// locked: two sweeps never abandon one job. A deadline equal to
		// $3 has not passed.
		expire: expireSQL(schema, `SELECT id FROM `+jobs+`
	WHERE `+notFinal+` AND deadline_at < $3::timestamptz
	ORDER BY deadline_at, id
	LIMIT $4
	FOR UPDATE SKIP LOCKED`),
		// The job $3, which the transaction has locked already.
		expireOne: expireSQL(schema, `SELECT $3::bigint AS id`),
		// Locks the job of a late completion, and reads what decides it.
		lockLate: `SELECT state, lease_owner, attempt, deadline_at, kind, queue, coalesce(errors -> -1 ->> 'type', '')
FROM ` + jobs + ` WHERE id = $1 FOR UPDATE`,
		insertLate: `INSERT INTO ` + late + ` (job_id, kind, queue, attempt, owner, deadline_at, received_at)
VALUES ($1, $2, $3, $4::integer, $5, $6::timestamptz, $7::timestamptz)
ON CONFLICT (job_id, attempt) DO NOTHING
RETURNING ` + lateResultColumns,
		lateByAttempt: `SELECT ` + lateResultColumns + ` FROM ` + late + ` WHERE job_id = $1 AND attempt = $2::integer`,
		lockResult:    `SELECT ` + lateResultColumns + ` FROM ` + late + ` WHERE id = $1 FOR UPDATE`,
		// Completes the job of result $1 if it is still dead past its
		// deadline at the result's attempt, under the result's owner,
		// deletes its dead letters and marks the result accepted; it
		// returns no row, having changed nothing, when the job is not.
		accept: `WITH job AS (
	UPDATE ` + jobs + ` AS j SET
		state = 'completed',
		finalized_at = $2::timestamptz,
		updated_at = $2::timestamptz,
		` + dropLease + `
	FROM ` + late + ` AS r
	WHERE r.id = $1 AND j.id = r.job_id AND j.state = 'dead' AND j.attempt = r.attempt AND j.lease_owner = r.owner
		AND j.errors -> -1 ->> 'type' = '` + weirtype.ErrorTypeDeadlineExceeded + `'
	RETURNING j.id
), letters AS (
	DELETE FROM ` + schema + `.weir_dead_letters WHERE job_id IN (SELECT id FROM job)
)
UPDATE ` + late + ` SET accepted_at = $2::timestamptz
WHERE id = $1 AND EXISTS (SELECT 1 FROM job)
RETURNING ` + lateResultColumns,
		// Reads the running jobs, a set as small as the workers, through
		// weir_jobs_lease, and sorts them.
		listStuck: `SELECT ` + jobColumns + ` FROM ` + jobs + `
WHERE state = 'running' AND attempted_at < $1::timestamptz
ORDER BY attempted_at, id
LIMIT $2`,
		countJobs: `SELECT queue, kind, state, count(*),
	count(*) FILTER (WHERE ` + notFinal + ` AND ` + stuckSince + ` < $1::timestamptz)
FROM ` + jobs + `
GROUP BY queue, kind, state
ORDER BY queue, kind, state`,
	}
}

// expireSQL returns the statement that abandons past their deadline the
// jobs that target selects and locks (a query of one column, id), and
// writes their dead letters: $1 is now, $2 now as the errors column keeps
// it, and target's own parameters start at $3. A running job keeps its
// lease owner and attempt, and loses its lease's expiry. The SET
// expressions read the row as it was, so the error names the attempt that
// missed the deadline; the dead letters read the rows as they became,
// their last error that one. It returns the jobs' ids, kinds and queues,
// oldest deadline first.
func expireSQL(schema, target string) string {
	jobs := schema + `.weir_jobs`
	return `WITH target AS MATERIALIZED (
	` + target + `
), expired AS (
	UPDATE ` + jobs + ` AS j SET
		state = 'dead',
		finalized_at = $1::timestamptz,
		updated_at = $1::timestamptz,
		lease_expires_at = NULL,
		errors = j.errors || jsonb_build_array(jsonb_build_object(
			'attempt', j.attempt,
			'at', $2::text,
			'message', 'deadline ' || ` + schema + `.weir_time_text(j.deadline_at) || ' passed before the job completed',
			'type', '` + weirtype.ErrorTypeDeadlineExceeded + `'))
	FROM target
	WHERE j.id = target.id AND j.` + notFinal + `
	RETURNING j.id, j.kind, j.queue, j.source, j.idempotency_key, j.payload, j.attempt, j.errors, j.created_at, j.deadline_at
), letters AS (
	` + insertLetterSQL(schema) + `
	SELECT id, kind, queue, source, idempotency_key, payload,
		attempt, errors -> -1 ->> 'message', errors -> -1 ->> 'type', '` + string(weirtype.AbandonDeadline) + `',
		errors, created_at, $1::timestamptz
	FROM expired
)
SELECT id, kind, queue FROM expired ORDER BY deadline_at, id`
}

// runTx calls fn in the caller's transaction, or in a transaction of its
// own at READ COMMITTED, which it commits when fn returns nil and rolls
// back otherwise. A transaction that PostgreSQL aborted for a deadlock or
// a serialization failure runs again, up to maxTxAttempts times.
func (e executor) runTx(ctx context.Context, fn func(q querier) error) error {
	if e.tx != nil {
		return fn(e.tx)
	}
	for attempt := 1; ; attempt++ {
		err := pgx.BeginTxFunc(ctx, e.s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
			return fn(tx)
		})
		if err == nil || attempt >= maxTxAttempts || !retryable(err) || ctx.Err() != nil {
			return err
		}
	}
}

// ExpireDeadlines abandons up to limit jobs past their deadline, in one
// statement; see store.Executor. The error recorded for each is of type
// deadline_exceeded, with the message "deadline <RFC 3339 time> passed
// before the job completed". The jobs are in the order of the deadlines,
// then of the ids.
func (e executor) ExpireDeadlines(ctx context.Context, now time.Time, limit int) ([]store.JobRef, error) {
	const op = "expire deadlines"
	if err := refuse(op, store.CheckNow(now), store.CheckLimit(limit)); err != nil {
		return nil, err
	}
	at := micro(now)
	var jobs []store.JobRef
	err := e.run(ctx, func(q querier) error {
		rows, err := q.Query(ctx, e.s.sql.expire, at, timeText(at), microCeil(now), limit)
		if err != nil {
			return err
		}
		jobs, err = pgx.CollectRows(rows, pgx.RowToStructByPos[store.JobRef])
		return err
	})
	if err != nil {
		return nil, dbError(op, err)
	}
	return jobs, nil
}

// CompleteLate records the late success of the attempt of lease l, in one
// transaction that locks the job first; see store.Executor. A lease still
// held whose job's deadline has not passed at now is not late: the error
// wraps store.ErrInvalid, and so does the error for a job without a
// deadline. A lease with an attempt below 1 never ran, and is lost.
// abandoned reports whether it abandoned the job.
func (e executor) CompleteLate(ctx context.Context, now time.Time, l store.Lease) (lr *weirtype.LateResult, abandoned bool, err error) {
	const op = "complete late"
	if err := refuse(op, store.CheckOwner(l.Owner), store.CheckNow(now)); err != nil {
		return nil, false, err
	}
	at := micro(now)
	who := fmt.Sprintf("postgres: %s job %d by %s at attempt %d", op, l.ID, l.Owner, l.Attempt)
	err = e.runTx(ctx, func(q querier) error {
		abandoned = false
		var (
			state       weirtype.State
			owner       string
			attempt     int
			deadline    pgtype.Timestamptz
			kind, queue string
			lastType    string
		)
		err := q.QueryRow(ctx, e.s.sql.lockLate, l.ID).Scan(&state, &owner, &attempt, &deadline, &kind, &queue, &lastType)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("%s: %w: %w", who, store.ErrNotFound, store.ErrLeaseLost)
		case err != nil:
			return dbError(fmt.Sprintf("%s job %d", op, l.ID), err)
		}
		if state == weirtype.StateRunning && owner == l.Owner && attempt == l.Attempt {
			var d time.Time
			if deadline.Valid {
				d = deadline.Time
			}
			if err := store.CheckLate(l.ID, d, now); err != nil {
				return fmt.Errorf("%s: %w", who, err)
			}
			if _, err := q.Exec(ctx, e.s.sql.expireOne, at, timeText(at), l.ID); err != nil {
				return dbError(fmt.Sprintf("%s job %d: expire", op, l.ID), err)
			}
			state, lastType, abandoned = weirtype.StateDead, weirtype.ErrorTypeDeadlineExceeded, true
		}
		switch {
		case state != weirtype.StateDead || lastType != weirtype.ErrorTypeDeadlineExceeded:
			return fmt.Errorf("%s: job is %s, not dead past its deadline: %w", who, state, store.ErrLeaseLost)
		case attempt != l.Attempt || owner != l.Owner:
			return fmt.Errorf("%s: job is dead past its deadline at attempt %d of %q: %w", who, attempt, owner, store.ErrLeaseLost)
		}
		lr, err = scanLateResult(q.QueryRow(ctx, e.s.sql.insertLate, l.ID, kind, queue, attempt, owner, deadline.Time, at))
		if errors.Is(err, pgx.ErrNoRows) {
			// Stored already: the job's lock makes the first result
			// committed and visible to this statement.
			lr, err = scanLateResult(q.QueryRow(ctx, e.s.sql.lateByAttempt, l.ID, attempt))
		}
		if err != nil {
			return dbError(fmt.Sprintf("%s job %d: store result", op, l.ID), err)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return lr, abandoned, nil
}

// ListLateResults returns the late results that match f, lowest id first;
// see store.Executor.
func (e executor) ListLateResults(ctx context.Context, f store.LateResultFilter) ([]*weirtype.LateResult, error) {
	const op = "list late results"
	if err := refuse(op, f.Validate()); err != nil {
		return nil, err
	}
	var (
		conds []string
		args  []any
	)
	add := func(cond string, arg any) {
		args = append(args, arg)
		conds = append(conds, strings.ReplaceAll(cond, "$?", "$"+strconv.Itoa(len(args))))
	}
	if f.JobID != 0 {
		add("job_id = $?", f.JobID)
	}
	if f.Kind != "" {
		add("kind = $?", f.Kind)
	}
	if f.AfterID != 0 {
		add("id > $?", f.AfterID)
	}
	if f.Pending {
		conds = append(conds, "accepted_at IS NULL")
	}
	return listPage(ctx, e, op, `SELECT `+lateResultColumns+` FROM `+e.s.sql.schema+`.weir_late_results`, conds, args, f.Limit, scanLateResult)
}

// AcceptLateResult completes the job of the late result with the id, in
// one transaction that locks the result first; see store.Executor.
func (e executor) AcceptLateResult(ctx context.Context, now time.Time, id int64) (*weirtype.LateResult, error) {
	const op = "accept late result"
	if err := refuse(op, store.CheckNow(now)); err != nil {
		return nil, err
	}
	at := micro(now)
	var lr *weirtype.LateResult
	err := e.runTx(ctx, func(q querier) error {
		found, err := scanLateResult(q.QueryRow(ctx, e.s.sql.lockResult, id))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("postgres: late result %d: %w", id, store.ErrNotFound)
		case err != nil:
			return dbError(fmt.Sprintf("%s %d", op, id), err)
		case !found.AcceptedAt.IsZero():
			return fmt.Errorf("postgres: %s %d: accepted at %s already: %w", op, id, timeText(found.AcceptedAt), store.ErrFinal)
		}
		lr, err = scanLateResult(q.QueryRow(ctx, e.s.sql.accept, id, at))
		if errors.Is(err, pgx.ErrNoRows) {
			return e.lateConflict(ctx, q, op, found)
		}
		if err != nil {
			return dbError(fmt.Sprintf("%s %d", op, id), err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return lr, nil
}

// lateConflict says why the job of late result lr is no longer dead past
// its deadline at the result's attempt. It reads the job after the fact,
// for the message: it only explains.
func (e executor) lateConflict(ctx context.Context, q querier, op string, lr *weirtype.LateResult) error {
	var state weirtype.State
	var attempt int
	err := q.QueryRow(ctx, e.s.sql.jobLease, lr.JobID).Scan(&state, nil, &attempt)
	who := fmt.Sprintf("postgres: %s %d of job %d at attempt %d", op, lr.ID, lr.JobID, lr.Attempt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%s: the job no longer exists (purged): %w", who, store.ErrConflict)
	case err != nil:
		return dbError(fmt.Sprintf("%s %d", op, lr.ID), err)
	default:
		return fmt.Errorf("%s: the job is %s at attempt %d: %w", who, state, attempt, store.ErrConflict)
	}
}

// ListStuck returns up to limit jobs not final whose latest attempt, or
// creation, was before before, oldest first, then by id; see
// store.Executor. It reads the partial index of running jobs.
func (e executor) ListStuck(ctx context.Context, before time.Time, limit int) ([]*weirtype.Job, error) {
	const op = "list stuck jobs"
	if err := refuse(op, store.CheckSet("before", before), store.CheckLimit(limit)); err != nil {
		return nil, err
	}
	var jobs []*weirtype.Job
	err := e.run(ctx, func(q querier) error {
		var err error
		jobs, err = queryJobs(ctx, q, e.s.sql.listStuck, microCeil(before), limit)
		return err
	})
	if err != nil {
		return nil, dbError(op, err)
	}
	return jobs, nil
}

// CountJobs counts the jobs by queue, kind and state, in one scan of the
// jobs; see store.Executor. The counts are ordered by queue, kind and
// state.
func (e executor) CountJobs(ctx context.Context, stuckBefore time.Time) ([]store.JobCount, error) {
	const op = "count jobs"
	if err := refuse(op, store.CheckSet("before", stuckBefore)); err != nil {
		return nil, err
	}
	var counts []store.JobCount
	err := e.run(ctx, func(q querier) error {
		rows, err := q.Query(ctx, e.s.sql.countJobs, microCeil(stuckBefore))
		if err != nil {
			return err
		}
		counts, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.JobCount, error) {
			var c store.JobCount
			var state string
			err := row.Scan(&c.Queue, &c.Kind, &state, &c.Count, &c.Stuck)
			c.State = weirtype.State(state)
			return c, err
		})
		return err
	})
	if err != nil {
		return nil, dbError(op, err)
	}
	return counts, nil
}

// scanLateResult reads a row of lateResultColumns.
func scanLateResult(row pgx.Row) (*weirtype.LateResult, error) {
	var (
		lr         weirtype.LateResult
		acceptedAt pgtype.Timestamptz
	)
	if err := row.Scan(&lr.ID, &lr.JobID, &lr.Kind, &lr.Queue, &lr.Attempt, &lr.Owner,
		&lr.DeadlineAt, &lr.ReceivedAt, &acceptedAt); err != nil {
		return nil, err
	}
	lr.DeadlineAt = lr.DeadlineAt.UTC()
	lr.ReceivedAt = lr.ReceivedAt.UTC()
	lr.AcceptedAt = fromNull(acceptedAt)
	return &lr, nil
}
