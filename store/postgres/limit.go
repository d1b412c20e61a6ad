package postgres

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// Limits live in weir_limits, one row per key, and weir_limit_kinds, the
// kinds that count against each (migrations 0013 and 0014). weir_claim
// obeys them: weir_limit_room holds an advisory lock on a limit's key for
// the rest of the claim's transaction while it counts the running
// attempts of its kinds, so that concurrent claims count one after
// another.

// SetLimit records the limit p at now; see store.Limits.
func (e executor) SetLimit(ctx context.Context, now time.Time, p store.LimitParams) (*weirtype.Limit, error) {
	const op = "set limit"
	p, err := p.Normalize()
	if err != nil {
		return nil, refuse(op, err)
	}
	if err := refuse(op, store.CheckNow(now)); err != nil {
		return nil, err
	}
	schema := e.s.sql.schema
	var out *weirtype.Limit
	err = e.runTx(ctx, func(q querier) error {
		if err := lockLimits(ctx, q, schema); err != nil {
			return err
		}
		if _, err := q.Exec(ctx, `INSERT INTO `+schema+`.weir_limits AS l (key, max_running, rate, per, updated_at)
VALUES ($1, $2, $3, $4, $5::timestamptz)
ON CONFLICT (key) DO UPDATE SET
	max_running = excluded.max_running,
	rate = excluded.rate,
	window_start = CASE WHEN l.per = excluded.per THEN l.window_start END,
	window_count = CASE WHEN l.per = excluded.per THEN l.window_count ELSE 0 END,
	per = excluded.per,
	running_bound = -1,
	updated_at = excluded.updated_at`,
			p.Key, p.MaxRunning, p.Rate, p.Per.Microseconds(), micro(now)); err != nil {
			return err
		}
		if _, err := q.Exec(ctx, `INSERT INTO `+schema+`.weir_limit_kinds (kind, key)
SELECT unnest($2::text[]), $1
ON CONFLICT (kind) DO UPDATE SET key = excluded.key`, p.Key, p.Kinds); err != nil {
			return err
		}
		if err := dropEmptyLimits(ctx, q, schema); err != nil {
			return err
		}
		ls, err := listLimits(ctx, q, schema, p.Key)
		if err != nil {
			return err
		}
		out = ls[0]
		return nil
	})
	if err != nil {
		return nil, dbError(op, err)
	}
	return out, nil
}

// Unlimit makes kinds count against no limit; see store.Limits.
func (e executor) Unlimit(ctx context.Context, kinds []string) (int, error) {
	const op = "unlimit"
	if err := store.CheckUnlimit(kinds); err != nil {
		return 0, refuse(op, err)
	}
	schema := e.s.sql.schema
	var n int64
	err := e.runTx(ctx, func(q querier) error {
		if err := lockLimits(ctx, q, schema); err != nil {
			return err
		}
		tag, err := q.Exec(ctx, `DELETE FROM `+schema+`.weir_limit_kinds WHERE kind = ANY ($1::text[])`, kinds)
		if err != nil {
			return err
		}
		if n = tag.RowsAffected(); n == 0 {
			return nil
		}
		return dropEmptyLimits(ctx, q, schema)
	})
	if err != nil {
		return 0, dbError(op, err)
	}
	return int(n), nil
}

// lockLimits waits for the claims under way and holds off the next ones
// until the transaction ends (see weir_limits_lock), so that no claim
// takes a kind under limits older than the change.
func lockLimits(ctx context.Context, q querier, schema string) error {
	_, err := q.Exec(ctx, `SELECT `+schema+`.weir_limits_lock(true)`)
	return err
}

// dropEmptyLimits removes the limits without kinds.
func dropEmptyLimits(ctx context.Context, q querier, schema string) error {
	_, err := q.Exec(ctx, `DELETE FROM `+schema+`.weir_limits l
WHERE NOT EXISTS (SELECT 1 FROM `+schema+`.weir_limit_kinds k WHERE k.key = l.key)`)
	return err
}

// ListLimits returns the limits with their running attempts; see
// store.Limits.
func (e executor) ListLimits(ctx context.Context) ([]*weirtype.Limit, error) {
	var out []*weirtype.Limit
	err := e.run(ctx, func(q querier) error {
		var err error
		out, err = listLimits(ctx, q, e.s.sql.schema, "")
		return err
	})
	if err != nil {
		return nil, dbError("list limits", err)
	}
	return out, nil
}

// listLimits reads the limits (only key's, unless it is empty) with the
// attempts of their kinds running, by key in Go's order of strings.
func listLimits(ctx context.Context, q querier, schema, key string) ([]*weirtype.Limit, error) {
	out, err := queryAll(ctx, q, `SELECT l.key, l.max_running, l.rate, l.per, l.window_start, l.window_count, l.updated_at,
	array_agg(k.kind),
	(SELECT count(*) FROM `+schema+`.weir_jobs j WHERE j.state = 'running' AND j.kind = ANY (array_agg(k.kind)))
FROM `+schema+`.weir_limits l JOIN `+schema+`.weir_limit_kinds k ON k.key = l.key
WHERE $1 = '' OR l.key = $1
GROUP BY l.key`, []any{key}, scanLimit)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *weirtype.Limit) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// scanLimit reads one row of listLimits.
func scanLimit(row pgx.Row) (*weirtype.Limit, error) {
	var (
		l               pgtypeLimit
		window, updated pgtype.Timestamptz
	)
	err := row.Scan(&l.Key, &l.MaxRunning, &l.Rate, &l.per, &window, &l.WindowStarts, &updated, &l.Kinds, &l.running)
	if err != nil {
		return nil, err
	}
	l.Per = time.Duration(l.per) * time.Microsecond
	l.Running = int(l.running)
	if window.Valid {
		l.WindowStart = window.Time.UTC()
	}
	l.UpdatedAt = updated.Time.UTC()
	slices.Sort(l.Kinds)
	return &l.Limit, nil
}

// pgtypeLimit is a Limit with the columns that scan to other types.
type pgtypeLimit struct {
	weirtype.Limit
	per, running int64
}
