package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// deadLetterWhere returns the conditions of f on weir_dead_letters as a
// WHERE clause (empty when f matches everything), with its parameters
// appended to args and numbered after them. Only the fields set become
// conditions, so that each filter's statement can use the index on them.
// With paging, AfterID is a condition too; Limit is the caller's.
func deadLetterWhere(op string, f store.DeadLetterFilter, paging bool, args []any) (string, []any, error) {
	if err := refuse(op, f.Validate()); err != nil {
		return "", nil, err
	}
	var conds []string
	add := func(cond string, arg any) {
		args = append(args, arg)
		conds = append(conds, strings.ReplaceAll(cond, "$?", "$"+strconv.Itoa(len(args))))
	}
	// A non-nil IDs restricts to those ids, so an empty selection
	// matches nothing rather than every dead letter.
	if f.IDs != nil {
		add("id = ANY($?::bigint[])", f.IDs)
	}
	if f.JobID != 0 {
		add("job_id = $?", f.JobID)
	}
	if f.Kind != "" {
		add("kind = $?", f.Kind)
	}
	if f.Queue != "" {
		add("queue = $?", f.Queue)
	}
	if f.Reason != "" {
		add("reason = $?", string(f.Reason))
	}
	// failed_at holds whole microseconds: rounding a bound up keeps both
	// comparisons exact.
	if !f.FailedBefore.IsZero() {
		add("failed_at < $?::timestamptz", microCeil(f.FailedBefore))
	}
	if !f.FailedAfter.IsZero() {
		add("failed_at >= $?::timestamptz", microCeil(f.FailedAfter))
	}
	if paging && f.AfterID != 0 {
		add("id > $?", f.AfterID)
	}
	if len(conds) == 0 {
		return "", args, nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args, nil
}

// GetDeadLetter returns the dead letter with the id, or an error wrapping
// store.ErrNotFound.
func (e executor) GetDeadLetter(ctx context.Context, id int64) (*weirtype.DeadLetter, error) {
	var dl *weirtype.DeadLetter
	err := e.run(ctx, func(q querier) error {
		var err error
		dl, err = scanDeadLetter(q.QueryRow(ctx, e.s.sql.getDeadLetter, id))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: dead letter %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, dbError(fmt.Sprintf("get dead letter %d", id), err)
	}
	return dl, nil
}

// ListDeadLetters returns the dead letters that match f, lowest id first;
// see store.Executor.
func (e executor) ListDeadLetters(ctx context.Context, f store.DeadLetterFilter) ([]*weirtype.DeadLetter, error) {
	const op = "list dead letters"
	where, args, err := deadLetterWhere(op, f, true, nil)
	if err != nil {
		return nil, err
	}
	sql := `SELECT ` + deadLetterColumns + ` FROM ` + e.s.sql.schema + `.weir_dead_letters` + where + ` ORDER BY id`
	if f.Limit > 0 {
		args = append(args, f.Limit)
		sql += ` LIMIT $` + strconv.Itoa(len(args))
	}
	var dls []*weirtype.DeadLetter
	err = e.run(ctx, func(q querier) (err error) {
		dls, err = queryAll(ctx, q, sql, args, scanDeadLetter)
		return err
	})
	if err != nil {
		return nil, dbError(op, err)
	}
	return dls, nil
}

// RequeueDeadLetters makes the jobs of the dead letters that match f
// available at now and deletes those dead letters, in one statement; see
// store.Executor. The letters are locked first, so that a concurrent
// requeue or purge of the same letters waits, then finds them gone. A
// letter whose job is no longer dead (or no longer exists) cannot be
// requeued, and is kept. A requeued job's lease owner is cleared (a job
// abandoned past its deadline kept it, for a late result), and its queue
// announced (see Store.Listen). The ids are in ascending order.
func (e executor) RequeueDeadLetters(ctx context.Context, now time.Time, f store.DeadLetterFilter) ([]int64, error) {
	const op = "requeue dead letters"
	if err := refuse(op, store.CheckNow(now)); err != nil {
		return nil, err
	}
	now = micro(now)
	where, args, err := deadLetterWhere(op, f, false, []any{now})
	if err != nil {
		return nil, err
	}
	entry, err := json.Marshal(weirtype.AttemptError{At: now.UTC(), Type: weirtype.ErrorTypeRequeued,
		Message: "requeued from the dead-letter store; attempts start again from 1"})
	if err != nil {
		return nil, dbError(op, err)
	}
	args = append(args, string(entry))
	entryArg := "$" + strconv.Itoa(len(args))
	s := e.s.sql.schema
	sql := `WITH letters AS (
	SELECT id, job_id FROM ` + s + `.weir_dead_letters` + where + `
	FOR UPDATE
), requeued AS (
	UPDATE ` + s + `.weir_jobs AS j SET
		state = 'available',
		scheduled_at = $1::timestamptz,
		attempt = 0,
		finalized_at = NULL,
		deadline_at = NULL,
		updated_at = $1::timestamptz,
		errors = j.errors || jsonb_build_array(` + entryArg + `::jsonb),
		` + dropLease + `
	FROM letters
	WHERE j.id = letters.job_id AND j.state = 'dead'
	RETURNING j.id, j.queue, j.state
), deleted AS (
	DELETE FROM ` + s + `.weir_dead_letters
	WHERE id IN (SELECT letters.id FROM letters JOIN requeued ON requeued.id = letters.job_id)
), ` + wokenCTE(e.s.channel, "requeued") + `
SELECT id FROM requeued WHERE ` + readWoken
	ids, err := e.queryIDs(ctx, op, sql, args...)
	if err != nil {
		return nil, err
	}
	slices.Sort(ids)
	return ids, nil
}

// PurgeDeadLetters deletes the dead letters that match f and their jobs, in
// one statement; see store.Executor. A job that is no longer dead (a
// requeue got to it first) is kept, and so are the late results of the
// jobs it deletes, a record of what their attempts returned.
func (e executor) PurgeDeadLetters(ctx context.Context, f store.DeadLetterFilter) (int, error) {
	const op = "purge dead letters"
	where, args, err := deadLetterWhere(op, f, false, nil)
	if err != nil {
		return 0, err
	}
	s := e.s.sql.schema
	sql := `WITH letters AS (
	DELETE FROM ` + s + `.weir_dead_letters` + where + `
	RETURNING job_id
), jobs AS (
	DELETE FROM ` + s + `.weir_jobs
	WHERE id IN (SELECT job_id FROM letters) AND state = 'dead'
)
SELECT count(*) FROM letters`
	var n int
	err = e.run(ctx, func(q querier) error {
		return q.QueryRow(ctx, sql, args...).Scan(&n)
	})
	if err != nil {
		return 0, dbError(op, err)
	}
	return n, nil
}

// scanDeadLetter reads a row of deadLetterColumns.
func scanDeadLetter(row pgx.Row) (*weirtype.DeadLetter, error) {
	var (
		dl            weirtype.DeadLetter
		reason        string
		payload, errs []byte
	)
	if err := row.Scan(&dl.ID, &dl.JobID, &dl.Kind, &dl.Queue, &dl.Source, &dl.IdempotencyKey, &payload, &dl.Attempts,
		&dl.LastError, &dl.ErrorType, &reason, &errs, &dl.JobCreatedAt, &dl.FailedAt); err != nil {
		return nil, err
	}
	dl.Payload = json.RawMessage(payload)
	dl.Reason = weirtype.AbandonReason(reason)
	dl.JobCreatedAt = dl.JobCreatedAt.UTC()
	dl.FailedAt = dl.FailedAt.UTC()
	if err := json.Unmarshal(errs, &dl.Errors); err != nil {
		return nil, fmt.Errorf("dead letter %d: errors column: %w", dl.ID, err)
	}
	if len(dl.Errors) == 0 {
		dl.Errors = nil
	}
	for i := range dl.Errors {
		dl.Errors[i].At = dl.Errors[i].At.UTC()
	}
	return &dl, nil
}

// queryAll runs the query sql on q and scans every row it returns with
// scan.
func queryAll[T any](ctx context.Context, q querier, sql string, args []any, scan func(pgx.Row) (T, error)) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scan)
}

// collect scans every row of rows with scan, and closes rows.
func collect[T any](rows pgx.Rows, scan func(pgx.Row) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
