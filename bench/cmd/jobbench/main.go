// Command jobbench compares weir's job throughput with River's, on the same
// database, with the same no-op worker and the same settings.
//
//	cd bench && go run ./cmd/jobbench -store postgres -n 100000 -compare river
//	cd bench && go run ./cmd/jobbench -store sqlite -n 20000 -compare river
//
// For each system it makes a fresh store of its own (PostgreSQL: a schema
// jobbench_weir_<rand> or jobbench_river_<rand>, dropped at the end; SQLite:
// a file in a temporary directory), bulk-inserts n no-op jobs in batches,
// then starts the workers and times them from Start until the store shows
// all n jobs completed. Completed jobs are kept (River's default retention
// is 24 h; weir keeps them). Then, at low load, it inserts -latency-n jobs
// one at a time, each after the previous one started, and measures the
// insert call (enqueue latency) and the time from the insert's return to
// the handler's start (pickup latency). Each such job comes just after the
// previous one's claim, so weir claims it once its ClaimCooldown
// (-claim-cooldown) has passed; -claim-cooldown 1ns claims it at once.
//
// It prints the settings, a table, and last a line "ratio weir/river: X.XX"
// (jobs per second of weir over River's).
//
// With -compare limited it runs weir twice instead, without a limit and
// with KindConfig.MaxRunning -max-running (default twice -workers, a
// limit that never binds), and prints "ratio limited/unlimited: X.XX":
// what enforcing a limit across processes in the claim costs.
//
//	cd bench && go run ./cmd/jobbench -store postgres -n 50000 -compare limited
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/bench/internal/program"
)

// settings are the flags, shared by both systems.
type settings struct {
	store        string
	n            int
	workers      int
	compare      string
	url          string
	latencyN     int
	batch        int
	poll         time.Duration
	cooldown     time.Duration // River's FetchCooldown
	claimCool    time.Duration // weir's ClaimCooldown
	maxConns     int
	maxRunning   int
	rounds       int
	postgresMode bool
	program.Flags
}

