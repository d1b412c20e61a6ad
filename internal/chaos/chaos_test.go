package chaos_test

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/chaos"
)

// TestChaosWorker is the worker's process when TestChaos runs this test
// binary as its child; otherwise it does nothing.
func TestChaosWorker(t *testing.T) {
	dir := os.Getenv("CHAOS_WORKER_DIR")
	if dir == "" {
		t.Skip("run by TestChaos as its worker")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := chaos.Worker(ctx, dir, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
}

// TestChaos kills the worker WEIR_CHAOS_KILLS times (10 by default) while
// it processes 30 documents, 3 pages each, every seventh poison, then
// checks that nothing was lost, duplicated or orphaned. WEIR_CHAOS_SEED
// replays a run.
func TestChaos(t *testing.T) {
	kills := envInt(t, "WEIR_CHAOS_KILLS", 10)
	seed := uint64(envInt(t, "WEIR_CHAOS_SEED", int(rand.Uint32())))
	dir := filepath.Join(t.TempDir(), "run")
	res, err := chaos.Run(context.Background(), chaos.Config{
		Dir: dir, Docs: 30, Pages: 3, PoisonEvery: 7, Kills: kills, Seed: seed, Finish: 3 * time.Minute,
		Worker: func(dir string) *exec.Cmd {
			cmd := exec.Command(os.Args[0], "-test.run=^TestChaosWorker$", "-test.v")
			cmd.Env = append(os.Environ(), "CHAOS_WORKER_DIR="+dir)
			if f, err := os.OpenFile(filepath.Join(filepath.Dir(dir), "worker.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				cmd.Stdout, cmd.Stderr = f, f // closed with the process's exit
			}
			return cmd
		},
		Out: testWriter{t},
	})
	if err != nil {
		if b, rerr := os.ReadFile(filepath.Join(filepath.Dir(dir), "worker.log")); rerr == nil {
			t.Logf("the workers' output:\n%s", lastLines(string(b), 40))
		}
		t.Fatalf("seed %d: %v", seed, err)
	}
	t.Log(res)
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a whole number, 0 or more", name, v)
	}
	return n
}

// testWriter writes to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
