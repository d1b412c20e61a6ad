package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir/store"
)

// retentionQueries are the retention sweep's statements. Each reads
// weir_jobs_finalized (kind, finalized_at, of the completed and cancelled
// jobs only).
type retentionQueries struct {
	finalKinds, purge, takeLease string
}

func newRetentionQueries(schema string) retentionQueries {
	jobs := schema + `.weir_jobs`
	return retentionQueries{
		// A loose index scan: one probe of the index per kind, rather
		// than a read of every final job.
		finalKinds: `WITH RECURSIVE k(kind) AS (
	SELECT (SELECT kind FROM ` + jobs + ` WHERE state IN ('completed', 'cancelled') ORDER BY kind LIMIT 1)
	UNION ALL
	SELECT (SELECT j.kind FROM ` + jobs + ` AS j WHERE j.state IN ('completed', 'cancelled') AND j.kind > k.kind ORDER BY j.kind LIMIT 1)
	FROM k WHERE k.kind IS NOT NULL)
SELECT kind FROM k WHERE kind IS NOT NULL`,
		// The rows are locked, skipping those another transaction holds
		// (a retry of the job), and checked again once locked.
		purge: `DELETE FROM ` + jobs + ` WHERE id IN (
	SELECT id FROM ` + jobs + `
	WHERE state IN ('completed', 'cancelled') AND kind = $1 AND finalized_at < $2::timestamptz
	ORDER BY finalized_at LIMIT $3
	FOR UPDATE SKIP LOCKED)`,
		// Takes the lease $1 for $2 until $3, or renews it, unless
		// another owner's lasts past $4; a row comes back only when $2
		// holds it.
		takeLease: `INSERT INTO ` + schema + `.weir_sweep_leases AS l (name, owner, expires_at) VALUES ($1, $2, $3::timestamptz)
ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
	WHERE l.owner = excluded.owner OR l.expires_at <= $4::timestamptz
RETURNING owner`,
	}
}

// TakeSweepLease takes or renews the lease name for owner; see
// store.Retention.
func (e executor) TakeSweepLease(ctx context.Context, now time.Time, name, owner string, leaseFor time.Duration) (bool, error) {
	const op = "take sweep lease"
	if err := refuse(op, store.CheckSweepLease(now, name, owner, leaseFor)); err != nil {
		return false, err
	}
	q := newRetentionQueries(e.s.sql.schema)
	held := false
	err := e.run(ctx, func(db querier) error {
		var got string
		err := db.QueryRow(ctx, q.takeLease, name, owner, micro(now.Add(leaseFor)), micro(now)).Scan(&got)
		if errors.Is(err, pgx.ErrNoRows) {
			held = false
			return nil
		}
		held = err == nil
		return err
	})
	if err != nil {
		return false, dbError(op, err)
	}
	return held, nil
}

// FinalJobKinds returns the kinds of the completed and cancelled jobs;
// see store.Retention.
func (e executor) FinalJobKinds(ctx context.Context) ([]string, error) {
	const op = "list the kinds of final jobs"
	q := newRetentionQueries(e.s.sql.schema)
	var kinds []string
	err := e.run(ctx, func(db querier) error {
		rows, err := db.Query(ctx, q.finalKinds)
		if err != nil {
			return err
		}
		kinds, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, dbError(op, err)
	}
	return kinds, nil
}

// PurgeJobs deletes up to p.Limit completed or cancelled jobs of p.Kind
// finalized before p.Before, in one statement; see store.Retention.
func (e executor) PurgeJobs(ctx context.Context, p store.PurgeJobsParams) (int, error) {
	const op = "purge jobs"
	if err := refuse(op, p.Validate()); err != nil {
		return 0, err
	}
	q := newRetentionQueries(e.s.sql.schema)
	var n int64
	err := e.run(ctx, func(db querier) error {
		tag, err := db.Exec(ctx, q.purge, p.Kind, microCeil(p.Before), p.Limit)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, dbError(op, err)
	}
	return int(n), nil
}
