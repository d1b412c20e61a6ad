package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/weirhq/weir/internal/chaos"
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
	return func(s streams, args []string) error {
		if len(args) > 0 {
			return usageError{fmt.Sprintf("unexpected argument %q", args[0])}
		}
		killsSet := false
		fs.Visit(func(f *flag.Flag) { killsSet = killsSet || f.Name == "kills" })
		if v := os.Getenv(chaosKillsEnv); v != "" && !killsSet {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return fmt.Errorf("%s=%q: want a whole number, 0 or more", chaosKillsEnv, v)
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
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		_, err = chaos.Run(ctx, chaos.Config{Dir: *dir, Docs: *docs, Pages: *pages, PoisonEvery: *poison, Kills: *kills, Seed: *seed,
			Finish: *finish, Out: s.stdout,
			Worker: func(dir string) *exec.Cmd {
				cmd := exec.Command(self, "chaos-worker", dir)
				cmd.Stderr = s.stderr
				return cmd
			}})
		return err
	}
}

// setupChaosWorker declares "weir chaos-worker", which "weir chaos" runs.
func setupChaosWorker(*flag.FlagSet) runFunc {
	return func(s streams, args []string) error {
		if len(args) != 1 {
			return usageError{"want the run's directory"}
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		logger := slog.New(slog.NewTextHandler(s.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		return chaos.Worker(ctx, args[0], logger)
	}
}
