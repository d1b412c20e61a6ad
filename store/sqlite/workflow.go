package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// workflowColumns are weir_workflows' columns in the order scanWorkflow
// reads them.
const workflowColumns = `id, name, state, status, data, version, error, created_at, updated_at`

// CreateWorkflow creates the workflow p.ID unless it exists; see
// store.Executor. SQLite's one writer makes the check and the insert one
// step.
func (e executor) CreateWorkflow(ctx context.Context, now time.Time, p store.WorkflowParams) (*weirtype.Workflow, bool, error) {
	const op = "create workflow"
	if err := store.FirstError(p.Validate(), checkNow(now)); err != nil {
		return nil, false, fmt.Errorf("%s: %w", op, err)
	}
	var (
		wf      *weirtype.Workflow
		created bool
	)
	err := e.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO weir_workflows (id, name, state, status, data, version, created_at, updated_at)
			VALUES (?1, ?2, ?3, 'running', ?4, 1, ?5, ?5) ON CONFLICT (id) DO NOTHING`, p.ID, p.Name, p.State, p.Data, encodeTime(now))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		created = n == 1
		if created {
			if _, err := tx.ExecContext(ctx, `INSERT INTO weir_workflow_transitions (workflow_id, version, from_state, state, status, error, at)
				VALUES (?1, 1, '', ?2, 'running', '', ?3)`, p.ID, p.State, encodeTime(now)); err != nil {
				return fmt.Errorf("record the creation: %w", err)
			}
		}
		wf, err = scanWorkflow(tx.QueryRowContext(ctx, `SELECT `+workflowColumns+` FROM weir_workflows WHERE id = ?1`, p.ID))
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("%s %s: %w", op, p.ID, err)
	}
	return wf, created, nil
}

// GetWorkflow returns the workflow with the id, or store.ErrNotFound.
func (e executor) GetWorkflow(ctx context.Context, id string) (*weirtype.Workflow, error) {
	wf, err := scanWorkflow(e.reader().QueryRowContext(ctx, `SELECT `+workflowColumns+` FROM weir_workflows WHERE id = ?1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get workflow %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get workflow %s: %w", id, err)
	}
	return wf, nil
}

// AdvanceWorkflow moves the running workflow p.ID on from p.Version; see
// store.Executor.
func (e executor) AdvanceWorkflow(ctx context.Context, now time.Time, p store.AdvanceParams) (*weirtype.Workflow, error) {
	const op = "advance workflow"
	if p.Status == "" {
		p.Status = weirtype.WorkflowRunning
	}
	if err := store.FirstError(p.Validate(), checkNow(now)); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	var wf *weirtype.Workflow
	err := e.write(ctx, func(tx *sql.Tx) error {
		// The history entry first, under the update's own condition: in
		// the one write transaction, it is written exactly when the
		// update below moves the workflow on, and it still reads the
		// state the workflow leaves.
		if _, err := tx.ExecContext(ctx, `INSERT INTO weir_workflow_transitions (workflow_id, version, from_state, state, status, error, at)
			SELECT id, version + 1, state, ?3, ?4, ?5, ?6 FROM weir_workflows WHERE id = ?1 AND version = ?2 AND status = 'running'`,
			p.ID, p.Version, p.State, string(p.Status), p.Error, encodeTime(now)); err != nil {
			return fmt.Errorf("record the transition: %w", err)
		}
		var err error
		wf, err = scanWorkflow(tx.QueryRowContext(ctx, `UPDATE weir_workflows
			SET state = ?3, status = ?4, data = ?5, error = ?6, version = version + 1, updated_at = ?7
			WHERE id = ?1 AND version = ?2 AND status = 'running'
			RETURNING `+workflowColumns, p.ID, p.Version, p.State, string(p.Status), p.Data, p.Error, encodeTime(now)))
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var version int64
		var status string
		switch err := tx.QueryRowContext(ctx, `SELECT version, status FROM weir_workflows WHERE id = ?1`, p.ID).Scan(&version, &status); {
		case errors.Is(err, sql.ErrNoRows):
			return store.ErrNotFound
		case err != nil:
			return err
		}
		return fmt.Errorf("%w: it is %s at version %d, not running at version %d", store.ErrConflict, status, version, p.Version)
	})
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", op, p.ID, err)
	}
	return wf, nil
}

