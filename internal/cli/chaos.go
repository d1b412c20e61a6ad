package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weirhq/weir/internal/chaos"
	"github.com/weirhq/weir/internal/faultproxy"
)

// chaosKillsEnv sets the default of "weir chaos -kills".
const chaosKillsEnv = "WEIR_CHAOS_KILLS"

// setupChaos declares the flags of "weir chaos".
func setupChaos(fs *flag.FlagSet) runFunc {
	docs := fs.Int("docs", 200, "documents to process")
	pages := fs.Int("pages", 3, "pages (blob files) per document")
	poison := fs.Int("poison-every", 17, "every Nth document is poison (0: none)")
	kills := fs.Int("kills", 10, "times to kill the worker (default: $"+chaosKillsEnv+", else 10)")
	seed := fs.Uint64("seed", 0, "seed of the kill schedule (0: a new one, printed)")
	dir := fs.String("dir", "", "directory of the run, empty or missing (default: a new temporary one, kept)")
	finish := fs.Duration("finish", 5*time.Minute, "time the last run has to finish every document")
	pg := fs.String("postgres", "", "URL of a PostgreSQL database to keep the workload in (default: SQLite in the run's directory)")
	schema := fs.String("schema", "weir_chaos", "PostgreSQL schema of the workload, which must hold no earlier run")
	cuts := fs.Int("cuts", 0, "instead of kills: times to cut the worker's connections to PostgreSQL (through a proxy on loopback)")
	restarts := fs.Int("restarts", 0, "instead of kills: times to restart PostgreSQL with -restart-command")
	restartCmd := fs.String("restart-command", "", "shell command that restarts PostgreSQL and returns once it is back, for -restarts")
	brokerAt := fs.String("broker", chaos.BrokerHarness, "where the NATS server runs: "+chaos.BrokerHarness+
		" (in this process; the killed workers connect to it), "+chaos.BrokerWorker+" (embedded in each worker, dying with it), or a nats:// URL (streams of the run's own, deleted at the end)")
	pointList := fs.String("points", "", "comma-separated crash points every kill uses (default: half the kills at any point, half after a random time); one of "+strings.Join(chaos.PointNames(), ", "))
	ackFirst := fs.Bool("ack-before-commit", false, "run the workers with a planted bug, a consumer that acks before it commits, to check that the harness catches it (the run must report lost documents)")
	return func(s streams, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		switch {
		case (*cuts > 0 || *restarts > 0) && *pg == "":
			return usageError{"-cuts and -restarts need -postgres"}
		case *restarts > 0 && *restartCmd == "":
			return usageError{"-restarts needs -restart-command"}
		case *cuts < 0 || *restarts < 0:
			return usageError{"-cuts and -restarts must not be negative"}
		case *pointList != "" && *cuts+*restarts > 0:
			return usageError{"-points are the kills' crash points; -cuts and -restarts make a run without kills"}
		}
		var pts []string
		if *pointList != "" {
			for _, p := range strings.Split(*pointList, ",") {
				p = strings.TrimSpace(p)
				if !slices.Contains(chaos.PointNames(), p) {
					return usageError{fmt.Sprintf("-points: %q is not a crash point of the workload; want one or more of %s", p, strings.Join(chaos.PointNames(), ", "))}
				}
				pts = append(pts, p)
			}
		}
		if err := chaos.CheckBroker(*brokerAt); err != nil {
			return usageError{"-broker " + err.Error()}
		}
		var (
			fault     func(context.Context, *rand.Rand) (string, error)
			workerURL string
		)
		if *cuts+*restarts > 0 {
			var closeProxy func()
			var err error
			if fault, workerURL, closeProxy, err = dbFaults(*pg, *cuts, *restarts, *restartCmd); err != nil {
				return err
			}
			defer closeProxy()
		}
		killsSet := false
		fs.Visit(func(f *flag.Flag) { killsSet = killsSet || f.Name == "kills" })
		if v := os.Getenv(chaosKillsEnv); v != "" && !killsSet {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return usageError{fmt.Sprintf("%s=%q (-kills): want a whole number, 0 or more", chaosKillsEnv, printable(v))}
			}
			*kills = n
		}
		if *seed == 0 {
			*seed = rand.Uint64()
		}
		if *dir == "" {
			d, err := os.MkdirTemp("", "weir-chaos-")
			if err != nil {
				return err
			}
			*dir = d
		}
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find the weir binary to run as the worker: %w", err)
		}
		ctx, stop := commandContext()
		defer stop()
		cfg := chaos.Config{Where: chaos.Where{Dir: *dir, Postgres: *pg, Schema: *schema},
			Docs: *docs, Pages: *pages, PoisonEvery: *poison, Kills: *kills, Seed: *seed,
			Points: pts, Broker: *brokerAt, AckBeforeCommit: *ackFirst,
			Finish: *finish, Out: s.stdout,
			Worker: func(w chaos.WorkerConfig) *exec.Cmd {
				args := []string{"chaos-worker", "-postgres", w.Postgres, "-schema", w.Schema, "-nats", w.NATS, "-topics", w.Topics}
				if w.AckBeforeCommit {
					args = append(args, "-ack-before-commit")
				}
				cmd := exec.Command(self, append(args, w.Dir)...)
				cmd.Stderr = s.stderr
				return cmd
			}}
		if *cuts+*restarts > 0 {
			cfg.Kills, cfg.Faults = 0, *cuts+*restarts
			cfg.Fault, cfg.WorkerPostgres = fault, workerURL
		}
		_, err = chaos.Run(ctx, cfg)
		return err
	}
}

