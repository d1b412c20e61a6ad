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

// workflowQueries are the statements of the workflow contexts and the
// effect ledger.
type workflowQueries struct {
	createWorkflow, getWorkflow, advanceWorkflow, workflowVersion   string
	listTransitions                                                 string
	beginEffect, getEffect, finishEffect, listEffects, countEffects string
}

// transitionColumns are the columns of weir_workflow_transitions that
// scanTransition reads, in its order.
const transitionColumns = `workflow_id, version, from_state, state, status, error, at`

// workflowColumns are the columns scanWorkflow reads, in its order.
const workflowColumns = `id, name, state, status, data, version, error, created_at, updated_at`

// effectColumns are the columns scanEffect reads, in its order.
const effectColumns = `txn, series, ordinal, attempts, started_at, finished_at, result`

// effectKey is the condition on weir_effects that selects one effect: $1
// its txn, $2 its series, $3 its ordinal.
const effectKey = `txn = $1 AND series = $2 AND ordinal = $3`

func newWorkflowQueries(schema string) workflowQueries {
	workflows := schema + `.weir_workflows`
	effects := schema + `.weir_effects`
	transitions := schema + `.weir_workflow_transitions`
	return workflowQueries{
		// Returns the row only when it inserted it. A workflow of the id
		// that a transaction not yet committed inserted makes this one
		// wait, then find it (nothing returned) or, if that transaction
		// rolled back, insert. The history's first entry is written by
		// the same statement, exactly when the row is.
		createWorkflow: `WITH made AS (
INSERT INTO ` + workflows + ` (id, name, state, status, data, version, error, created_at, updated_at)
VALUES ($1, $2, $3, 'running', coalesce($4::bytea, ''::bytea), 1, '', $5::timestamptz, $5::timestamptz)
ON CONFLICT (id) DO NOTHING
RETURNING ` + workflowColumns + `
), logged AS (
INSERT INTO ` + transitions + ` (` + transitionColumns + `)
SELECT id, version, '', state, status, error, created_at FROM made
)
SELECT ` + workflowColumns + ` FROM made`,
		getWorkflow: `SELECT ` + workflowColumns + ` FROM ` + workflows + ` WHERE id = $1`,
		// A transition that a concurrent one beat waits for its row lock
		// (taken by old's FOR UPDATE), then finds the version moved on,
		// and updates nothing. old reads the state the transition leaves,
		// for the history entry, which the same statement writes exactly
		// when the update moves the workflow on.
		advanceWorkflow: `WITH old AS (
SELECT id, state FROM ` + workflows + `
WHERE id = $1 AND version = $2 AND status = 'running'
FOR UPDATE
), moved AS (
UPDATE ` + workflows + ` w SET
	state = $3,
	status = $4,
	data = coalesce($5::bytea, ''::bytea),
	error = $6,
	version = w.version + 1,
	updated_at = $7::timestamptz
FROM old
WHERE w.id = old.id AND w.version = $2 AND w.status = 'running'
RETURNING w.id, w.name, w.state, w.status, w.data, w.version, w.error, w.created_at, w.updated_at, old.state AS from_state
), logged AS (
INSERT INTO ` + transitions + ` (` + transitionColumns + `)
SELECT id, version, from_state, state, status, error, updated_at FROM moved
)
SELECT ` + workflowColumns + ` FROM moved`,
		listTransitions: `SELECT ` + transitionColumns + ` FROM ` + transitions + `
WHERE workflow_id = $1 AND version > $2 ORDER BY version LIMIT $3`,
		// Says why a transition updated nothing.
		workflowVersion: `SELECT status, version FROM ` + workflows + ` WHERE id = $1`,
		// Inserts the effect, or, on a conflict with one not finished,
		// counts one more attempt. It returns the row only when it inserted
		// (xmax = 0) or counted; getEffect then reads a finished effect,
		// which the DO UPDATE's false WHERE left as it was. Concurrent
		// begins of one effect wait for the first one's row, so exactly one
		// inserts it.
		beginEffect: `INSERT INTO ` + effects + ` AS e (txn, series, ordinal, attempts, started_at)
VALUES ($1, $2, $3, 1, $4::timestamptz)
ON CONFLICT (txn, series, ordinal) DO UPDATE SET attempts = e.attempts + 1
WHERE e.finished_at IS NULL
RETURNING ` + effectColumns + `, (e.xmax = 0) AS inserted`,
		getEffect: `SELECT ` + effectColumns + ` FROM ` + effects + ` WHERE ` + effectKey,
		// Sets the result of an effect not finished yet; a finished one
		// keeps its first, which getEffect then reads.
		finishEffect: `UPDATE ` + effects + ` SET finished_at = $4::timestamptz, result = $5
WHERE ` + effectKey + ` AND finished_at IS NULL
RETURNING ` + effectColumns,
		// The primary key's order.
		listEffects: `SELECT ` + effectColumns + ` FROM ` + effects + ` WHERE txn = $1 ORDER BY series, ordinal`,
		countEffects: `SELECT series, count(*) FROM ` + effects + `
WHERE txn = $1 AND finished_at IS NOT NULL
GROUP BY series`,
	}
}

