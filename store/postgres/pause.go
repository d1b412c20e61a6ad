package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// Pauses live in weir_pauses (migration 0012), one row per queue, kind
// ('' for the whole queue) and cause; weir_claim obeys them and takes the
// breakers' probes (see the migration).

// pauseColumns are the columns scanPause reads, in its order.
const pauseColumns = `queue, kind, cause, paused_by, reason, paused_at, until_at`

// endProbes is a CTE, named ended, that ends the breaker pauses of schema
// whose probe is among the jobs the CTE from completed.
func endProbes(schema, from string) string {
	return `ended AS (
	DELETE FROM ` + schema + `.weir_pauses WHERE cause = 'breaker' AND probe_job IN (SELECT id FROM ` + from + `)
)`
}

// Pause records the pause p at now; see store.Pauses.
func (e executor) Pause(ctx context.Context, now time.Time, p store.PauseParams) (*weirtype.Pause, error) {
	const op = "pause"
	p, err := p.Normalize(now)
	if err != nil {
		return nil, refuse(op, err)
	}
	schema := e.s.sql.schema
	now = micro(now)
	var openFor int64
	if p.Cause == weirtype.PauseBreaker {
		openFor = micro(p.Until).Sub(now).Microseconds()
	}
	var out *weirtype.Pause
	err = e.runTx(ctx, func(q querier) error {
		if p.Kind != "" && !p.KnownKind {
			var found bool
			err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+schema+`.weir_jobs WHERE queue = $1 AND kind = $2)`, p.Queue, p.Kind).Scan(&found)
			if err != nil {
				return dbError(op, err)
			}
			if !found {
				return fmt.Errorf("postgres: %s: %w: queue %q has no job of kind %q", op, store.ErrNotFound, p.Queue, p.Kind)
			}
		}
		if p.Kind == "" && !p.KnownQueue {
			var found bool
			err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+schema+`.weir_jobs WHERE queue = $1)
	OR EXISTS (SELECT 1 FROM `+schema+`.weir_pauses WHERE queue = $1)`, p.Queue).Scan(&found)
			if err != nil {
				return dbError(op, err)
			}
			if !found {
				return fmt.Errorf("postgres: %s: %w: queue %q has no job and no pause", op, store.ErrNotFound, p.Queue)
			}
		}
		var err error
		out, err = scanPause(q.QueryRow(ctx, `INSERT INTO `+schema+`.weir_pauses AS w
	(queue, kind, cause, paused_by, reason, paused_at, until_at, open_for)
VALUES ($2, $3, $4, $5, $6, $1::timestamptz, $7::timestamptz, $8::bigint)
ON CONFLICT (queue, kind, cause) DO UPDATE SET
	paused_by = excluded.paused_by,
	reason = excluded.reason,
	paused_at = CASE WHEN w.cause <> 'retry_after' OR w.until_at > $1::timestamptz THEN w.paused_at ELSE $1::timestamptz END,
	until_at = CASE WHEN w.cause = 'retry_after' AND w.until_at > excluded.until_at THEN w.until_at ELSE excluded.until_at END,
	open_for = excluded.open_for,
	probe_job = 0
RETURNING `+pauseColumns,
			now, p.Queue, p.Kind, string(p.Cause), p.By, p.Reason, nullTime(micro(p.Until)), openFor))
		if err != nil {
			return dbError(op, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Resume ends the pauses of queue and kind by cause; see store.Pauses.
func (e executor) Resume(ctx context.Context, queue, kind string, cause weirtype.PauseCause) ([]*weirtype.Pause, error) {
	const op = "resume"
	if queue == "" {
		return nil, invalid(op, "queue is empty")
	}
	var out []*weirtype.Pause
	err := e.run(ctx, func(q querier) error {
		var err error
		out, err = queryAll(ctx, q, `DELETE FROM `+e.s.sql.schema+`.weir_pauses
WHERE queue = $1 AND kind = $2 AND ($3 = '' OR cause = $3)
RETURNING `+pauseColumns, []any{queue, kind, string(cause)}, scanPause)
		return err
	})
	if err != nil {
		return nil, dbError(op, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("postgres: %s: %w", op, store.NotPaused(queue, kind, cause))
	}
	store.SortPauses(out)
	return out, nil
}

// ListPauses returns the pauses that hold at now; see store.Pauses.
func (e executor) ListPauses(ctx context.Context, now time.Time) ([]*weirtype.Pause, error) {
	const op = "list pauses"
	if err := refuse(op, store.CheckNow(now)); err != nil {
		return nil, err
	}
	var out []*weirtype.Pause
	err := e.run(ctx, func(q querier) error {
		var err error
		out, err = queryAll(ctx, q, `SELECT `+pauseColumns+` FROM `+e.s.sql.schema+`.weir_pauses
WHERE cause <> 'retry_after' OR until_at > $1::timestamptz ORDER BY queue, kind, cause`, []any{micro(now)}, scanPause)
		return err
	})
	if err != nil {
		return nil, dbError(op, err)
	}
	store.SortPauses(out) // by Go's order of strings, not the collation's
	return out, nil
}

// scanPause reads one row of pauseColumns.
func scanPause(row pgx.Row) (*weirtype.Pause, error) {
	var (
		p     weirtype.Pause
		cause string
		until pgtype.Timestamptz
	)
	if err := row.Scan(&p.Queue, &p.Kind, &cause, &p.By, &p.Reason, &p.PausedAt, &until); err != nil {
		return nil, err
	}
	p.Cause = weirtype.PauseCause(cause)
	p.PausedAt, p.Until = p.PausedAt.UTC(), fromNull(until)
	return &p, nil
}
