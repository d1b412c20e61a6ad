package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir/store"
)

var _ store.Vacuumer = (*Store)(nil)

// vacuumCheck reads what autovacuum would read to decide on the table $1:
// its dead rows (the server's statistics, with the count of its vacuums
// by hand), whether autovacuum runs for it
// (the server's setting and the table's autovacuum_enabled), and its
// threshold, autovacuum_vacuum_threshold + autovacuum_vacuum_scale_factor
// × reltuples, each setting the table's own when it has one. A table never
// vacuumed nor analyzed has reltuples -1, counted as 0, as autovacuum does.
// The CASEs keep a cast from reading another option's value.
const vacuumCheck = `SELECT coalesce(s.n_dead_tup, 0), coalesce(s.vacuum_count, 0),
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
	var (
		auto   bool
		before int64
	)
	if err := s.pool.QueryRow(ctx, vacuumCheck, table).Scan(&res.Dead, &before, &auto, &res.Threshold); err != nil {
		return res, dbError("check the job table's dead rows", err)
	}
	res.Autovacuum = auto
	if auto || res.Dead <= res.Threshold {
		return res, nil
	}
	start := time.Now()
	if err := s.vacuum(ctx, table); err != nil {
		return res, fmt.Errorf("postgres: vacuum the job table: %w", err)
	}
	// A vacuum that found the table locked skipped it (SKIP_LOCKED, with
	// a warning to the connection only); the count of the table's vacuums
	// says whether this one ran.
	var after int64
	if err := s.pool.QueryRow(ctx, `SELECT coalesce((SELECT vacuum_count FROM pg_stat_all_tables WHERE relid = $1::regclass), 0)`, table).Scan(&after); err != nil {
		return res, dbError("read the job table's vacuums", err)
	}
	if after > before {
		res.Vacuumed, res.Took = true, time.Since(start)
	}
	return res, nil
}

// vacuum vacuums table as autovacuum would: at its pace, sleeping
// autovacuum_vacuum_cost_delay each autovacuum_vacuum_cost_limit of work
// (2 ms each 200 by default; -1 is the plain vacuum's setting), where a
// VACUUM by hand runs unthrottled; and in one process, where a VACUUM by
// hand vacuums the indexes of a large table with parallel workers, each
// taking a core from the queue beside it. It skips the table, rather
// than wait, while another vacuum holds it. The connection's settings
// are put back before it returns to the pool.
func (s *Store) vacuum(ctx context.Context, table string) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	// VACUUM cannot run in a transaction, nor as a prepared statement.
	_, err = conn.Exec(ctx, `SELECT set_config('vacuum_cost_delay', CASE WHEN d = '-1' THEN current_setting('vacuum_cost_delay') ELSE d END, false),
	set_config('vacuum_cost_limit', CASE WHEN l = '-1' THEN current_setting('vacuum_cost_limit') ELSE l END, false)
FROM (SELECT current_setting('autovacuum_vacuum_cost_delay') AS d, current_setting('autovacuum_vacuum_cost_limit') AS l) AS a`)
	if err == nil {
		_, err = conn.Exec(ctx, "VACUUM (PARALLEL 0, SKIP_LOCKED) "+table, pgx.QueryExecModeSimpleProtocol)
	}
	// A connection left with the pace set would slow a caller's VACUUM.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	if _, rerr := conn.Exec(rctx, `RESET vacuum_cost_delay; RESET vacuum_cost_limit`, pgx.QueryExecModeSimpleProtocol); rerr != nil {
		conn.Conn().PgConn().Close(rctx) //nolint:errcheck // the pool drops a closed connection
	}
	return err
}