// CreateWorkflow creates the workflow p.ID at now unless it exists, and
// returns it with whether this call made it; see store.Executor. The
// insert is one statement (INSERT ... ON CONFLICT DO NOTHING); when it
// finds the workflow, a second statement reads it, which at READ
// COMMITTED sees it as committed by whichever transaction made it. In a
// caller's transaction at REPEATABLE READ or SERIALIZABLE, a workflow
// committed since the transaction's snapshot is a serialization failure
// (SQLSTATE 40001), which the caller retries with its transaction. An ID,
// Name or State with a NUL byte is store.ErrInvalid.
func (e executor) CreateWorkflow(ctx context.Context, now time.Time, p store.WorkflowParams) (*weirtype.Workflow, bool, error) {
	const op = "create workflow"
	if err := refuse(op, p.Validate(), store.CheckNow(now)); err != nil {
		return nil, false, err
	}
	var (
		wf      *weirtype.Workflow
		created bool
	)
	err := e.run(ctx, func(q querier) error {
		var err error
		wf, err = scanWorkflow(q.QueryRow(ctx, e.s.sql.createWorkflow, p.ID, p.Name, p.State, p.Data, micro(now)))
		if err == nil {
			created = true
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		created = false
		wf, err = scanWorkflow(q.QueryRow(ctx, e.s.sql.getWorkflow, p.ID))
		if errors.Is(err, pgx.ErrNoRows) {
			// Workflows are never deleted: the insert found a row that
			// the read cannot.
			return fmt.Errorf("workflow %q that the insert conflicted with is gone", p.ID)
		}
		return err
	})
	if err != nil {
		return nil, false, dbError(fmt.Sprintf("%s %q", op, p.ID), err)
	}
	return wf, created, nil
}

// GetWorkflow returns the workflow with the id, or an error wrapping
// store.ErrNotFound.
func (e executor) GetWorkflow(ctx context.Context, id string) (*weirtype.Workflow, error) {
	var wf *weirtype.Workflow
	err := e.run(ctx, func(q querier) error {
		var err error
		wf, err = scanWorkflow(q.QueryRow(ctx, e.s.sql.getWorkflow, id))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: workflow %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, dbError(fmt.Sprintf("get workflow %q", id), err)
	}
	return wf, nil
}

// AdvanceWorkflow moves the running workflow p.ID on from p.Version, in
// one statement guarded by the version and the status; see
// store.Executor. When it updates nothing, a second statement reads the
// workflow to tell store.ErrNotFound from store.ErrConflict. A version
// below 1, which no workflow has, is store.ErrInvalid. p.Error is kept
// with any NUL byte or invalid UTF-8 replaced by U+FFFD, which PostgreSQL
// cannot store; a State with a NUL byte is store.ErrInvalid.
func (e executor) AdvanceWorkflow(ctx context.Context, now time.Time, p store.AdvanceParams) (*weirtype.Workflow, error) {
	const op = "advance workflow"
	status := p.Status
	if status == "" {
		status = weirtype.WorkflowRunning
	}
	if err := refuse(op, p.Validate(), store.CheckNow(now)); err != nil {
		return nil, err
	}
	var wf *weirtype.Workflow
	err := e.run(ctx, func(q querier) error {
		var err error
		wf, err = scanWorkflow(q.QueryRow(ctx, e.s.sql.advanceWorkflow,
			p.ID, p.Version, p.State, string(status), p.Data, storable(p.Error), micro(now)))
		if errors.Is(err, pgx.ErrNoRows) {
			return e.advanceRefused(ctx, q, p)
		}
		return err
	})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) {
			return nil, err
		}
		return nil, dbError(fmt.Sprintf("%s %q", op, p.ID), err)
	}
	return wf, nil
}

// advanceRefused says why the transition p updated nothing: there is no
// workflow p.ID (store.ErrNotFound), or it is not running at p.Version
// (store.ErrConflict). It reads the workflow after the fact, for the
// message: it only explains.
func (e executor) advanceRefused(ctx context.Context, q querier, p store.AdvanceParams) error {
	var (
		status  string
		version int64
	)
	err := q.QueryRow(ctx, e.s.sql.workflowVersion, p.ID).Scan(&status, &version)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("postgres: workflow %q: %w", p.ID, store.ErrNotFound)
	case err != nil:
		return err
	default:
		return fmt.Errorf("postgres: advance workflow %q from version %d: it is %s at version %d: %w",
			p.ID, p.Version, status, version, store.ErrConflict)
	}
}

