package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/store"
)

// The retention sweep's statements. Each reads weir_jobs_finalized (kind,
// finalized_at, of the completed and cancelled jobs only), named with
// INDEXED BY: the planner would otherwise read weir_jobs_state, every
// finished job, and sort them. The statements repeat the partial index's
// WHERE clause, which SQLite needs to use it.
const (
	// finalJobKinds walks the index from kind to kind, one probe each,
	// rather than read every final job: a loose index scan.
	finalJobKinds = `WITH RECURSIVE k(kind) AS (
		SELECT (SELECT kind FROM weir_jobs INDEXED BY weir_jobs_finalized WHERE state IN ('completed', 'cancelled') ORDER BY kind LIMIT 1)
		UNION ALL
		SELECT (SELECT kind FROM weir_jobs INDEXED BY weir_jobs_finalized WHERE state IN ('completed', 'cancelled') AND kind > k.kind ORDER BY kind LIMIT 1)
		FROM k WHERE k.kind IS NOT NULL)
	SELECT kind FROM k WHERE kind IS NOT NULL`
	// purgeFinalJobs deletes up to ?3 jobs of kind ?1 finalized before ?2,
	// oldest first.
	purgeFinalJobs = `DELETE FROM weir_jobs WHERE id IN (
		SELECT id FROM weir_jobs INDEXED BY weir_jobs_finalized
		WHERE state IN ('completed', 'cancelled') AND kind = ?1 AND finalized_at < ?2
		ORDER BY finalized_at LIMIT ?3)`
	// takeSweepLease takes the lease ?1 for ?2 until ?3, or renews it,
	// unless another owner's lasts past ?4; it returns a row only when ?2
	// holds it.
	takeSweepLease = `INSERT INTO weir_sweep_leases (name, owner, expires_at) VALUES (?1, ?2, ?3)
	ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
		WHERE weir_sweep_leases.owner = excluded.owner OR weir_sweep_leases.expires_at <= ?4
	RETURNING owner`
)

// TakeSweepLease takes or renews the lease name for owner; see
// store.Retention.
func (e executor) TakeSweepLease(ctx context.Context, now time.Time, name, owner string, leaseFor time.Duration) (bool, error) {
	err := store.FirstError(store.CheckSweepLease(now, name, owner, leaseFor), checkNow(now), checkTime("lease expiry", now.Add(leaseFor)))
	if err != nil {
		return false, fmt.Errorf("take the sweep lease %q: %w", name, err)
	}
	held := false
	err = e.write(ctx, func(tx *sql.Tx) error {
		var got string
		err := tx.QueryRowContext(ctx, takeSweepLease, name, owner, encodeTime(now.Add(leaseFor)), encodeTime(now)).Scan(&got)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			held = false
			return nil
		case err != nil:
			return err
		}
		held = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("take the sweep lease %q: %w", name, err)
	}
	return held, nil
}

// FinalJobKinds returns the kinds of the completed and cancelled jobs;
// see store.Retention.
func (e executor) FinalJobKinds(ctx context.Context) ([]string, error) {
	kinds, err := queryAll(ctx, e.reader(), finalJobKinds, nil, func(rows scanner) (string, error) {
		var k string
		err := rows.Scan(&k)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("list the kinds of final jobs: %w", err)
	}
	return kinds, nil
}

// PurgeJobs deletes up to p.Limit completed or cancelled jobs of p.Kind
// finalized before p.Before, in one write transaction; see
// store.Retention.
func (e executor) PurgeJobs(ctx context.Context, p store.PurgeJobsParams) (int, error) {
	if err := store.FirstError(p.Validate(), checkTime("before", p.Before)); err != nil {
		return 0, fmt.Errorf("purge jobs: %w", err)
	}
	var n int64
	err := e.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, purgeFinalJobs, p.Kind, encodeTime(ceilMicro(p.Before)), p.Limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("purge jobs of kind %q: %w", p.Kind, err)
	}
	return int(n), nil
}

// ceilMicro is t rounded up to a whole microsecond: for a stored time c,
// c < ceilMicro(t) exactly when c < t, though encodeTime rounds down.
func ceilMicro(t time.Time) time.Time {
	c := t.Truncate(time.Microsecond)
	if c.Before(t) {
		c = c.Add(time.Microsecond)
	}
	return c
}
