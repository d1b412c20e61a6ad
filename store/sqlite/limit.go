package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// Limits live in weir_limits, one row per key, and weir_limit_kinds, the
// kinds that count against each (migration 0014). Claim reads them in its
// write transaction (loadLimits), so that no other claim, in this process
// or another, runs between its count of the running attempts and its
// claim: SQLite's one writer is the limit's lock.

// limitColumns are the columns scanLimit reads, in its order, of weir_limits
// l joined with weir_limit_kinds k.
const limitColumns = `l.key, l.max_running, l.rate, l.per, l.window_start, l.window_count, l.updated_at, k.kind`

// loadLimits reads every limit with each of its kinds, a row a kind.
const loadLimits = `SELECT ` + limitColumns + ` FROM weir_limits l JOIN weir_limit_kinds k ON k.key = l.key ORDER BY l.key, k.kind`

// countRunning counts the running attempts of the kinds in the JSON array
// ?1.
const countRunning = `SELECT count(*) FROM weir_jobs WHERE state = 'running' AND kind IN (SELECT value FROM json_each(?1))`

// claimLimits are the limits as one claim sees them: read at its start,
// counted as it takes jobs, and their rate windows written at its end.
type claimLimits struct {
	keys    []*weirtype.Limit          // by key
	byKind  map[string]*weirtype.Limit // each kind's limit
	counted map[*weirtype.Limit]bool   // Running was read
	dirty   map[*weirtype.Limit]bool   // the rate window changed
}

// loadLimits reads the limits in tx.
func (e executor) loadLimits(ctx context.Context, tx *sql.Tx) (*claimLimits, error) {
	rows, err := e.s.stmts.query(ctx, tx, loadLimits)
	if err != nil {
		return nil, err
	}
	ls, err := scanLimits(rows)
	if err != nil {
		return nil, err
	}
	c := &claimLimits{keys: ls, byKind: map[string]*weirtype.Limit{}, counted: map[*weirtype.Limit]bool{}, dirty: map[*weirtype.Limit]bool{}}
	for _, l := range ls {
		for _, k := range l.Kinds {
			c.byKind[k] = l
		}
	}
	return c, nil
}

// room returns how many attempts of l may start at now, up to want,
// reading l's running attempts first if it limits them.
func (c *claimLimits) room(ctx context.Context, e executor, tx *sql.Tx, l *weirtype.Limit, now time.Time, want int) (int, error) {
	if l.MaxRunning > 0 && !c.counted[l] {
		if err := e.s.stmts.queryRow(ctx, tx, countRunning, kindList(l.Kinds)).Scan(&l.Running); err != nil {
			return 0, fmt.Errorf("count the running jobs of limit %q: %w", l.Key, err)
		}
		c.counted[l] = true
	}
	return store.LimitRoom(l, now, want), nil
}

// took counts n attempts of l started at now.
func (c *claimLimits) took(l *weirtype.Limit, now time.Time, n int) {
	if n == 0 {
		return
	}
	l.Running += n
	if l.Rate > 0 {
		if w := store.LimitWindow(now, l.Per); l.WindowStart.IsZero() || l.WindowStart.Before(w) {
			l.WindowStart, l.WindowStarts = w, 0
		}
		l.WindowStarts += n
		c.dirty[l] = true
	}
}

// record writes, in tx, the rate windows the claim counted in.
func (c *claimLimits) record(ctx context.Context, tx *sql.Tx, now time.Time) error {
	for l := range c.dirty {
		if _, err := tx.ExecContext(ctx, `UPDATE weir_limits SET window_start = ?1, window_count = ?2 WHERE key = ?3`,
			encodeTime(l.WindowStart), l.WindowStarts, l.Key); err != nil {
			return fmt.Errorf("count the starts of limit %q: %w", l.Key, err)
		}
	}
	return nil
}

// claimUnderLimits claims, in tx, up to want jobs of p.Queue of the
// limited kinds, each limit in turn as far as it allows.
func (e executor) claimUnderLimits(ctx context.Context, tx *sql.Tx, p store.ClaimParams, c *claimLimits, want int) ([]*weirtype.Job, error) {
	var jobs []*weirtype.Job
	for _, l := range c.keys {
		if len(jobs) == want {
			break
		}
		n, err := c.room(ctx, e, tx, l, p.Now, want-len(jobs))
		if err != nil || n == 0 {
			if err != nil {
				return nil, err
			}
			continue
		}
		rows, err := e.s.stmts.query(ctx, tx, claimLimited,
			encodeTime(p.Now), p.Owner, encodeTime(p.Now.Add(p.LeaseFor)), p.Queue, n, kindList(l.Kinds))
		if err != nil {
			return nil, err
		}
		got, err := scanJobs(rows, n)
		if err != nil {
			return nil, err
		}
		c.took(l, p.Now, len(got))
		jobs = append(jobs, got...)
	}
	return jobs, nil
}

