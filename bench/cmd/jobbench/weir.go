package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/bench/internal/benchdb"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/postgres"
)

// openWeirStore opens and migrates a fresh weir store, and returns it with
// a function that counts its completed jobs and one that removes it.
func openWeirStore(ctx context.Context, s settings) (st store.Store, count func(context.Context) (int, error), cleanup func(), err error) {
	if s.postgresMode {
		schema := fmt.Sprintf("jobbench_weir_%08x", rand.Uint32())
		ps, err := postgres.Open(ctx, postgres.Config{URL: s.url, Schema: schema, MaxConns: int32(s.maxConns)})
		if err != nil {
			return nil, nil, nil, err
		}
		cleanup := func() {
			dropSchema(ps.Pool(), schema)
			ps.Close()
		}
		if _, err := ps.Migrate(ctx); err != nil {
			cleanup()
			return nil, nil, nil, err
		}
		q := "SELECT count(*) FROM " + pgx.Identifier{schema, "weir_jobs"}.Sanitize() + " WHERE state = 'completed'"
		return ps, func(ctx context.Context) (int, error) { return countPG(ctx, ps.Pool(), q) }, cleanup, nil
	}
	ss, count, cleanup, err := benchdb.OpenWeir(ctx, "jobbench-weir-", "SELECT count(*) FROM weir_jobs WHERE state = 'completed'")
	if err != nil {
		return nil, nil, nil, err
	}
	return ss, count, cleanup, nil
}

// runWeir measures weir, with KindConfig.MaxRunning maxRunning.
func runWeir(ctx context.Context, s settings, logger *slog.Logger, maxRunning int) (r result, err error) {
	r = result{system: "weir", jobs: s.n}
	if maxRunning > 0 {
		r.system = fmt.Sprintf("weir max-running=%d", maxRunning)
	}
	st, count, cleanup, err := openWeirStore(ctx, s)
	if err != nil {
		return r, fmt.Errorf("weir: open store: %w", err)
	}
	defer cleanup()

	sk := newSink(s.n)
	workers := weir.NewWorkers()
	if err := weir.AddWorker(workers, weir.WorkFunc(func(_ context.Context, j *weir.Job[noopArgs]) error {
		sk.handle(j.Args)
		return nil
	}), weir.KindConfig{MaxRunning: maxRunning}); err != nil {
		return r, err
	}
	client, err := weir.NewClient(weir.Config{
		Store:         st,
		Workers:       workers,
		Queues:        map[string]weir.QueueConfig{weir.DefaultQueue: {MaxWorkers: s.workers}},
		PollEvery:     s.poll,
		ClaimCooldown: s.claimCool,
		ID:            "jobbench",
		Logger:        logger,
	})
	if err != nil {
		return r, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		err = errors.Join(err, client.Stop(sctx))
	}()

	err = measure(ctx, s, sk, &r, calls{
		system:     "weir",
		bulkInsert: bulkInsert(s.batch, weir.InsertManyParams{Args: noopArgs{}}, client.InsertMany),
		insert: func(ctx context.Context) error {
			_, err := client.Insert(ctx, noopArgs{Latency: true}, nil)
			return err
		},
		start:   client.Start,
		stop:    client.Stop,
		count:   count,
		profile: s.CPUProfile,
	})
	return r, err
}

func countPG(ctx context.Context, pool *pgxpool.Pool, q string) (int, error) {
	var c int
	err := pool.QueryRow(ctx, q).Scan(&c)
	return c, err
}

// dropSchema drops a benchmark schema, reporting a failure on stderr.
func dropSchema(pool *pgxpool.Pool, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		fmt.Fprintf(os.Stderr, "jobbench: drop schema %s: %v\n", schema, err)
	}
}
