package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// deadLetterColumns are weir_dead_letters' columns in the order
// scanDeadLetter reads them.
const deadLetterColumns = `id, job_id, kind, queue, source, idempotency_key, payload, attempts,
	last_error, error_type, reason, errors, job_created_at, failed_at`

// GetDeadLetter returns the dead letter with the id, or an error wrapping
// store.ErrNotFound.
func (e executor) GetDeadLetter(ctx context.Context, id int64) (*weirtype.DeadLetter, error) {
	dl, err := scanDeadLetter(e.reader().QueryRowContext(ctx,
		"SELECT "+deadLetterColumns+" FROM weir_dead_letters WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get dead letter %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get dead letter %d: %w", id, err)
	}
	return dl, nil
}

// ListDeadLetters returns the dead letters that match f, lowest id first.
func (e executor) ListDeadLetters(ctx context.Context, f store.DeadLetterFilter) ([]*weirtype.DeadLetter, error) {
	where, args, err := deadLetterWhere(f, true)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	dls, err := queryPage(ctx, e.reader(), "SELECT "+deadLetterColumns+" FROM weir_dead_letters"+where+" ORDER BY id", args, f.Limit, scanDeadLetter)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	return dls, nil
}

// RequeueDeadLetters makes the dead jobs of the dead letters that match f
// available at now, attempts reset to zero, deadline cleared and errors
// kept, with an error of type requeued (attempt 0) appended, and deletes
// those dead letters, in one transaction. It returns the jobs' ids in
// ascending order. A dead letter whose job is gone
// (or, against the store's own invariant, not dead) stays: there is nothing
// to requeue, and deleting it would lose the job's payload.
func (e executor) RequeueDeadLetters(ctx context.Context, now time.Time, f store.DeadLetterFilter) ([]int64, error) {
	if err := checkNow(now); err != nil {
		return nil, fmt.Errorf("requeue dead letters: %w", err)
	}
	where, args, err := deadLetterWhere(f, false)
	if err != nil {
		return nil, fmt.Errorf("requeue dead letters: %w", err)
	}
	entry, err := json.Marshal(weirtype.AttemptError{At: storedTime(now), Type: weirtype.ErrorTypeRequeued,
		Message: "requeued from the dead-letter store; attempts start again from 1"})
	if err != nil {
		return nil, fmt.Errorf("requeue dead letters: %w", err)
	}
	var ids []int64
	err = e.write(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, requeueJobs(where), append([]any{encodeTime(now), encodeTime(now), string(entry)}, args...)...)
		if err != nil {
			return err
		}
		if ids, err = scanIDs(rows); err != nil || len(ids) == 0 {
			return err
		}
		_, err = tx.ExecContext(ctx, "DELETE FROM weir_dead_letters"+and(where, "job_id IN (SELECT value FROM json_each(?))"),
			append(args, idList(ids))...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("requeue dead letters: %w", err)
	}
	slices.Sort(ids)
	return ids, nil
}

// PurgeDeadLetters deletes the dead letters that match f and their dead
// jobs, in one transaction, and returns how many dead letters it deleted.
func (e executor) PurgeDeadLetters(ctx context.Context, f store.DeadLetterFilter) (int, error) {
	where, args, err := deadLetterWhere(f, false)
	if err != nil {
		return 0, fmt.Errorf("purge dead letters: %w", err)
	}
	var n int64
	err = e.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, purgeJobs(where), args...); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, "DELETE FROM weir_dead_letters"+where, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("purge dead letters: %w", err)
	}
	return int(n), nil
}

// requeueJobs and purgeJobs act on the dead jobs of the dead letters that
// match where. NOT INDEXED keeps the planner, which has no statistics, from
// ever walking an index of jobs instead of looking up the jobs of the dead
// letters selected (the rowid still serves).
// requeueJobs takes the requeue time twice, then the entry appended to the
// job's errors (JSON), then the arguments of where. The deadline is
// cleared (it passed, or will soon: the operator decides anew), and so is
// the lease owner, which a job abandoned past its deadline keeps.
func requeueJobs(where string) string {
	return `UPDATE weir_jobs NOT INDEXED SET
		state = 'available', scheduled_at = ?, updated_at = ?, attempt = 0, finalized_at = NULL,
		deadline_at = NULL, lease_owner = '', lease_expires_at = NULL,
		errors = json_insert(errors, '$[#]', json(?))
		WHERE id IN (SELECT job_id FROM weir_dead_letters` + where + `) AND state = 'dead'
		RETURNING id`
}

func purgeJobs(where string) string {
	return "DELETE FROM weir_jobs NOT INDEXED WHERE id IN (SELECT job_id FROM weir_dead_letters" + where + ") AND state = 'dead'"
}

// deadLetterWhere is f as a WHERE clause on weir_dead_letters (empty when f
// matches everything) and its arguments; with page, AfterID counts too.
//
// IDs that is not nil but empty matches nothing: a zero DeadLetterFilter
// field matches everything, and an empty slice is not the zero value. It
// is what a caller who selected no dead letters means; reading it as "all"
// would make a purge of an empty selection purge every dead letter.
func deadLetterWhere(f store.DeadLetterFilter, page bool) (string, []any, error) {
	if err := store.FirstError(f.Validate(), checkTime("failed before", f.FailedBefore), checkTime("failed after", f.FailedAfter)); err != nil {
		return "", nil, err
	}
	var c conds
	switch {
	case f.IDs == nil:
	case len(f.IDs) == 0:
		c.add("0")
	default:
		c.add("id IN (SELECT value FROM json_each(?))", idList(f.IDs))
	}
	if f.JobID != 0 {
		c.add("job_id = ?", f.JobID)
	}
	if f.Kind != "" {
		c.add("kind = ?", f.Kind)
	}
	if f.Queue != "" {
		c.add("queue = ?", f.Queue)
	}
	if f.Reason != "" {
		c.add("reason = ?", string(f.Reason))
	}
	if !f.FailedBefore.IsZero() {
		c.add("failed_at < ?", encodeTime(f.FailedBefore))
	}
	if !f.FailedAfter.IsZero() {
		c.add("failed_at >= ?", encodeTime(f.FailedAfter))
	}
	if page && f.AfterID > 0 {
		c.add("id > ?", f.AfterID)
	}
	return c.where(), c.args, nil
}

// and adds cond to the clause where that deadLetterWhere made.
func and(where, cond string) string {
	if where == "" {
		return " WHERE " + cond
	}
	return where + " AND " + cond
}

// scanDeadLetter reads one row of deadLetterColumns. It returns
// sql.ErrNoRows, unwrapped, when a *sql.Row has none.
func scanDeadLetter(row scanner) (*weirtype.DeadLetter, error) {
	var (
		dl                    weirtype.DeadLetter
		payload, reason, errs string
		jobCreated, failedAt  sql.NullInt64
	)
	err := row.Scan(&dl.ID, &dl.JobID, &dl.Kind, &dl.Queue, &dl.Source, &dl.IdempotencyKey, &payload, &dl.Attempts,
		&dl.LastError, &dl.ErrorType, &reason, &errs, &jobCreated, &failedAt)
	if err != nil {
		return nil, err
	}
	dl.Payload = json.RawMessage(payload)
	dl.Reason = weirtype.AbandonReason(reason)
	dl.JobCreatedAt = decodeTime(jobCreated)
	dl.FailedAt = decodeTime(failedAt)
	if dl.Errors, err = decodeErrors(errs); err != nil {
		return nil, fmt.Errorf("dead letter %d: errors column: %w", dl.ID, err)
	}
	return &dl, nil
}
