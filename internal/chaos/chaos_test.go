package chaos_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/crashpoint"
	"github.com/weirhq/weir/internal/faultproxy"
	"github.com/weirhq/weir/internal/testenv"
	"github.com/weirhq/weir/internal/teststore"

	"github.com/weirhq/weir/internal/chaos"
)

// TestChaosWorker is the worker's process when a test of this file runs
// this test binary as its child; otherwise it does nothing.
func TestChaosWorker(t *testing.T) {
	dir := os.Getenv("CHAOS_WORKER_DIR")
	if dir == "" {
		t.Skip("run by the chaos tests as their worker")
	}
	teststore.ArmCrashPoint(t)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	w := chaos.WorkerConfig{Where: chaos.Where{Dir: dir, Postgres: os.Getenv("CHAOS_WORKER_POSTGRES"), Schema: os.Getenv("CHAOS_WORKER_SCHEMA"),
		NATS: os.Getenv("CHAOS_WORKER_NATS"), Topics: os.Getenv("CHAOS_WORKER_TOPICS")},
		AckBeforeCommit: os.Getenv("CHAOS_WORKER_ACK_BEFORE_COMMIT") == "1"}
	if err := chaos.Worker(ctx, w, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))); err != nil {
		t.Fatal(err)
	}
}

// TestChaos kills the worker WEIR_CHAOS_KILLS times (10 by default) while
// it processes 30 documents, 3 pages each, every seventh poison, then
// checks that nothing was lost, duplicated or orphaned. WEIR_CHAOS_SEED
// replays a run.
func TestChaos(t *testing.T) {
	runChaos(t, chaos.Config{Where: chaos.Where{Dir: filepath.Join(t.TempDir(), "run")}, Kills: testenv.Int(t, "WEIR_CHAOS_KILLS", 10, 0)})
}

// TestChaosCatchesAckBeforeCommit plants a bug in the worker, a consumer
// that acks each message (and waits for the server to confirm the ack)
// before the transaction that starts the document's workflow, and kills
// the worker three times, each time in that gap. The broker runs outside the killed worker (the harness's default),
// so it keeps those acks and never delivers the messages again: the
// checker must report their documents lost. A harness whose broker dies
// with the worker forgets the acks it had not written to disk, delivers
// the messages again, and reports nothing.
func TestChaosCatchesAckBeforeCommit(t *testing.T) {
	const kills = 3
	// The lost documents never end: the last run is given 20 s, not
	// minutes, to finish the others.
	cfg := chaos.Config{Where: chaos.Where{Dir: filepath.Join(t.TempDir(), "run")}, Kills: kills,
		AckBeforeCommit: true, Points: []string{crashpoint.ConsumerAfterEarlyAck}, Finish: 20 * time.Second}
	res, logPath, err := runHarness(t, &cfg)
	if err == nil || res.Lost == 0 {
		if b, rerr := os.ReadFile(logPath); rerr == nil {
			t.Logf("the workers' output:\n%s", lastLines(string(b), 40))
		}
		t.Fatalf("seed %d: with a consumer that acks before it commits, killed %d times in between, the harness found %v (%v); want documents lost", cfg.Seed, res.Kills, res, err)
	}
	unstarted := 0
	for _, p := range res.Problems {
		if strings.Contains(p, ": no workflow") {
			unstarted++
		}
	}
	if res.Kills != kills || unstarted < kills {
		t.Fatalf("seed %d: %v, %d documents never started, after %d kills; want at least one never started per kill:\n%s", cfg.Seed, res, unstarted, kills, strings.Join(res.Problems, "\n"))
	}
	t.Logf("caught: %v (%d documents never started)", res, unstarted)
}

