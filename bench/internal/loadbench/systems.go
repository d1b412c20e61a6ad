package loadbench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/store/postgres"
)

// target is one system as the benchmark process sees it: a fresh schema,
// an inserting client (the producer), and the SQL that observes its job
// table.
type target struct {
	system System
	schema string
	// table is the job table's name in its schema; qualified the
	// schema-qualified, quoted name; claimIndex the index that the
	// system's claim (fetch) query reads.
	table, qualified, claimIndex string
	// depthSQL counts the jobs waiting to run; pendingSQL those not
	// finished; verifySQL returns each job's sequence number, state and
	// attempt.
	depthSQL, pendingSQL, verifySQL string
	// insert inserts the jobs in one call.
	insert func(ctx context.Context, jobs []jobArgs) error
	close  func()
}

// appName is the application_name of the connections of system's role
// (producer or worker); the benchmark finds the system's backends by it.
func appName(system System, role string) string { return "loadbench-" + string(system) + "-" + role }

func quoteIdent(s string) string { return pgx.Identifier{s}.Sanitize() }

// withAppName returns the connection string u with application_name set.
func withAppName(u, name string) string {
	if strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://") {
		if p, err := url.Parse(u); err == nil {
			q := p.Query()
			q.Set("application_name", name)
			p.RawQuery = q.Encode()
			return p.String()
		}
	}
	return u + " application_name=" + name
}

// openTarget makes a fresh schema for system, migrates it, and opens the
// producer's client on it.
func openTarget(ctx context.Context, cfg Config, system System, admin *pgxpool.Pool) (*target, error) {
	t := &target{system: system, schema: fmt.Sprintf("loadbench_%s_%08x", system, rand.Uint32())}
	switch system {
	case Weir:
		return t, t.openWeir(ctx, cfg)
	case River:
		return t, t.openRiver(ctx, cfg, admin)
	}
	return nil, fmt.Errorf("unknown system %q", system)
}

func (t *target) openWeir(ctx context.Context, cfg Config) error {
	st, err := postgres.Open(ctx, postgres.Config{URL: withAppName(cfg.URL, appName(Weir, "producer")), Schema: t.schema, MaxConns: 4})
	if err != nil {
		return fmt.Errorf("weir: open store: %w", err)
	}
	if _, err := st.Migrate(ctx); err != nil {
		st.Close()
		return fmt.Errorf("weir: migrate: %w", err)
	}
	client, err := weir.NewClient(weir.Config{Store: st})
	if err != nil {
		st.Close()
		return err
	}
	t.describe("weir_jobs", "weir_jobs_claim", `'available', 'scheduled', 'running'`, `(payload->>'s')::bigint, state, attempt`)
	t.insert = batchInsert(func(j jobArgs) weir.InsertManyParams { return weir.InsertManyParams{Args: j} },
		func(ctx context.Context, params []weir.InsertManyParams) error {
			_, err := client.InsertMany(ctx, params)
			return err
		})
	t.close = func() { st.Close() }
	return nil
}

func (t *target) openRiver(ctx context.Context, cfg Config, admin *pgxpool.Pool) error {
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+quoteIdent(t.schema)); err != nil {
		return fmt.Errorf("river: create schema: %w", err)
	}
	pool, err := riverPool(ctx, cfg.URL, appName(River, "producer"), t.schema, 4)
	if err != nil {
		return err
	}
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: t.schema})
	if err != nil {
		pool.Close()
		return fmt.Errorf("river: migrator: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		pool.Close()
		return fmt.Errorf("river: migrate: %w", err)
	}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &riverWorker{}); err != nil {
		pool.Close()
		return err
	}
	client, err := river.NewClient(driver, &river.Config{Workers: workers, Schema: t.schema})
	if err != nil {
		pool.Close()
		return fmt.Errorf("river: insert client: %w", err)
	}
	t.describe("river_job", "river_job_prioritized_fetching_index", `'available', 'pending', 'retryable', 'running', 'scheduled'`,
		`(args->>'s')::bigint, state::text, attempt`)
	t.insert = batchInsert(func(j jobArgs) river.InsertManyParams { return river.InsertManyParams{Args: j} },
		func(ctx context.Context, params []river.InsertManyParams) error {
			_, err := client.InsertManyFast(ctx, params)
			return err
		})
	t.close = pool.Close
	return nil
}

// describe sets the target's job table and claim index, and the queries
// that observe the table: pending lists the states of the jobs not
// finished, verifyColumns selects a job's sequence number, state and
// attempt.
func (t *target) describe(table, claimIndex, pending, verifyColumns string) {
	t.table, t.claimIndex = table, claimIndex
	t.qualified = quoteIdent(t.schema) + "." + table
	t.depthSQL = `SELECT count(*) FROM ` + t.qualified + ` WHERE state = 'available'`
	t.pendingSQL = `SELECT count(*) FROM ` + t.qualified + ` WHERE state IN (` + pending + `)`
	t.verifySQL = `SELECT ` + verifyColumns + ` FROM ` + t.qualified
}

// batchInsert returns a target's insert: it makes each job's params with
// param, in a slice of the call's own (the producer's inserters call it
// at once), and inserts them in one insertMany.
func batchInsert[P any](param func(jobArgs) P, insertMany func(context.Context, []P) error) func(context.Context, []jobArgs) error {
	return func(ctx context.Context, jobs []jobArgs) error {
		params := make([]P, 0, len(jobs))
		for _, j := range jobs {
			params = append(params, param(j))
		}
		return insertMany(ctx, params)
	}
}

// drop removes the target's schema.
func (t *target) drop(ctx context.Context, admin *pgxpool.Pool) error {
	_, err := admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+quoteIdent(t.schema)+" CASCADE")
	return err
}

func (t *target) workerSpec(cfg Config, workers int) workerSpec {
	return workerSpec{
		System:        t.system,
		URL:           cfg.URL,
		Schema:        t.schema,
		AppName:       appName(t.system, "worker"),
		Workers:       workers,
		MaxConns:      cfg.MaxConns,
		Poll:          cfg.Poll,
		FetchCooldown: cfg.FetchCooldown,
		ClaimCooldown: cfg.ClaimCooldown,
		Work:          cfg.Work,
		Verbose:       cfg.Verbose,
	}
}