// setupChaosWorker declares "weir chaos-worker", which "weir chaos" runs.
func setupChaosWorker(fs *flag.FlagSet) runFunc {
	pg := fs.String("postgres", "", "URL of the PostgreSQL database of the workload (default: SQLite in the run's directory)")
	schema := fs.String("schema", "", "PostgreSQL schema of the workload")
	natsURL := fs.String("nats", "", "URL of the NATS server of the workload (default: one embedded in this process, kept in the run's directory)")
	topics := fs.String("topics", "", "name that makes the run's topics its own on a shared NATS server (chaos.NAME.docs, chaos.NAME.done)")
	ackFirst := fs.Bool("ack-before-commit", false, "consume the documents with a planted bug: ack each message before its transaction commits")
	return func(s streams, args []string) error {
		if len(args) != 1 {
			return usageError{"want the run's directory"}
		}
		ctx, stop := commandContext()
		defer stop()
		logger := slog.New(slog.NewTextHandler(s.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		w := chaos.Where{Dir: args[0], Postgres: *pg, Schema: *schema, NATS: *natsURL, Topics: *topics}
		return chaos.Worker(ctx, chaos.WorkerConfig{Where: w, AckBeforeCommit: *ackFirst}, logger)
	}
}

// dbFaults returns the Fault of a run with cuts cuts of the connections to
// PostgreSQL at pgURL and restarts runs of restartCmd, in a seeded random
// order; the URL the worker dials, through a fault proxy when there are
// cuts; and what closes the proxy.
func dbFaults(pgURL string, cuts, restarts int, restartCmd string) (func(context.Context, *rand.Rand) (string, error), string, func(), error) {
	workerURL, closeProxy := pgURL, func() {}
	var cut func(context.Context, *rand.Rand) (string, error)
	if cuts > 0 {
		u, err := url.Parse(pgURL)
		if err != nil || u.Hostname() == "" {
			return nil, "", nil, usageError{"-postgres: not a URL with a host, which -cuts puts a proxy in front of"}
		}
		target := u.Host
		if u.Port() == "" {
			target = net.JoinHostPort(u.Hostname(), "5432")
		}
		p, err := faultproxy.New(target)
		if err != nil {
			return nil, "", nil, fmt.Errorf("start the fault proxy: %w", err)
		}
		via := *u
		via.Host = p.Addr()
		workerURL, closeProxy, cut = via.String(), func() { _ = p.Close() }, chaos.CutConnections(p)
	}
	restart := func(ctx context.Context, _ *rand.Rand) (string, error) {
		start := time.Now()
		if out, err := exec.CommandContext(ctx, "sh", "-c", restartCmd).CombinedOutput(); err != nil {
			return "", fmt.Errorf("-restart-command: %v: %s", err, out)
		}
		return fmt.Sprintf("PostgreSQL restarted by -restart-command in %v", time.Since(start).Round(time.Millisecond)), nil
	}
	cutsLeft, restartsLeft := cuts, restarts
	fault := func(ctx context.Context, rng *rand.Rand) (string, error) {
		if restartsLeft == 0 || (cutsLeft > 0 && rng.IntN(cutsLeft+restartsLeft) < cutsLeft) {
			cutsLeft--
			return cut(ctx, rng)
		}
		restartsLeft--
		return restart(ctx, rng)
	}
	return fault, workerURL, closeProxy, nil
}
