package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// Deadlines and late results: the sweep that abandons jobs past their
// deadline, the late successes of the attempts it abandoned, and the
// operator's views of the jobs that are stuck.
//
// An expired running job keeps its lease_owner and attempt (only its lease
// expiry is cleared, so its heartbeats and Complete find the lease lost):
// "dead, last error deadline_exceeded, at this attempt of this owner" is
// how CompleteLate recognises the success of that attempt as late, and how
// AcceptLateResult makes sure the job has not moved on since.

// expireJobs is the SET clause of the deadline expiries: at ?1 the job
// becomes dead, with an error at ?2 (?1 as JSON) of type deadline_exceeded
// for its current attempt. A running job keeps its owner; a job that is
// not running has none.
//
// The message names the deadline as Go's time.RFC3339Nano writes it in
// UTC: whole seconds (floored, also before 1970), then the microseconds
// without trailing zeros, if any. strftime's %f would round to the
// millisecond, and could name a time after the deadline.
const expireJobs = `UPDATE weir_jobs SET
	state = 'dead', finalized_at = ?1, updated_at = ?1, lease_expires_at = NULL,
	lease_owner = CASE WHEN state = 'running' THEN lease_owner ELSE '' END,
	errors = json_insert(errors, '$[#]', json_object(
		'attempt', attempt,
		'at', ?2,
		'message', 'deadline ' ||
			strftime('%Y-%m-%dT%H:%M:%S', deadline_at / 1000000 - (deadline_at % 1000000 < 0), 'unixepoch') ||
			CASE WHEN deadline_at % 1000000 = 0 THEN ''
				ELSE '.' || rtrim(printf('%06d', (deadline_at % 1000000 + 1000000) % 1000000), '0') END ||
			'Z passed before the job completed',
		'type', '` + weirtype.ErrorTypeDeadlineExceeded + `'))`

// expireDeadlines abandons at ?1, as expireJobs says, up to ?3 jobs that
// are not final and whose deadline is before ?1, earliest deadline first.
// The selection names its index, so that the planner, which has no
// statistics, never takes another and sorts every waiting job.
const expireDeadlines = expireJobs + `
	WHERE id IN (
		SELECT id FROM weir_jobs INDEXED BY weir_jobs_deadline
		WHERE deadline_at < ?1 AND state IN ('available', 'scheduled', 'running')
		ORDER BY deadline_at, id LIMIT ` + limit3 + `)
	RETURNING id, kind, queue, deadline_at`

// expireHeld abandons at ?1, as expireJobs says, the running job ?3: one
// that CompleteLate found held by the lease and past its deadline.
const expireHeld = expireJobs + `
	WHERE id = ?3 AND state = 'running'`

// ExpireDeadlines abandons, in one UPDATE, up to limit jobs that are not
// final and whose deadline is before now, and writes their dead letters
// (reason deadline_exceeded) in the same transaction. It returns them
// earliest deadline first, then by id.
func (e executor) ExpireDeadlines(ctx context.Context, now time.Time, limit int) ([]store.JobRef, error) {
	if err := store.FirstError(checkNow(now), store.CheckLimit(limit)); err != nil {
		return nil, fmt.Errorf("expire deadlines: %w", err)
	}
	var jobs []store.JobRef
	err := e.write(ctx, func(tx *sql.Tx) error {
		rows, err := e.s.stmts.query(ctx, tx, expireDeadlines, encodeTime(now), timeJSON(now), limit)
		if err != nil {
			return err
		}
		if jobs, err = scanExpired(rows); err != nil {
			return err
		}
		return e.insertDeadLetters(ctx, tx, now, weirtype.AbandonDeadline, store.IDsOf(jobs))
	})
	if err != nil {
		return nil, fmt.Errorf("expire deadlines: %w", err)
	}
	return jobs, nil
}

