package sqlite

import (
	"bytes"
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

// setProgress records the progress ?5 (JSON) of the job of a lease still
// held.
const setProgress = `UPDATE weir_jobs SET progress = ?5, updated_at = ?1
	` + leaseGuard + `
	RETURNING id`

// completeOutput completes the job of a lease still held with the output
// ?5 (JSON, or NULL for none).
const completeOutput = `UPDATE weir_jobs SET
	state = 'completed', finalized_at = ?1, updated_at = ?1, lease_owner = '', lease_expires_at = NULL, output = ?5
	` + leaseGuard + `
	RETURNING id`

// SetProgress records p as the progress of the job of lease l; see
// store.Results.
func (e executor) SetProgress(ctx context.Context, now time.Time, l store.Lease, p weirtype.Progress) error {
	p.Attempt, p.At = l.Attempt, storedTime(now)
	if err := store.FirstError(l.Validate(), checkNow(now), p.Validate()); err != nil {
		return fmt.Errorf("set the progress of job %d: %w", l.ID, err)
	}
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("set the progress of job %d: %w", l.ID, weirtype.Invalidf("progress: %v", err))
	}
	err = e.write(ctx, func(tx *sql.Tx) error {
		_, err := guardedScan(ctx, e, tx, setProgress, now, l, scanID, string(b))
		return err
	})
	if err != nil {
		return fmt.Errorf("set the progress of job %d: %w", l.ID, err)
	}
	return nil
}

// CompleteOutputs completes the jobs of the completions whose leases are
// still held, each with its output, in one write transaction; see
// store.Results.
func (e executor) CompleteOutputs(ctx context.Context, now time.Time, cs []store.Completion) ([]int64, error) {
	if err := store.FirstError(store.CheckCompletions(cs), checkNow(now)); err != nil {
		return nil, fmt.Errorf("complete jobs: %w", err)
	}
	if len(cs) == 0 {
		return nil, nil
	}
	var lost []int64
	err := e.write(ctx, func(tx *sql.Tx) error {
		lost = lost[:0]
		for _, c := range cs {
			_, err := guardedScan(ctx, e, tx, completeOutput, now, c.Lease, scanID, outputArg(c.Output))
			switch {
			case errors.Is(err, store.ErrLeaseLost):
				if !slices.Contains(lost, c.Lease.ID) {
					lost = append(lost, c.Lease.ID)
				}
			case err != nil:
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("complete %d jobs: %w", len(cs), err)
	}
	return lost, nil
}

// outputArg is an output as the output column keeps it: NULL for none
// (empty, or JSON null), its text otherwise.
func outputArg(output json.RawMessage) any {
	if len(output) == 0 || bytes.Equal(bytes.TrimSpace(output), []byte("null")) {
		return nil
	}
	return string(output)
}

// decodeProgress reads a progress column: nil for NULL.
func decodeProgress(s sql.NullString) (*weirtype.Progress, error) {
	if !s.Valid {
		return nil, nil
	}
	var p weirtype.Progress
	if err := json.Unmarshal([]byte(s.String), &p); err != nil {
		return nil, err
	}
	p.At = p.At.UTC()
	return &p, nil
}