// TestChaosPostgresCuts runs the workload on PostgreSQL through a fault
// proxy that cuts every connection WEIR_CHAOS_FAULTS times (10 by
// default), for 50 ms to 1.5 s each, while one worker runs: it must ride
// them all out, without a restart, and the checker find nothing lost,
// duplicated or orphaned.
func TestChaosPostgresCuts(t *testing.T) {
	raw := testenv.Postgres(t)
	p, via := faultproxy.ForURL(t, raw)
	schema := teststore.Schema(t, raw, "chaos_")
	runChaos(t, chaos.Config{
		Where:          chaos.Where{Dir: filepath.Join(t.TempDir(), "run"), Postgres: raw, Schema: schema},
		WorkerPostgres: via,
		Faults:         testenv.Int(t, "WEIR_CHAOS_FAULTS", 10, 0),
		Fault:          chaos.CutConnections(p),
	})
}

// TestChaosPostgresRestarts runs the workload on a PostgreSQL server of
// the test's own, which it restarts WEIR_CHAOS_FAULTS times (4 by
// default), shut down cleanly or crashed (recovering from its log) at
// random, while one worker runs: it must ride them all out, without a
// restart, and the checker find nothing lost, duplicated or orphaned.
func TestChaosPostgresRestarts(t *testing.T) {
	srv := teststore.NewPostgresServer(t)
	runChaos(t, chaos.Config{
		Where:  chaos.Where{Dir: filepath.Join(t.TempDir(), "run"), Postgres: srv.URL},
		Faults: testenv.Int(t, "WEIR_CHAOS_FAULTS", 4, 0),
		Fault: func(ctx context.Context, rng *rand.Rand) (string, error) {
			mode := []string{"fast", "immediate"}[rng.IntN(2)]
			start := time.Now()
			if err := srv.Restart(mode); err != nil {
				return "", err
			}
			return fmt.Sprintf("PostgreSQL restarted (%s shutdown), down %v", mode, time.Since(start).Round(time.Millisecond)), nil
		},
	})
}

// runChaos completes cfg with the test's workload, seed, worker and
// output, and runs it.
func runChaos(t *testing.T, cfg chaos.Config) {
	res, logPath, err := runHarness(t, &cfg)
	if err != nil {
		if b, rerr := os.ReadFile(logPath); rerr == nil {
			t.Logf("the workers' output:\n%s", lastLines(string(b), 40))
		}
		t.Fatalf("seed %d: %v", cfg.Seed, err)
	}
	t.Log(res)
	if b, err := os.ReadFile(logPath); err == nil {
		t.Logf("the workers logged %d warnings and errors; the last:\n%s", strings.Count(string(b), "level="), lastLines(string(b), 8))
	}
}

// runHarness completes cfg with the test's workload, seed, worker and
// output, runs it, and returns what it found and where the workers
// logged.
func runHarness(t *testing.T, cfg *chaos.Config) (chaos.Result, string, error) {
	cfg.Docs, cfg.Pages, cfg.PoisonEvery = 30, 3, 7
	if cfg.Finish == 0 {
		cfg.Finish = 3 * time.Minute
	}
	cfg.Seed = uint64(testenv.Int(t, "WEIR_CHAOS_SEED", int(rand.Uint32()), 0))
	cfg.Out = testWriter{t}
	logPath := filepath.Join(filepath.Dir(cfg.Dir), "worker.log")
	cfg.Worker = func(w chaos.WorkerConfig) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestChaosWorker$", "-test.v")
		cmd.Env = append(os.Environ(), "CHAOS_WORKER_DIR="+w.Dir, "CHAOS_WORKER_POSTGRES="+w.Postgres, "CHAOS_WORKER_SCHEMA="+w.Schema,
			"CHAOS_WORKER_NATS="+w.NATS, "CHAOS_WORKER_TOPICS="+w.Topics)
		if w.AckBeforeCommit {
			cmd.Env = append(cmd.Env, "CHAOS_WORKER_ACK_BEFORE_COMMIT=1")
		}
		if f, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			cmd.Stdout, cmd.Stderr = f, f // closed with the process's exit
		}
		return cmd
	}
	res, err := chaos.Run(context.Background(), *cfg)
	return res, logPath, err
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// testWriter writes to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