// ListWorkflows returns the workflows that match f, lowest id first; see
// store.Executor. Ids compare byte by byte, whatever the database's
// collation.
func (e executor) ListWorkflows(ctx context.Context, f store.WorkflowFilter) ([]*weirtype.Workflow, error) {
	const op = "list workflows"
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
	if f.Name != "" {
		add("name = $?", f.Name)
	}
	if f.Status != "" {
		add("status = $?", string(f.Status))
	}
	// updated_at holds whole microseconds: rounding the bound up keeps the
	// comparison exact.
	if !f.UpdatedBefore.IsZero() {
		add("updated_at < $?::timestamptz", microCeil(f.UpdatedBefore))
	}
	if f.AfterID != "" {
		add("id > $?", f.AfterID)
	}
	return listPage(ctx, e, op, `SELECT `+workflowColumns+` FROM `+e.s.sql.schema+`.weir_workflows`, conds, args, f.Limit, scanWorkflow)
}

// ListWorkflowTransitions returns the history of the workflow id, by
// version; see store.Executor.
func (e executor) ListWorkflowTransitions(ctx context.Context, id string, afterVersion int64, limit int) ([]*store.WorkflowTransition, error) {
	const op = "list workflow transitions"
	if err := refuse(op, store.CheckHistoryPage(afterVersion, limit)); err != nil {
		return nil, err
	}
	var lim any // NULL: no limit
	if limit > 0 {
		lim = limit
	}
	var out []*store.WorkflowTransition
	err := e.run(ctx, func(q querier) (err error) {
		out, err = queryAll(ctx, q, e.s.sql.listTransitions, []any{id, afterVersion, lim}, scanTransition)
		return err
	})
	if err != nil {
		return nil, dbError(fmt.Sprintf("%s %q", op, id), err)
	}
	return out, nil
}

// scanTransition reads a row of transitionColumns.
func scanTransition(row pgx.Row) (*store.WorkflowTransition, error) {
	var (
		t      store.WorkflowTransition
		status string
	)
	if err := row.Scan(&t.WorkflowID, &t.Version, &t.FromState, &t.State, &status, &t.Error, &t.At); err != nil {
		return nil, err
	}
	t.Status, t.At = weirtype.WorkflowStatus(status), t.At.UTC()
	return &t, nil
}

// listPage runs selectFrom with the conditions conds on args, in id order,
// at most limit rows (0: all), and scans each row with scan; op names the
// call in its error.
func listPage[T any](ctx context.Context, e executor, op, selectFrom string, conds []string, args []any, limit int, scan func(pgx.Row) (T, error)) ([]T, error) {
	sql := selectFrom
	if len(conds) > 0 {
		sql += ` WHERE ` + strings.Join(conds, " AND ")
	}
	sql += ` ORDER BY id`
	if limit > 0 {
		args = append(args, limit)
		sql += ` LIMIT $` + strconv.Itoa(len(args))
	}
	var out []T
	err := e.run(ctx, func(q querier) (err error) {
		out, err = queryAll(ctx, q, sql, args, scan)
		return err
	})
	if err != nil {
		return nil, dbError(op, err)
	}
	return out, nil
}

// BeginEffect records that the effect k is about to run, in one statement
// (INSERT ... ON CONFLICT DO UPDATE), and returns its record; see
// store.Executor. A finished effect is read by a second statement, and
// returned unchanged. An effect begun again keeps the StartedAt of its
// first begin. A Txn or Series with a NUL byte is store.ErrInvalid.
func (e executor) BeginEffect(ctx context.Context, now time.Time, k store.EffectKey) (*weirtype.Effect, bool, error) {
	const op = "begin effect"
	if err := refuse(op, k.Validate(), store.CheckNow(now)); err != nil {
		return nil, false, err
	}
	var (
		rec   *weirtype.Effect
		begun bool
	)
	err := e.run(ctx, func(q querier) error {
		var err error
		rec, err = scanEffect(q.QueryRow(ctx, e.s.sql.beginEffect, k.Txn, k.Series, k.Ordinal, micro(now)), &begun)
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		begun = false
		rec, err = scanEffect(q.QueryRow(ctx, e.s.sql.getEffect, k.Txn, k.Series, k.Ordinal))
		if errors.Is(err, pgx.ErrNoRows) {
			// Effects are never deleted: the insert found a row that the
			// read cannot.
			return fmt.Errorf("the effect that the insert conflicted with is gone")
		}
		return err
	})
	if err != nil {
		return nil, false, dbError(fmt.Sprintf("%s %s", op, keyText(k)), err)
	}
	return rec, begun, nil
}

