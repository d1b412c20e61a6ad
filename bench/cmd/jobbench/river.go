package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/weirhq/weir/bench/internal/benchdb"

	// The pure-Go SQLite driver, registered as "sqlite" (weir's store
	// uses it too).
	_ "modernc.org/sqlite"
)

// riverWorker is River's no-op worker.
type riverWorker struct {
	river.WorkerDefaults[noopArgs]
	sk *sink
}

func (w *riverWorker) Work(_ context.Context, j *river.Job[noopArgs]) error {
	w.sk.handle(j.Args)
	return nil
}

// runRiver measures River on a fresh store of the same kind.
func runRiver(ctx context.Context, s settings, logger *slog.Logger) (result, error) {
	if s.postgresMode {
		schema := fmt.Sprintf("jobbench_river_%08x", rand.Uint32())
		pcfg, err := pgxpool.ParseConfig(s.url)
		if err != nil {
			return result{}, fmt.Errorf("river: parse URL: %w", err)
		}
		pcfg.MaxConns = int32(s.maxConns)
		pool, err := pgxpool.NewWithConfig(ctx, pcfg)
		if err != nil {
			return result{}, fmt.Errorf("river: open pool: %w", err)
		}
		defer pool.Close()
		if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
			return result{}, fmt.Errorf("river: create schema: %w", err)
		}
		defer dropSchema(pool, schema)
		q := "SELECT count(*) FROM " + pgx.Identifier{schema, "river_job"}.Sanitize() + " WHERE state = 'completed'"
		return measureRiver(ctx, s, logger, riverpgxv5.New(pool), schema,
			func(ctx context.Context) (int, error) { return countPG(ctx, pool, q) })
	}
	dir, err := os.MkdirTemp("", "jobbench-river-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "river.db")
	// The same pragmas as weir's store; one connection, as riversqlite's
	// documentation advises.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(ON)")
	if err != nil {
		return result{}, fmt.Errorf("river: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	defer db.Close()
	reader, err := benchdb.OpenReader(path)
	if err != nil {
		return result{}, err
	}
	defer reader.Close()
	return measureRiver(ctx, s, logger, riversqlite.New(db), "", func(ctx context.Context) (int, error) {
		return benchdb.Count(ctx, reader, "SELECT count(*) FROM river_job WHERE state = 'completed'")
	})
}

func measureRiver[TTx any](ctx context.Context, s settings, logger *slog.Logger, driver riverdriver.Driver[TTx], schema string,
	count func(context.Context) (int, error)) (r result, err error) {
	r = result{system: "river", jobs: s.n}
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema, Logger: logger})
	if err != nil {
		return r, fmt.Errorf("river: migrator: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return r, fmt.Errorf("river: migrate: %w", err)
	}

	sk := newSink(s.n)
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &riverWorker{sk: sk}); err != nil {
		return r, err
	}
	client, err := river.NewClient(driver, &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: s.workers}},
		Workers:           workers,
		FetchPollInterval: s.poll,
		FetchCooldown:     s.cooldown,
		Schema:            schema,
		Logger:            logger,
	})
	if err != nil {
		return r, fmt.Errorf("river: new client: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if serr := client.Stop(sctx); serr != nil && !errors.Is(serr, context.Canceled) {
			err = errors.Join(err, serr)
		}
	}()

	err = measure(ctx, s, sk, &r, calls{
		system:     "river",
		bulkInsert: bulkInsert(s.batch, river.InsertManyParams{Args: noopArgs{}}, client.InsertManyFast),
		insert: func(ctx context.Context) error {
			_, err := client.Insert(ctx, noopArgs{Latency: true}, nil)
			return err
		},
		start: client.Start,
		stop:  client.Stop,
		count: count,
	})
	return r, err
}
