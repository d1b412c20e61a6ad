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

// Pauses live in weir_pauses (migration 0013), one row per queue, kind
// ('' for the whole queue) and cause. The claim reads them in its own
// statements (see claimJobs, claimProbe): a job is held while a row of its
// queue, of its kind or of the whole queue, is an operator's or a
// breaker's, or a retry_after whose until_at is after the claim's time.

// notPaused is the condition, on a row of weir_jobs in a claim whose time
// is ?1 and queue ?4, that no pause holds the job. A breaker's pause holds
// its kind here whatever its until_at: only claimProbe lets its probe
// through.
const notPaused = `NOT EXISTS (SELECT 1 FROM weir_pauses p
	WHERE p.queue = ?4 AND p.kind IN ('', weir_jobs.kind) AND (p.cause <> 'retry_after' OR p.until_at > ?1))`

// pauseColumns are the columns scanPause reads, in its order.
const pauseColumns = `queue, kind, cause, paused_by, reason, paused_at, until_at`

// upsertPause records a pause at ?1 (see store.Pauses.Pause); ?8 is the
// open period of a breaker's pause, in microseconds.
const upsertPause = `INSERT INTO weir_pauses (queue, kind, cause, paused_by, reason, paused_at, until_at, open_for)
	VALUES (?2, ?3, ?4, ?5, ?6, ?1, ?7, ?8)
	ON CONFLICT (queue, kind, cause) DO UPDATE SET
		paused_by = excluded.paused_by,
		reason = excluded.reason,
		paused_at = CASE WHEN weir_pauses.cause <> 'retry_after' OR weir_pauses.until_at > ?1
			THEN weir_pauses.paused_at ELSE ?1 END,
		until_at = CASE WHEN weir_pauses.cause = 'retry_after' AND weir_pauses.until_at > excluded.until_at
			THEN weir_pauses.until_at ELSE excluded.until_at END,
		open_for = excluded.open_for,
		probe_job = 0
	RETURNING ` + pauseColumns

// Pause records the pause p at now; see store.Pauses.
func (e executor) Pause(ctx context.Context, now time.Time, p store.PauseParams) (*weirtype.Pause, error) {
	p, err := p.Normalize(now)
	if err == nil {
		err = store.FirstError(checkNow(now), checkTime("until", p.Until))
	}
	if err != nil {
		return nil, fmt.Errorf("pause: %w", err)
	}
	var out *weirtype.Pause
	err = e.write(ctx, func(tx *sql.Tx) error {
		if p.Kind != "" && !p.KnownKind {
			var n int
			err := tx.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM weir_jobs WHERE queue = ?1 AND kind = ?2 LIMIT 1)`, p.Queue, p.Kind).Scan(&n)
			if err != nil {
				return err
			}
			if n == 0 {
				return fmt.Errorf("%w: queue %q has no job of kind %q", store.ErrNotFound, p.Queue, p.Kind)
			}
		}
		if p.Kind == "" && !p.KnownQueue {
			var found bool
			err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM weir_jobs WHERE queue = ?1)
	OR EXISTS (SELECT 1 FROM weir_pauses WHERE queue = ?1)`, p.Queue).Scan(&found)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("%w: queue %q has no job and no pause", store.ErrNotFound, p.Queue)
			}
		}
		var openFor int64
		if p.Cause == weirtype.PauseBreaker {
			openFor = p.Until.Sub(now).Microseconds()
		}
		out, err = scanPause(tx.QueryRowContext(ctx, upsertPause, encodeTime(now), p.Queue, p.Kind, string(p.Cause),
			p.By, p.Reason, encodeTime(p.Until), openFor))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pause queue %q kind %q: %w", p.Queue, p.Kind, err)
	}
	return out, nil
}