// scanExpired reads and closes rows of (id, kind, queue, deadline_at), and
// returns the jobs earliest deadline first, then by id: RETURNING gives
// the rows in no promised order.
func scanExpired(rows *sql.Rows) ([]store.JobRef, error) {
	type expired struct {
		store.JobRef
		deadline int64
	}
	got, err := scanRows(rows, nil, func(row scanner) (x expired, err error) {
		err = row.Scan(&x.ID, &x.Kind, &x.Queue, &x.deadline)
		return x, err
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(got, func(a, b expired) int {
		return cmp.Or(cmp.Compare(a.deadline, b.deadline), cmp.Compare(a.ID, b.ID))
	})
	jobs := make([]store.JobRef, len(got))
	for i, x := range got {
		jobs[i] = x.JobRef
	}
	return jobs, nil
}

// lateResultColumns are weir_late_results' columns in the order
// scanLateResult reads them.
const lateResultColumns = `id, job_id, kind, queue, attempt, owner, deadline_at, received_at, accepted_at`

// insertLateResult stores the late result of job ?1, received at ?2, for
// the attempt and owner the job's row holds, unless the job has one for
// that attempt already. (The SELECT's WHERE clause also keeps SQLite from
// reading ON CONFLICT as a join constraint.)
const insertLateResult = `INSERT INTO weir_late_results
	(job_id, kind, queue, attempt, owner, deadline_at, received_at)
	SELECT id, kind, queue, attempt, lease_owner, deadline_at, ?2 FROM weir_jobs WHERE id = ?1
	ON CONFLICT (job_id, attempt) DO NOTHING`

// CompleteLate, in one transaction, abandons the job of lease l when l is
// still held (as ExpireDeadlines does, dead letter included), then stores
// the late result of l's attempt, or finds the one stored already. It
// returns an error wrapping store.ErrLeaseLost, changing nothing, when the
// job is missing or is not dead past its deadline at l's attempt and
// owner; and one wrapping store.ErrInvalid when l is held and the job has
// no deadline, or its deadline has not passed at now (the attempt is not
// late: Complete it). abandoned reports whether it abandoned the job.
func (e executor) CompleteLate(ctx context.Context, now time.Time, l store.Lease) (lr *weirtype.LateResult, abandoned bool, err error) {
	if err := store.FirstError(store.CheckOwner(l.Owner), checkNow(now)); err != nil {
		return nil, false, fmt.Errorf("complete job %d late: %w", l.ID, err)
	}
	err = e.write(ctx, func(tx *sql.Tx) (err error) {
		lr, abandoned, err = e.completeLate(ctx, tx, now, l)
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("complete job %d late: %w", l.ID, err)
	}
	return lr, abandoned, nil
}

func (e executor) completeLate(ctx context.Context, tx *sql.Tx, now time.Time, l store.Lease) (*weirtype.LateResult, bool, error) {
	var (
		state, owner, lastType string
		attempt                int
		deadline               sql.NullInt64
	)
	err := tx.QueryRowContext(ctx, `SELECT state, attempt, lease_owner, deadline_at, coalesce(errors ->> '$[#-1].type', '')
		FROM weir_jobs WHERE id = ?`, l.ID).Scan(&state, &attempt, &owner, &deadline, &lastType)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, fmt.Errorf("%w: job %d does not exist", store.ErrLeaseLost, l.ID)
	}
	if err != nil {
		return nil, false, fmt.Errorf("read the job: %w", err)
	}
	held := state == string(weirtype.StateRunning) && owner == l.Owner && attempt == l.Attempt
	if held {
		if err := store.CheckLate(l.ID, decodeTime(deadline), now); err != nil {
			return nil, false, err
		}
		if _, err := e.s.stmts.exec(ctx, tx, expireHeld, encodeTime(now), timeJSON(now), l.ID); err != nil {
			return nil, false, fmt.Errorf("abandon the job past its deadline: %w", err)
		}
		if err := e.insertDeadLetters(ctx, tx, now, weirtype.AbandonDeadline, []int64{l.ID}); err != nil {
			return nil, false, err
		}
		state, lastType = string(weirtype.StateDead), weirtype.ErrorTypeDeadlineExceeded
	}
	if state != string(weirtype.StateDead) || lastType != weirtype.ErrorTypeDeadlineExceeded || attempt != l.Attempt || owner != l.Owner {
		return nil, false, fmt.Errorf("%w: job %d is not dead past its deadline at attempt %d of %s (it is %s at attempt %d)",
			store.ErrLeaseLost, l.ID, l.Attempt, l.Owner, state, attempt)
	}

	if _, err := e.s.stmts.exec(ctx, tx, insertLateResult, l.ID, encodeTime(now)); err != nil {
		return nil, false, fmt.Errorf("store the late result: %w", err)
	}
	lr, err := scanLateResult(tx.QueryRowContext(ctx,
		"SELECT "+lateResultColumns+" FROM weir_late_results WHERE job_id = ? AND attempt = ?", l.ID, l.Attempt))
	if err != nil {
		return nil, false, fmt.Errorf("read the late result: %w", err)
	}
	return lr, held, nil
}

// ListLateResults returns the late results that match f, lowest id first.
func (e executor) ListLateResults(ctx context.Context, f store.LateResultFilter) ([]*weirtype.LateResult, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("list late results: %w", err)
	}
	var c conds
	if f.JobID != 0 {
		c.add("job_id = ?", f.JobID)
	}
	if f.Kind != "" {
		c.add("kind = ?", f.Kind)
	}
	if f.Pending {
		c.add("accepted_at IS NULL")
	}
	if f.AfterID > 0 {
		c.add("id > ?", f.AfterID)
	}
	lrs, err := queryPage(ctx, e.reader(), "SELECT "+lateResultColumns+" FROM weir_late_results"+c.where()+" ORDER BY id", c.args, f.Limit, scanLateResult)
	if err != nil {
		return nil, fmt.Errorf("list late results: %w", err)
	}
	return lrs, nil
}

// acceptLateJob completes at ?1 job ?2 if it is still dead past its
// deadline at attempt ?3 of owner ?4, as the late result found it.
const acceptLateJob = `UPDATE weir_jobs SET
	state = 'completed', finalized_at = ?1, updated_at = ?1, lease_owner = '', lease_expires_at = NULL
	WHERE id = ?2 AND state = 'dead' AND attempt = ?3 AND lease_owner = ?4
		AND errors ->> '$[#-1].type' = '` + weirtype.ErrorTypeDeadlineExceeded + `'`

// AcceptLateResult, in one transaction, completes the job of the late
// result with the id, deletes the job's dead letters and marks the result
// accepted at now. It returns an error wrapping store.ErrNotFound for a
// missing result, store.ErrFinal for one accepted already, and
// store.ErrConflict, changing nothing, when the job is no longer dead past
// its deadline at the result's attempt: requeued, completed or purged
// since.
func (e executor) AcceptLateResult(ctx context.Context, now time.Time, id int64) (*weirtype.LateResult, error) {
	if err := checkNow(now); err != nil {
		return nil, fmt.Errorf("accept late result %d: %w", id, err)
	}
	var lr *weirtype.LateResult
	err := e.write(ctx, func(tx *sql.Tx) error {
		var err error
		lr, err = scanLateResult(tx.QueryRowContext(ctx,
			"SELECT "+lateResultColumns+" FROM weir_late_results WHERE id = ?", id))
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if !lr.AcceptedAt.IsZero() {
			return fmt.Errorf("%w: accepted at %s", store.ErrFinal, lr.AcceptedAt.Format(time.RFC3339Nano))
		}
		res, err := tx.ExecContext(ctx, acceptLateJob, encodeTime(now), lr.JobID, lr.Attempt, lr.Owner)
		if err != nil {
			return fmt.Errorf("complete job %d: %w", lr.JobID, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n != 1 {
			return jobConflict(ctx, tx, lr)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM weir_dead_letters WHERE job_id = ?", lr.JobID); err != nil {
			return fmt.Errorf("delete the dead letters of job %d: %w", lr.JobID, err)
		}
		lr, err = scanLateResult(tx.QueryRowContext(ctx,
			"UPDATE weir_late_results SET accepted_at = ?1 WHERE id = ?2 RETURNING "+lateResultColumns, encodeTime(now), id))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("accept late result %d: %w", id, err)
	}
	return lr, nil
}

// jobConflict is the error wrapping store.ErrConflict of a late result
// whose job is no longer dead past its deadline at the result's attempt.
func jobConflict(ctx context.Context, tx *sql.Tx, lr *weirtype.LateResult) error {
	var state string
	var attempt int
	err := tx.QueryRowContext(ctx, "SELECT state, attempt FROM weir_jobs WHERE id = ?", lr.JobID).Scan(&state, &attempt)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: job %d no longer exists (purged)", store.ErrConflict, lr.JobID)
	case err != nil:
		return fmt.Errorf("read job %d: %w", lr.JobID, err)
	}
	return fmt.Errorf("%w: job %d is %s at attempt %d, no longer dead past its deadline at attempt %d",
		store.ErrConflict, lr.JobID, state, attempt, lr.Attempt)
}

// scanLateResult reads one row of lateResultColumns. It returns
// sql.ErrNoRows, unwrapped, when a *sql.Row has none.
func scanLateResult(row scanner) (*weirtype.LateResult, error) {
	var (
		lr                         weirtype.LateResult
		deadline, received, accept sql.NullInt64
	)
	err := row.Scan(&lr.ID, &lr.JobID, &lr.Kind, &lr.Queue, &lr.Attempt, &lr.Owner, &deadline, &received, &accept)
	if err != nil {
		return nil, err
	}
	lr.DeadlineAt = decodeTime(deadline)
	lr.ReceivedAt = decodeTime(received)
	lr.AcceptedAt = decodeTime(accept)
	return &lr, nil
}

// stuckSince is since when a job not final has waited: a running job since
// its attempt started, a waiting one since it was due.
const stuckSince = `CASE WHEN state = 'running' THEN attempted_at ELSE scheduled_at END`

// listStuck reads up to ?2 running jobs whose attempt started before ?1,
// oldest first, through weir_jobs_lease_expiry, the partial index of
// running jobs (a set as small as the workers), which it sorts.
const listStuck = `SELECT ` + jobColumns + ` FROM weir_jobs WHERE state = 'running' AND attempted_at < ?1
	ORDER BY attempted_at, id LIMIT ?2`

// ListStuck returns up to limit running jobs whose attempt started before
// before, oldest first, then by id.
func (e executor) ListStuck(ctx context.Context, before time.Time, limit int) ([]*weirtype.Job, error) {
	if err := store.FirstError(checkBefore(before), store.CheckLimit(limit)); err != nil {
		return nil, fmt.Errorf("list stuck jobs: %w", err)
	}
	rows, err := e.reader().QueryContext(ctx, listStuck, encodeTime(before), limit)
	if err != nil {
		return nil, fmt.Errorf("list stuck jobs: %w", err)
	}
	jobs, err := scanJobs(rows, min(limit, 100))
	if err != nil {
		return nil, fmt.Errorf("list stuck jobs: %w", err)
	}
	return jobs, nil
}

// countJobs counts the jobs by queue, kind and state, and of each group
// those stuck since before ?1 (running since then, or waiting due since). It reads every job: it is an
// operator's query, run now and then, not the engine's.
const countJobs = `SELECT queue, kind, state, count(*),
	count(*) FILTER (WHERE state IN ('available', 'scheduled', 'running') AND ` + stuckSince + ` < ?1)
	FROM weir_jobs GROUP BY queue, kind, state ORDER BY queue, kind, state`

// CountJobs counts the jobs by queue, kind and state, in that order, and
// of each group those stuck since before stuckBefore.
func (e executor) CountJobs(ctx context.Context, stuckBefore time.Time) ([]store.JobCount, error) {
	if err := checkBefore(stuckBefore); err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	counts, err := queryAll(ctx, e.reader(), countJobs, []any{encodeTime(stuckBefore)}, func(row scanner) (c store.JobCount, err error) {
		var state string
		err = row.Scan(&c.Queue, &c.Kind, &state, &c.Count, &c.Stuck)
		c.State = weirtype.State(state)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	return counts, nil
}

// checkBefore returns an error wrapping store.ErrInvalid when before, the
// stuck threshold, is the zero time or cannot be stored.
func checkBefore(before time.Time) error {
	return store.FirstError(store.CheckSet("before", before), checkTime("before", before))
}
