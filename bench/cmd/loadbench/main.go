// Command loadbench runs weir and River side by side on PostgreSQL under a
// steady producer and a sequence of pressure phases, and prints a table
// per phase and a summary with weir/River ratios:
//
//	cd bench && go run ./cmd/loadbench -quick
//	cd bench && go run ./cmd/loadbench -workers 4,16,64 -depth 4000 \
//	    -phases clean:60s,active-readers:30s,idle-in-tx:30s -json out.json
//
// Each system runs in a schema of its own (loadbench_weir_<rand>,
// loadbench_river_<rand>, dropped at the end unless -keep) at each worker
// count in turn, through every phase in order, after a warmup. This
// process inserts the jobs (weir InsertMany, River InsertManyFast), at a
// fixed rate credited on real elapsed time or holding a depth of waiting
// jobs; the workers run in a child process, this program re-executed,
// whose CPU time is measured with getrusage and which a phase may SIGKILL.
// After the last phase the queue is drained and every produced job is
// checked in the database: completed exactly once. With a repeated-kill
// phase the worker processes also tell this process, through a pipe, of
// each job whose work finished, before the system records its success;
// "work twice" counts the jobs whose work finished more than once (a
// success a SIGKILL took before it was recorded), where "reruns" counts
// every job completed at a later attempt (an attempt killed before its
// work ended, or claimed and not yet started, is one too).
//
// Phases: clean (the producer alone), high-load (1.5x the rate or depth),
// idle-in-tx (a connection holds BEGIN; SELECT txid_current() open),
// active-readers (REPEATABLE READ connections scanning the job table),
// pg-backend-kill (pg_terminate_backend of the system's connections),
// pool-exhaustion (idle connections held on the server), repeated-kill
// (SIGKILL of the worker process, restarted at once) and noisy-neighbour
// (a CPU-bound process). A recovery window at the baseline load follows
// each phase but clean.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/bench/internal/loadbench"
)

func main() {
	if role := os.Getenv(loadbench.RoleEnv); role != "" {
		os.Exit(loadbench.Child(role))
	}
	os.Exit(run())
}