// FinishEffect records result for the begun effect k at now, in one
// statement, and returns the record; see store.Executor. When that
// statement updates nothing, a second reads the effect: finished already,
// it is returned with its first result; missing, the error wraps
// store.ErrNotFound. A result with a NUL byte is store.ErrInvalid: it is
// returned to callers as it was given, so it is not altered to fit.
func (e executor) FinishEffect(ctx context.Context, now time.Time, k store.EffectKey, result string) (*weirtype.Effect, error) {
	const op = "finish effect"
	if err := refuse(op, k.Validate(), store.CheckNow(now)); err != nil {
		return nil, err
	}
	var rec *weirtype.Effect
	err := e.run(ctx, func(q querier) error {
		var err error
		rec, err = scanEffect(q.QueryRow(ctx, e.s.sql.finishEffect, k.Txn, k.Series, k.Ordinal, micro(now), result))
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		rec, err = scanEffect(q.QueryRow(ctx, e.s.sql.getEffect, k.Txn, k.Series, k.Ordinal))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("postgres: effect %s was never begun: %w", keyText(k), store.ErrNotFound)
		}
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if err != nil {
		return nil, dbError(fmt.Sprintf("%s %s", op, keyText(k)), err)
	}
	return rec, nil
}

// ListEffects returns the effects of txn, by series then ordinal, series
// compared byte by byte; see store.Executor. An empty txn is
// store.ErrInvalid.
func (e executor) ListEffects(ctx context.Context, txn string) ([]*weirtype.Effect, error) {
	const op = "list effects"
	if err := refuse(op, store.CheckTxn(txn)); err != nil {
		return nil, err
	}
	var recs []*weirtype.Effect
	err := e.run(ctx, func(q querier) (err error) {
		recs, err = queryAll(ctx, q, e.s.sql.listEffects, []any{txn}, func(row pgx.Row) (*weirtype.Effect, error) {
			return scanEffect(row)
		})
		return err
	})
	if err != nil {
		return nil, dbError(fmt.Sprintf("%s of txn %q", op, txn), err)
	}
	return recs, nil
}

// CountEffects returns, for each series of txn with an effect finished,
// how many are; see store.Executor. A series with none finished is left
// out, and an unknown txn gives an empty map. An empty txn is
// store.ErrInvalid.
func (e executor) CountEffects(ctx context.Context, txn string) (map[string]int, error) {
	const op = "count effects"
	if err := refuse(op, store.CheckTxn(txn)); err != nil {
		return nil, err
	}
	counts := make(map[string]int)
	err := e.run(ctx, func(q querier) error {
		clear(counts) // a retried statement counts afresh
		rows, err := q.Query(ctx, e.s.sql.countEffects, txn)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				series string
				n      int
			)
			if err := rows.Scan(&series, &n); err != nil {
				return err
			}
			counts[series] = n
		}
		return rows.Err()
	})
	if err != nil {
		return nil, dbError(fmt.Sprintf("%s of txn %q", op, txn), err)
	}
	return counts, nil
}

// keyText names the effect k in errors, as txn/series/ordinal with txn
// and series quoted.
func keyText(k store.EffectKey) string {
	return fmt.Sprintf("%q/%q/%d", k.Txn, k.Series, k.Ordinal)
}

// scanWorkflow reads a row of workflowColumns. Empty data reads back as
// nil.
func scanWorkflow(row pgx.Row) (*weirtype.Workflow, error) {
	var (
		wf     weirtype.Workflow
		status string
	)
	if err := row.Scan(&wf.ID, &wf.Name, &wf.State, &status, &wf.Data, &wf.Version, &wf.Error, &wf.CreatedAt, &wf.UpdatedAt); err != nil {
		return nil, err
	}
	wf.Status = weirtype.WorkflowStatus(status)
	if len(wf.Data) == 0 {
		wf.Data = nil
	}
	wf.CreatedAt = wf.CreatedAt.UTC()
	wf.UpdatedAt = wf.UpdatedAt.UTC()
	return &wf, nil
}

// scanEffect reads a row of effectColumns, then extra. An unfinished
// effect's NULL finished_at and result read back as the zero time and "".
func scanEffect(row pgx.Row, extra ...any) (*weirtype.Effect, error) {
	var (
		rec        weirtype.Effect
		finishedAt pgtype.Timestamptz
		result     pgtype.Text
	)
	dest := []any{&rec.Txn, &rec.Series, &rec.Ordinal, &rec.Attempts, &rec.StartedAt, &finishedAt, &result}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return nil, err
	}
	rec.StartedAt = rec.StartedAt.UTC()
	rec.FinishedAt = fromNull(finishedAt)
	rec.Result = result.String
	return &rec, nil
}