// Resume ends the pauses of queue and kind by cause; see store.Pauses.
func (e executor) Resume(ctx context.Context, queue, kind string, cause weirtype.PauseCause) ([]*weirtype.Pause, error) {
	if queue == "" {
		return nil, fmt.Errorf("resume: %w", weirtype.Invalidf("queue is empty"))
	}
	var out []*weirtype.Pause
	err := e.write(ctx, func(tx *sql.Tx) (err error) {
		out, err = queryAll(ctx, tx, `DELETE FROM weir_pauses WHERE queue = ?1 AND kind = ?2 AND (?3 = '' OR cause = ?3)
			RETURNING `+pauseColumns, []any{queue, kind, string(cause)}, scanPause)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("resume queue %q kind %q: %w", queue, kind, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("resume: %w", store.NotPaused(queue, kind, cause))
	}
	sortPauses(out)
	return out, nil
}

// ListPauses returns the pauses that hold at now; see store.Pauses.
func (e executor) ListPauses(ctx context.Context, now time.Time) ([]*weirtype.Pause, error) {
	if err := checkNow(now); err != nil {
		return nil, fmt.Errorf("list pauses: %w", err)
	}
	ps, err := queryAll(ctx, e.reader(), `SELECT `+pauseColumns+` FROM weir_pauses
		WHERE cause <> 'retry_after' OR until_at > ?1 ORDER BY queue, kind, cause`, []any{encodeTime(now)}, scanPause)
	if err != nil {
		return nil, fmt.Errorf("list pauses: %w", err)
	}
	return ps, nil
}

func sortPauses(ps []*weirtype.Pause) { store.SortPauses(ps) }

// scanPause reads one row of pauseColumns.
func scanPause(row scanner) (*weirtype.Pause, error) {
	var (
		p             weirtype.Pause
		cause         string
		pausedAt, end sql.NullInt64
	)
	if err := row.Scan(&p.Queue, &p.Kind, &cause, &p.By, &p.Reason, &pausedAt, &end); err != nil {
		return nil, err
	}
	p.Cause = weirtype.PauseCause(cause)
	p.PausedAt, p.Until = decodeTime(pausedAt), decodeTime(end)
	return &p, nil
}

// dueProbes are the kinds of queue ?2 whose breaker pause lets a probe
// through at ?1, with their open periods.
const dueProbes = `SELECT kind, open_for FROM weir_pauses
	WHERE queue = ?2 AND cause = 'breaker' AND until_at <= ?1 ORDER BY kind`

// claimProbe claims at ?1 for owner ?2 until ?3 the due job of queue ?4
// and kind ?5 that comes first in claim order, unless another pause (an
// operator's, a retry_after) holds the kind.
const claimProbe = `UPDATE weir_jobs SET
	state = 'running', attempt = attempt + 1, attempted_at = ?1, updated_at = ?1, lease_owner = ?2, lease_expires_at = ?3
	WHERE id = (
		SELECT id FROM weir_jobs
		WHERE queue = ?4 AND kind = ?5 AND (state = 'available' OR (state = 'scheduled' AND scheduled_at <= ?1))
			AND NOT EXISTS (SELECT 1 FROM weir_pauses p WHERE p.queue = ?4 AND p.kind IN ('', ?5)
				AND p.cause <> 'breaker' AND (p.cause = 'operator' OR p.until_at > ?1))
		ORDER BY priority DESC, scheduled_at, id LIMIT 1)
	RETURNING ` + jobColumns

// claimProbes takes, in tx, one probe of each kind of p.Queue whose
// breaker pause lets one through at p.Now (and whose limit, if any, lets
// one more start), up to p.Limit, and holds each such pause one open
// period more.
func (e executor) claimProbes(ctx context.Context, tx *sql.Tx, p store.ClaimParams, limits *claimLimits) ([]*weirtype.Job, error) {
	type due struct {
		kind    string
		openFor int64
	}
	dues, err := queryAll(ctx, tx, dueProbes, []any{encodeTime(p.Now), p.Queue}, func(row scanner) (due, error) {
		var d due
		err := row.Scan(&d.kind, &d.openFor)
		return d, err
	})
	if err != nil || len(dues) == 0 {
		return nil, err
	}
	var jobs []*weirtype.Job
	for _, d := range dues {
		if len(jobs) == p.Limit {
			break
		}
		l := limits.byKind[d.kind]
		if l != nil {
			room, err := limits.room(ctx, e, tx, l, p.Now, 1)
			if err != nil {
				return nil, err
			}
			if room == 0 {
				continue // the probe waits for the limit, as any attempt does
			}
		}
		j, err := scanJob(tx.QueryRowContext(ctx, claimProbe, encodeTime(p.Now), p.Owner, encodeTime(p.Now.Add(p.LeaseFor)), p.Queue, d.kind))
		if errors.Is(err, sql.ErrNoRows) {
			continue // nothing of the kind waits: the next job due is the probe
		}
		if err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE weir_pauses SET until_at = ?1, probe_job = ?2
			WHERE queue = ?3 AND kind = ?4 AND cause = 'breaker'`,
			encodeTime(p.Now.Add(time.Duration(d.openFor)*time.Microsecond)), j.ID, p.Queue, d.kind); err != nil {
			return nil, err
		}
		if l != nil {
			limits.took(l, p.Now, 1)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// endProbes ends, in tx, the breaker pauses whose probe is among the jobs
// ids just completed.
func (e executor) endProbes(ctx context.Context, tx *sql.Tx, ids []int64) error {
	_, err := e.s.stmts.exec(ctx, tx, `DELETE FROM weir_pauses WHERE cause = 'breaker' AND probe_job IN (SELECT value FROM json_each(?1))`, idList(ids))
	return err
}