// kindList is kinds as a JSON array, for json_each.
func kindList(kinds []string) string {
	b, _ := json.Marshal(kinds) // strings always marshal
	return string(b)
}

// scanLimits reads and closes rows of limitColumns sorted by key, a row a
// kind, into one Limit a key.
func scanLimits(rows *sql.Rows) ([]*weirtype.Limit, error) {
	defer rows.Close()
	var out []*weirtype.Limit
	for rows.Next() {
		var (
			l               weirtype.Limit
			per             int64
			kind            string
			window, updated sql.NullInt64
		)
		if err := rows.Scan(&l.Key, &l.MaxRunning, &l.Rate, &per, &window, &l.WindowStarts, &updated, &kind); err != nil {
			return nil, err
		}
		if n := len(out); n > 0 && out[n-1].Key == l.Key {
			out[n-1].Kinds = append(out[n-1].Kinds, kind)
			continue
		}
		l.Per = time.Duration(per) * time.Microsecond
		l.WindowStart, l.UpdatedAt = decodeTime(window), decodeTime(updated)
		l.Kinds = []string{kind}
		out = append(out, &l)
	}
	return out, rows.Err()
}

// SetLimit records the limit p at now; see store.Limits.
func (e executor) SetLimit(ctx context.Context, now time.Time, p store.LimitParams) (*weirtype.Limit, error) {
	p, err := p.Normalize()
	if err == nil {
		err = checkNow(now)
	}
	if err != nil {
		return nil, fmt.Errorf("set limit: %w", err)
	}
	var out *weirtype.Limit
	err = e.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO weir_limits (key, max_running, rate, per, updated_at)
			VALUES (?1, ?2, ?3, ?4, ?5)
			ON CONFLICT (key) DO UPDATE SET
				max_running = excluded.max_running,
				rate = excluded.rate,
				window_start = CASE WHEN weir_limits.per = excluded.per THEN weir_limits.window_start END,
				window_count = CASE WHEN weir_limits.per = excluded.per THEN weir_limits.window_count ELSE 0 END,
				per = excluded.per,
				updated_at = excluded.updated_at`,
			p.Key, p.MaxRunning, p.Rate, p.Per.Microseconds(), encodeTime(now)); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO weir_limit_kinds (kind, key)
			SELECT value, ?1 FROM json_each(?2) WHERE true
			ON CONFLICT (kind) DO UPDATE SET key = excluded.key`, p.Key, kindList(p.Kinds)); err != nil {
			return err
		}
		if err := dropEmptyLimits(ctx, tx); err != nil {
			return err
		}
		ls, err := listLimits(ctx, tx, p.Key)
		if err != nil {
			return err
		}
		out = ls[0]
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("set limit %q: %w", p.Key, err)
	}
	return out, nil
}

// Unlimit makes kinds count against no limit; see store.Limits.
func (e executor) Unlimit(ctx context.Context, kinds []string) (int, error) {
	if err := store.CheckUnlimit(kinds); err != nil {
		return 0, err
	}
	var n int64
	err := e.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM weir_limit_kinds WHERE kind IN (SELECT value FROM json_each(?1))`, kindList(kinds))
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		return dropEmptyLimits(ctx, tx)
	})
	if err != nil {
		return 0, fmt.Errorf("unlimit: %w", err)
	}
	return int(n), nil
}

// dropEmptyLimits removes, in tx, the limits without kinds.
func dropEmptyLimits(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `DELETE FROM weir_limits WHERE key NOT IN (SELECT key FROM weir_limit_kinds)`)
	return err
}

// ListLimits returns the limits with their running attempts; see
// store.Limits.
func (e executor) ListLimits(ctx context.Context) ([]*weirtype.Limit, error) {
	ls, err := listLimits(ctx, e.reader(), "")
	if err != nil {
		return nil, fmt.Errorf("list limits: %w", err)
	}
	return ls, nil
}

// listLimits reads the limits (only key's, unless it is empty) with the
// attempts of their kinds running.
func listLimits(ctx context.Context, q querier, key string) ([]*weirtype.Limit, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+limitColumns+` FROM weir_limits l JOIN weir_limit_kinds k ON k.key = l.key
		WHERE ?1 = '' OR l.key = ?1 ORDER BY l.key, k.kind`, key)
	if err != nil {
		return nil, err
	}
	ls, err := scanLimits(rows)
	if err != nil {
		return nil, err
	}
	for _, l := range ls {
		if err := q.QueryRowContext(ctx, countRunning, kindList(l.Kinds)).Scan(&l.Running); err != nil {
			return nil, err
		}
	}
	return ls, nil // by key in SQLite's binary order, which is Go's
}
