package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/weirhq/weir/store"
)

var _ store.Vacuumer = (*Store)(nil)

// vacuumCheck reads what autovacuum would read to decide on the table $1:
// its dead rows (the server's statistics), whether autovacuum runs for it
// (the server's setting and the table's autovacuum_enabled), and its
// threshold, autovacuum_vacuum_threshold + autovacuum_vacuum_scale_factor
// × reltuples, each setting the table's own when it has one. A table never
// vacuumed nor analyzed has reltuples -1, counted as 0, as autovacuum does.
// The CASEs keep a cast from reading another option's value.
const vacuumCheck = `SELECT coalesce(s.n_dead_tup, 0),
	current_setting('autovacuum')::boolean AND coalesce(o.enabled, true),
	(coalesce(o.threshold, current_setting('autovacuum_vacuum_threshold')::float8)
	 + coalesce(o.scale, current_setting('autovacuum_vacuum_scale_factor')::float8) * greatest(c.reltuples, 0))::bigint
FROM pg_class AS c
LEFT JOIN pg_stat_all_tables AS s ON s.relid = c.oid
CROSS JOIN LATERAL (SELECT
	bool_and(CASE WHEN option_name = 'autovacuum_enabled' THEN option_value::boolean END) AS enabled,
	max(CASE WHEN option_name = 'autovacuum_vacuum_threshold' THEN option_value::float8 END) AS threshold,
	max(CASE WHEN option_name = 'autovacuum_vacuum_scale_factor' THEN option_value::float8 END) AS scale
	FROM pg_options_to_table(c.reloptions)) AS o
WHERE c.oid = $1::regclass`

// VacuumJobs vacuums weir_jobs when the server's autovacuum does not (off
// on the server, or for the table with autovacuum_enabled = false) and
// its dead rows are more than the threshold autovacuum would apply; see
// store.Vacuumer. Without a vacuum the table and its indexes grow without
// end, by the dead version every claim, completion and delete leaves: a
// queue held full for ten minutes left 9.0 GB and 12 million dead rows
// without one, 6.2 GB and 1.3 million with this one. A store opened with
// Config.NoVacuum never vacuums. The vacuum runs on a connection of the
// pool, outside any transaction, and is cancelled with ctx; the table
// stays readable and writable meanwhile (VACUUM takes no lock that
// conflicts with weir's statements). While another vacuum of the table
// runs (another process's, the server's, an operator's) it vacuums
// nothing and reports no vacuum, rather than wait to do the same work
// again.
func (s *Store) VacuumJobs(ctx context.Context) (store.VacuumResult, error) {
	var res store.VacuumResult
	if s.noVacuum {
		return res, nil
	}
	table := pgx.Identifier{s.schema, "weir_jobs"}.Sanitize()
	var auto bool
	if err := s.pool.QueryRow(ctx, vacuumCheck, table).Scan(&res.Dead, &auto, &res.Threshold); err != nil {
		return res, dbError("check the job table's dead rows", err)
	}
	res.Autovacuum = auto
	if auto || res.Dead <= res.Threshold {
		return res, nil
	}
	start := time.Now()
	ran, err := s.vacuum(ctx, table)
	if err != nil {
		return res, fmt.Errorf("postgres: vacuum the job table: %w", err)
	}
	if ran {
		res.Vacuumed, res.Took = true, time.Since(start)
	}
	return res, nil
}

// vacuumLockWait is how long a vacuum waits for the table's lock before
// it leaves the table to the vacuum that holds it.
const vacuumLockWait = "100ms"

// vacuum vacuums table as autovacuum would: at its pace, sleeping
// autovacuum_vacuum_cost_delay each autovacuum_vacuum_cost_limit of work
// (2 ms each 200 by default; -1 is the plain vacuum's setting), where a
// VACUUM by hand runs unthrottled; and in one process, where a VACUUM by
// hand vacuums the indexes of a large table with parallel workers, each
// taking a core from the queue beside it. Unlike autovacuum it leaves
// the empty pages at the table's end: their truncation would lock out
// every claim and insert while it checks them, and the next inserts fill
// them anyway. While another vacuum holds the table it gives up after
// vacuumLockWait, and reports that it did not run (ran false, no error).
// The connection's settings are put back before it returns to the pool.
func (s *Store) vacuum(ctx context.Context, table string) (ran bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Release()
	_, err = conn.Exec(ctx, `SELECT set_config('vacuum_cost_delay', CASE WHEN d = '-1' THEN current_setting('vacuum_cost_delay') ELSE d END, false),
	set_config('vacuum_cost_limit', CASE WHEN l = '-1' THEN current_setting('vacuum_cost_limit') ELSE l END, false),
	set_config('lock_timeout', $1, false)
FROM (SELECT current_setting('autovacuum_vacuum_cost_delay') AS d, current_setting('autovacuum_vacuum_cost_limit') AS l) AS a`, vacuumLockWait)
	if err == nil {
		// VACUUM cannot run in a transaction, nor as a prepared statement.
		_, err = conn.Exec(ctx, "VACUUM (PARALLEL 0, TRUNCATE false) "+table, pgx.QueryExecModeSimpleProtocol)
	}
	// A connection left with these settings would slow a caller's VACUUM
	// and fail its lock waits.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	if _, rerr := conn.Exec(rctx, `RESET vacuum_cost_delay; RESET vacuum_cost_limit; RESET lock_timeout`, pgx.QueryExecModeSimpleProtocol); rerr != nil {
		conn.Conn().PgConn().Close(rctx) //nolint:errcheck // the pool drops a closed connection
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" /* lock_not_available */ {
		return false, nil
	}
	return err == nil, err
}