func main() {
	var s settings
	flag.StringVar(&s.store, "store", "sqlite", "store: postgres or sqlite")
	flag.IntVar(&s.n, "n", 10000, "jobs to bulk-insert and run")
	flag.IntVar(&s.workers, "workers", 100, "concurrent workers, the same for both systems")
	flag.StringVar(&s.compare, "compare", "", `system to compare with: "river", "limited" (weir with a MaxRunning), or empty for weir alone`)
	flag.IntVar(&s.rounds, "rounds", 1, "rounds of the comparison, each system once a round in alternating order; more than one prints the median ratio")
	flag.IntVar(&s.maxRunning, "max-running", 0, "KindConfig.MaxRunning of -compare limited (default 2 × -workers)")
	flag.StringVar(&s.url, "url", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL URL (-store postgres)")
	flag.IntVar(&s.latencyN, "latency-n", 200, "jobs inserted one at a time for the latency measurement (0: skip)")
	flag.IntVar(&s.batch, "batch", 1000, "jobs per bulk-insert call")
	flag.DurationVar(&s.poll, "poll", 100*time.Millisecond, "weir's PollEvery and River's FetchPollInterval")
	flag.DurationVar(&s.cooldown, "fetch-cooldown", time.Millisecond, "River's FetchCooldown (its minimum is 1ms)")
	flag.DurationVar(&s.claimCool, "claim-cooldown", weir.DefaultClaimCooldown,
		"weir's Config.ClaimCooldown: after a claim that emptied the queue, an insert's wake claims no sooner than this after it (1ns: at once, weir.ClaimAtOnce)")
	flag.IntVar(&s.maxConns, "max-conns", 20, "PostgreSQL pool size of each system (-store postgres)")
	s.Register(10*time.Minute, "a run", "weir's throughput phase", "clients'")
	flag.Parse()
	program.Main("jobbench", func(ctx context.Context, out io.Writer) error { return run(ctx, out, s) })
}

func run(ctx context.Context, out io.Writer, s settings) error {
	switch {
	case s.store != "postgres" && s.store != "sqlite":
		return fmt.Errorf("-store %q: want postgres or sqlite", s.store)
	case s.compare != "" && s.compare != "river" && s.compare != "limited":
		return fmt.Errorf("-compare %q: want river, limited or nothing", s.compare)
	case s.rounds < 1:
		return fmt.Errorf("-rounds %d: want at least 1", s.rounds)
	case s.maxRunning < 0:
		return fmt.Errorf("-max-running %d is negative", s.maxRunning)
	case s.n <= 0 || s.workers <= 0 || s.batch <= 0 || s.latencyN < 0 || s.maxConns <= 0:
		return errors.New("-n, -workers, -batch and -max-conns must be positive, -latency-n not negative")
	case s.poll <= 0 || s.cooldown < time.Millisecond:
		return errors.New("-poll must be positive and -fetch-cooldown at least 1ms (River's minimum)")
	case s.claimCool <= 0:
		return fmt.Errorf("-claim-cooldown %v: want a positive duration (1ns: claim at once)", s.claimCool)
	}
	s.postgresMode = s.store == "postgres"
	logger := program.Logger(s.Verbose)

	printSettings(out, s)
	var results []result
	if s.maxRunning == 0 {
		s.maxRunning = 2 * s.workers
	}
	unlimited := func(ctx context.Context, s settings, l *slog.Logger) (result, error) { return runWeir(ctx, s, l, 0) }
	systems := []func(context.Context, settings, *slog.Logger) (result, error){unlimited}
	switch s.compare {
	case "river":
		systems = append(systems, runRiver)
	case "limited":
		fmt.Fprintf(out, "# limited: weir with KindConfig.MaxRunning %d (%d workers)\n", s.maxRunning, s.workers)
		systems = append(systems, func(ctx context.Context, s settings, l *slog.Logger) (result, error) {
			return runWeir(ctx, s, l, s.maxRunning)
		})
	}
	var ratios []float64
	for round := 1; round <= s.rounds; round++ {
		results = results[:0]
		// Each round swaps the order, so that neither system always
		// runs on the warmer (or the more tired) machine.
		order := slices.Clone(systems)
		if round%2 == 0 {
			slices.Reverse(order)
		}
		for _, sys := range order {
			rctx, cancel := context.WithTimeout(ctx, s.Timeout)
			r, err := sys(rctx, s, logger)
			cancel()
			if err != nil {
				return err
			}
			results = append(results, r)
			fmt.Fprintf(out, "# %s: bulk insert %.2fs; last handler returned at %.3fs; store showed %d completed at %.3fs\n",
				r.system, r.insert.Seconds(), r.handlersDone.Seconds(), r.jobs, r.elapsed.Seconds())
		}
		if round%2 == 0 {
			slices.Reverse(results)
		}
		fmt.Fprintln(out)
		printTable(out, s, results)
		switch {
		case len(results) == 2 && s.compare == "limited":
			ratios = append(ratios, results[1].rate()/results[0].rate())
			fmt.Fprintf(out, "ratio limited/unlimited: %.2f\n", ratios[len(ratios)-1])
		case len(results) == 2:
			ratios = append(ratios, results[0].rate()/results[1].rate())
			fmt.Fprintf(out, "ratio weir/river: %.2f\n", ratios[len(ratios)-1])
		}
	}
	if len(ratios) > 1 {
		slices.Sort(ratios)
		fmt.Fprintf(out, "ratios over %d rounds: %s; median %.2f\n", len(ratios), fmtRatios(ratios), median(ratios))
	}
	return nil
}

func printSettings(out io.Writer, s settings) {
	fmt.Fprintf(out, "# jobbench: store=%s jobs=%d workers=%d (both) insert-batch=%d latency-n=%d GOMAXPROCS=%d %s\n",
		s.store, s.n, s.workers, s.batch, s.latencyN, runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Fprintf(out, "# poll: weir PollEvery=%v, River FetchPollInterval=%v; River FetchCooldown=%v, weir ClaimCooldown=%v (a latency job, inserted just after the last one's claim, waits for it)\n",
		s.poll, s.poll, s.cooldown, s.claimCool)
	fmt.Fprintln(out, "# wake on insert: weir wakes its own producer; River riverpgxv5 LISTEN/NOTIFY, riversqlite wakes its own producer")
	if s.postgresMode {
		fmt.Fprintf(out, "# postgres: pool of %d connections each; weir bulk insert InsertMany, River InsertManyFast (COPY)\n", s.maxConns)
	} else {
		fmt.Fprintln(out, "# sqlite: WAL, synchronous=NORMAL, busy_timeout 5s for both; weir 1 write + read pool, River 1 connection (as riversqlite advises); bulk insert weir InsertMany, River InsertManyFast")
	}
	fmt.Fprintln(out, "# jobs/s: n / (Start → store shows n completed); completed jobs kept by both")
	fmt.Fprintln(out, "# enqueue: Insert call duration; pickup: Insert returned → handler started (one job at a time, idle queue)")
}

func printTable(out io.Writer, s settings, rs []result) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tstore\tjobs\tseconds\tjobs/s\tenqueue p50\tenqueue p99\tpickup p50\tpickup p99\t")
	for _, r := range rs {
		enq50, enq99, pick50, pick99 := "-", "-", "-", "-"
		if len(r.enqueue) > 0 {
			enq50, enq99 = ms(percentile(r.enqueue, 50)), ms(percentile(r.enqueue, 99))
			pick50, pick99 = ms(percentile(r.pickup, 50)), ms(percentile(r.pickup, 99))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.3f\t%.0f\t%s\t%s\t%s\t%s\t\n",
			r.system, s.store, r.jobs, r.elapsed.Seconds(), r.rate(), enq50, enq99, pick50, pick99)
	}
	_ = tw.Flush()
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

// fmtRatios is the ratios with two decimals, separated by commas.
func fmtRatios(rs []float64) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%.2f", r)
	}
	return strings.Join(parts, ", ")
}

// median is the median of sorted rs: the mean of the middle two for an
// even count.
func median(rs []float64) float64 {
	n := len(rs)
	if n%2 == 1 {
		return rs[n/2]
	}
	return (rs[n/2-1] + rs[n/2]) / 2
}