// ListWorkflows returns the workflows that match f, lowest id first.
func (e executor) ListWorkflows(ctx context.Context, f store.WorkflowFilter) ([]*weirtype.Workflow, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	var c conds
	if f.Name != "" {
		c.add("name = ?", f.Name)
	}
	if f.Status != "" {
		c.add("status = ?", string(f.Status))
	}
	if !f.UpdatedBefore.IsZero() {
		if err := checkTime("updated before", f.UpdatedBefore); err != nil {
			return nil, fmt.Errorf("list workflows: %w", err)
		}
		c.add("updated_at < ?", encodeTime(f.UpdatedBefore))
	}
	if f.AfterID != "" {
		c.add("id > ?", f.AfterID)
	}
	wfs, err := queryPage(ctx, e.reader(), `SELECT `+workflowColumns+` FROM weir_workflows`+c.where()+" ORDER BY id", c.args, f.Limit, scanWorkflow)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	return wfs, nil
}

// ListWorkflowTransitions returns the history of the workflow id, by
// version; see store.Executor.
func (e executor) ListWorkflowTransitions(ctx context.Context, id string, afterVersion int64, limit int) ([]*store.WorkflowTransition, error) {
	if err := store.CheckHistoryPage(afterVersion, limit); err != nil {
		return nil, fmt.Errorf("list workflow transitions: %w", err)
	}
	ts, err := queryPage(ctx, e.reader(), `SELECT workflow_id, version, from_state, state, status, error, at FROM weir_workflow_transitions
		WHERE workflow_id = ?1 AND version > ?2 ORDER BY version`, []any{id, afterVersion}, limit, func(row scanner) (*store.WorkflowTransition, error) {
		var (
			t      store.WorkflowTransition
			status string
			at     sql.NullInt64
		)
		if err := row.Scan(&t.WorkflowID, &t.Version, &t.FromState, &t.State, &status, &t.Error, &at); err != nil {
			return nil, err
		}
		t.Status, t.At = weirtype.WorkflowStatus(status), decodeTime(at)
		return &t, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list workflow transitions %s: %w", id, err)
	}
	return ts, nil
}

// scanWorkflow reads one row of workflowColumns. It returns
// sql.ErrNoRows, unwrapped, when a *sql.Row has none.
func scanWorkflow(row scanner) (*weirtype.Workflow, error) {
	var (
		wf               weirtype.Workflow
		status           string
		created, updated sql.NullInt64
	)
	if err := row.Scan(&wf.ID, &wf.Name, &wf.State, &status, &wf.Data, &wf.Version, &wf.Error, &created, &updated); err != nil {
		return nil, err
	}
	wf.Status = weirtype.WorkflowStatus(status)
	wf.CreatedAt, wf.UpdatedAt = decodeTime(created), decodeTime(updated)
	return &wf, nil
}

// effectColumns are weir_effects' columns in the order scanEffect reads
// them.
const effectColumns = `txn, series, ordinal, attempts, started_at, finished_at, result`

// BeginEffect begins the effect k, or returns its record; see
// store.Executor. SQLite's one writer makes the read and the write one
// step.
func (e executor) BeginEffect(ctx context.Context, now time.Time, k store.EffectKey) (*weirtype.Effect, bool, error) {
	const op = "begin effect"
	if err := store.FirstError(k.Validate(), checkNow(now)); err != nil {
		return nil, false, fmt.Errorf("%s: %w", op, err)
	}
	var (
		rec   *weirtype.Effect
		begun bool
	)
	err := e.write(ctx, func(tx *sql.Tx) error {
		get := func() (err error) {
			rec, err = scanEffect(tx.QueryRowContext(ctx, `SELECT `+effectColumns+` FROM weir_effects WHERE txn = ?1 AND series = ?2 AND ordinal = ?3`,
				k.Txn, k.Series, k.Ordinal))
			return err
		}
		switch err := get(); {
		case errors.Is(err, sql.ErrNoRows):
			if _, err := tx.ExecContext(ctx, `INSERT INTO weir_effects (txn, series, ordinal, attempts, started_at) VALUES (?1, ?2, ?3, 1, ?4)`,
				k.Txn, k.Series, k.Ordinal, encodeTime(now)); err != nil {
				return err
			}
			begun = true
		case err != nil:
			return err
		case rec.Finished():
			return nil
		default: // begun before and cut short: one more attempt
			if _, err := tx.ExecContext(ctx, `UPDATE weir_effects SET attempts = attempts + 1 WHERE txn = ?1 AND series = ?2 AND ordinal = ?3`,
				k.Txn, k.Series, k.Ordinal); err != nil {
				return err
			}
		}
		return get()
	})
	if err != nil {
		return nil, false, fmt.Errorf("%s %s/%s/%d: %w", op, k.Txn, k.Series, k.Ordinal, err)
	}
	return rec, begun, nil
}

// FinishEffect records the result of the begun effect k; see
// store.Executor.
func (e executor) FinishEffect(ctx context.Context, now time.Time, k store.EffectKey, result string) (*weirtype.Effect, error) {
	const op = "finish effect"
	if err := store.FirstError(k.Validate(), checkNow(now)); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	var rec *weirtype.Effect
	err := e.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE weir_effects SET finished_at = ?4, result = ?5
			WHERE txn = ?1 AND series = ?2 AND ordinal = ?3 AND finished_at IS NULL`, k.Txn, k.Series, k.Ordinal, encodeTime(now), result); err != nil {
			return err
		}
		var err error
		rec, err = scanEffect(tx.QueryRowContext(ctx, `SELECT `+effectColumns+` FROM weir_effects WHERE txn = ?1 AND series = ?2 AND ordinal = ?3`,
			k.Txn, k.Series, k.Ordinal))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: it was never begun", store.ErrNotFound)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s %s/%s/%d: %w", op, k.Txn, k.Series, k.Ordinal, err)
	}
	return rec, nil
}

// ListEffects returns the effects of txn, by series then ordinal.
func (e executor) ListEffects(ctx context.Context, txn string) ([]*weirtype.Effect, error) {
	if err := store.CheckTxn(txn); err != nil {
		return nil, fmt.Errorf("list effects: %w", err)
	}
	recs, err := queryAll(ctx, e.reader(), `SELECT `+effectColumns+` FROM weir_effects WHERE txn = ?1 ORDER BY series, ordinal`,
		[]any{txn}, scanEffect)
	if err != nil {
		return nil, fmt.Errorf("list effects of %s: %w", txn, err)
	}
	return recs, nil
}

// CountEffects returns, for each series of txn, how many of its effects
// are finished.
func (e executor) CountEffects(ctx context.Context, txn string) (map[string]int, error) {
	if err := store.CheckTxn(txn); err != nil {
		return nil, fmt.Errorf("count effects: %w", err)
	}
	rows, err := e.reader().QueryContext(ctx, `SELECT series, count(*) FROM weir_effects WHERE txn = ?1 AND finished_at IS NOT NULL GROUP BY series`, txn)
	if err != nil {
		return nil, fmt.Errorf("count effects of %s: %w", txn, err)
	}
	defer rows.Close()
	counts := map[string]int{}
	for rows.Next() {
		var (
			series string
			n      int
		)
		if err := rows.Scan(&series, &n); err != nil {
			return nil, fmt.Errorf("count effects of %s: %w", txn, err)
		}
		counts[series] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count effects of %s: %w", txn, err)
	}
	return counts, nil
}

// scanEffect reads one row of effectColumns. It returns sql.ErrNoRows,
// unwrapped, when a *sql.Row has none.
func scanEffect(row scanner) (*weirtype.Effect, error) {
	var (
		rec               weirtype.Effect
		started, finished sql.NullInt64
		result            sql.NullString
	)
	if err := row.Scan(&rec.Txn, &rec.Series, &rec.Ordinal, &rec.Attempts, &started, &finished, &result); err != nil {
		return nil, err
	}
	rec.StartedAt, rec.FinishedAt, rec.Result = decodeTime(started), decodeTime(finished), result.String
	return &rec, nil
}
