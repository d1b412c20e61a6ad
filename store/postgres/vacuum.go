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
// × reltuples; and the pace autovacuum would vacuum it at, its cost delay
// and limit (-1: the plain vacuum's setting). Each setting is the
// table's own when it has one. A table never vacuumed nor analyzed has
// reltuples -1, counted as 0, as autovacuum does. The CASEs keep a cast
// from reading another option's value.
const vacuumCheck = `SELECT coalesce(s.n_dead_tup, 0),
	current_setting('autovacuum')::boolean AND coalesce(o.enabled, true),
	(coalesce(o.threshold, current_setting('autovacuum_vacuum_threshold')::float8)
	 + coalesce(o.scale, current_setting('autovacuum_vacuum_scale_factor')::float8) * greatest(c.reltuples, 0))::bigint,
	coalesce(nullif(coalesce(o.delay, current_setting('autovacuum_vacuum_cost_delay')), '-1'), current_setting('vacuum_cost_delay')),
	coalesce(nullif(coalesce(o.cost_limit, current_setting('autovacuum_vacuum_cost_limit')), '-1'), current_setting('vacuum_cost_limit'))
FROM pg_class AS c
LEFT JOIN pg_stat_all_tables AS s ON s.relid = c.oid
CROSS JOIN LATERAL (SELECT
	bool_and(CASE WHEN option_name = 'autovacuum_enabled' THEN option_value::boolean END) AS enabled,
	max(CASE WHEN option_name = 'autovacuum_vacuum_threshold' THEN option_value::float8 END) AS threshold,
	max(CASE WHEN option_name = 'autovacuum_vacuum_scale_factor' THEN option_value::float8 END) AS scale,
	max(CASE WHEN option_name = 'autovacuum_vacuum_cost_delay' THEN option_value END) AS delay,
	max(CASE WHEN option_name = 'autovacuum_vacuum_cost_limit' THEN option_value END) AS cost_limit
	FROM pg_options_to_table(c.reloptions)) AS o
WHERE c.oid = $1::regclass`

// VacuumJobs vacuums weir_jobs when the server's autovacuum does not (off
// on the server, or for the table with autovacuum_enabled = false) and
// its dead rows are more than the threshold autovacuum would apply; see
// store.Vacuumer. Without a vacuum the table and its indexes grow without
// end, by the dead version every claim, completion and delete leaves: a
// queue held full for ten minutes left 9.0 GB and 12 million dead rows
// without one, 6.2 GB and 1.3 million with this one. A store opened with
// Config.NoVacuum, or after DisableVacuum, never vacuums.
//
// The vacuum runs on a connection of its own, opened with the pool's
// settings and closed after it (a vacuum lasts minutes on a large table:
// it takes none of the pool's connections), outside any transaction. It
// is cancelled on the server when ctx ends. The table stays readable and
// writable meanwhile: VACUUM takes no lock that weir's claims, inserts
// and completions wait for (weir's migrations do wait for it). While
// another vacuum of the table runs (another process's, the server's, an
// operator's), or another lock that conflicts with it is held (a
// migration, an index build), it gives up and reports no vacuum, rather
// than wait.
func (s *Store) VacuumJobs(ctx context.Context) (store.VacuumResult, error) {
	var res store.VacuumResult
	if s.noVacuum.Load() {
		return res, nil
	}
	table := pgx.Identifier{s.schema, "weir_jobs"}.Sanitize()
	var (
		auto         bool
		delay, limit string
	)
	if err := s.pool.QueryRow(ctx, vacuumCheck, table).Scan(&res.Dead, &auto, &res.Threshold, &delay, &limit); err != nil {
		return res, dbError("check the job table's dead rows", err)
	}
	res.Autovacuum = auto
	if auto || res.Dead <= res.Threshold {
		return res, nil
	}
	start := time.Now()
	ran, err := s.vacuum(ctx, table, map[string]string{
		"vacuum_cost_delay": delay, "vacuum_cost_limit": limit, "lock_timeout": vacuumLockWait,
	})
	if err != nil {
		return res, fmt.Errorf("postgres: vacuum the job table: %w", err)
	}
	if ran {
		res.Vacuumed, res.Took = true, time.Since(start)
	}
	return res, nil
}

// DisableVacuum turns VacuumJobs off, as Config.NoVacuum does for Open:
// for a store made with New. Call it before a client uses the store.
func (s *Store) DisableVacuum() { s.noVacuum.Store(true) }

// vacuumLockWait is how long a vacuum waits for the table's lock before
// it leaves the table to the vacuum (or the other lock) that holds it.
const vacuumLockWait = "100ms"

// vacuum vacuums table as autovacuum would: at its pace (settings holds
// its cost delay and limit, set on the connection), where a VACUUM by
// hand runs unthrottled; and in one process, where a VACUUM by hand
// vacuums the indexes of a large table with parallel workers, each taking
// a core from the queue beside it. Unlike autovacuum it leaves the empty
// pages at the table's end: their truncation would lock out every claim
// and insert while it checks them, and the next inserts fill them anyway.
// When a lock is not had within lock_timeout (settings) it reports that
// it did not run (ran false, no error): the table's, or that of its TOAST
// relation, vacuumed after the table itself.
//
// The connection is its own: session settings never reach the pool, nor,
// behind a pooler, another client's session. When ctx ends the server is
// asked to cancel the vacuum (closing the socket alone would leave it
// running, since a backend reads no socket while it vacuums).
func (s *Store) vacuum(ctx context.Context, table string, settings map[string]string) (ran bool, err error) {
	cfg := s.pool.Config().ConnConfig.Copy()
	for k, v := range settings {
		cfg.RuntimeParams[k] = v
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	stop := context.AfterFunc(ctx, func() {
		cctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		_ = conn.PgConn().CancelRequest(cctx)
	})
	defer stop()
	// VACUUM cannot run in a transaction, nor as a prepared statement.
	_, err = conn.Exec(context.WithoutCancel(ctx), "VACUUM (PARALLEL 0, TRUNCATE false) "+table, pgx.QueryExecModeSimpleProtocol)
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return true, nil
	case ctx.Err() != nil:
		return false, ctx.Err()
	case errors.As(err, &pgErr) && pgErr.Code == "55P03": // lock_not_available
		return false, nil
	}
	return false, err
}