func run() int {
	cfg := loadbench.Default()
	var (
		phases   = flag.String("phases", joinPhases(), "phases in order, each kind[:duration]: "+joinPhases())
		duration = flag.Duration("duration", time.Minute, "duration of a phase given without one")
		workers  = flag.String("workers", "4,16,64,256", "worker counts, each run in turn")
		systems  = flag.String("systems", "weir,river", "systems to run: weir, river")
		jsonPath = flag.String("json", "", "write the report as JSON to this file")
		quick    = flag.Bool("quick", false, "a run of a few seconds: 4 workers, clean, idle-in-tx and pg-backend-kill for 2 s each, 500 jobs/s")
	)
	flag.StringVar(&cfg.URL, "url", cfg.URL, "PostgreSQL URL")
	flag.Float64Var(&cfg.Rate, "rate", cfg.Rate, "producer: fixed rate, jobs/s (0 with -depth)")
	flag.IntVar(&cfg.Depth, "depth", 0, "producer: hold this many jobs waiting instead of a fixed rate")
	flag.DurationVar(&cfg.Work, "work", cfg.Work, "each job's work (a sleep in its handler)")
	flag.IntVar(&cfg.Payload, "payload", cfg.Payload, "each job's arguments, bytes of JSON")
	flag.IntVar(&cfg.Batch, "batch", cfg.Batch, "producer: most jobs per insert call")
	flag.DurationVar(&cfg.Tick, "tick", cfg.Tick, "producer: period of the insert calls")
	flag.IntVar(&cfg.Inserters, "inserters", cfg.Inserters, "producer holding a depth: insert calls in flight at once")
	flag.DurationVar(&cfg.DepthPoll, "depth-poll", cfg.DepthPoll, "how often the waiting jobs are counted in the database, at most (at least 20x the count's duration apart; between counts: inserts less starts)")
	flag.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "producer and workers before the first phase, not reported")
	flag.DurationVar(&cfg.Recovery, "recovery", cfg.Recovery, "window after each fault phase in which recovery is measured (0: none)")
	flag.IntVar(&cfg.MaxConns, "max-conns", cfg.MaxConns, "pool size of each system's worker process")
	flag.DurationVar(&cfg.Poll, "poll", cfg.Poll, "weir's PollEvery and River's FetchPollInterval")
	flag.DurationVar(&cfg.FetchCooldown, "fetch-cooldown", cfg.FetchCooldown, "River's FetchCooldown (its minimum is 1ms)")
	flag.DurationVar(&cfg.ClaimCooldown, "claim-cooldown", weir.DefaultClaimCooldown, "weir's Config.ClaimCooldown (1ns: none, weir.ClaimAtOnce)")
	flag.Float64Var(&cfg.KillRate, "kill-rate", cfg.KillRate, "pg-backend-kill: backends terminated per second")
	flag.IntVar(&cfg.IdleConns, "idle-conns", cfg.IdleConns, "pool-exhaustion: idle connections to hold")
	flag.IntVar(&cfg.ReserveConns, "reserve-conns", cfg.ReserveConns, "pool-exhaustion: server connection slots left free for the systems and everyone else")
	flag.DurationVar(&cfg.KillEvery, "kill-every", cfg.KillEvery, "repeated-kill: period of the worker process's SIGKILL")
	flag.IntVar(&cfg.Readers, "readers", cfg.Readers, "active-readers: REPEATABLE READ connections")
	flag.DurationVar(&cfg.ReaderTx, "reader-tx", cfg.ReaderTx, "active-readers: length of each reader's transaction")
	flag.DurationVar(&cfg.ReaderPause, "reader-pause", cfg.ReaderPause, "active-readers: pause between two scans")
	flag.IntVar(&cfg.NoisyCPUs, "noisy-cpus", cfg.NoisyCPUs, "noisy-neighbour: cores the CPU-bound process keeps busy")
	flag.DurationVar(&cfg.VacuumEvery, "vacuum-every", 0, "VACUUM each job table at this period (0: never; for servers without autovacuum, where weir also vacuums its own as autovacuum would)")
	flag.DurationVar(&cfg.DrainTimeout, "drain-timeout", cfg.DrainTimeout, "longest wait for the queue to drain before the exactly-once check")
	flag.StringVar(&cfg.ProfileDir, "cpuprofile-dir", "", "write a CPU profile of each worker process into this directory")
	flag.BoolVar(&cfg.Keep, "keep", false, "keep the schemas at the end")
	flag.BoolVar(&cfg.Verbose, "v", false, "print every one-second sample and the systems' warnings")
	flag.Parse()

	var err error
	if cfg.Phases, err = loadbench.ParsePhases(*phases, *duration); err == nil {
		if cfg.Workers, err = loadbench.ParseWorkers(*workers); err == nil {
			cfg.Systems, err = loadbench.ParseSystems(*systems)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadbench:", err)
		return 2
	}
	if cfg.Depth > 0 {
		cfg.Rate = 0
	}
	if *quick {
		cfg = loadbench.Quick(cfg)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := loadbench.Run(ctx, cfg, os.Stderr)
	if rep != nil {
		rep.Print(os.Stdout)
		if *jsonPath != "" {
			if jerr := rep.WriteJSON(*jsonPath); jerr != nil {
				fmt.Fprintln(os.Stderr, "loadbench: write JSON:", jerr)
				return 1
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadbench:", err)
		return 1
	}
	if bad := rep.Failed(); bad != "" {
		fmt.Fprintln(os.Stderr, "loadbench:", bad)
		return 1
	}
	return 0
}

func joinPhases() string {
	s := make([]string, len(loadbench.AllPhases))
	for i, k := range loadbench.AllPhases {
		s[i] = string(k)
	}
	return strings.Join(s, ",")
}
