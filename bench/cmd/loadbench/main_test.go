package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/bench/internal/loadbench"
	"github.com/weirhq/weir/internal/testenv"
)

// TestMain lets the test binary serve as the benchmark's worker process:
// loadbench re-executes its own binary with loadbench.RoleEnv set.
func TestMain(m *testing.M) {
	if role := os.Getenv(loadbench.RoleEnv); role != "" {
		os.Exit(loadbench.Child(role))
	}
	os.Exit(m.Run())
}

// BenchmarkLoadQuick runs the quick mode once (b.Loop calls the function
// once whatever -benchtime says): weir and River, 4 workers, the clean,
// idle-in-tx and pg-backend-kill phases of 2 s each at 500 jobs/s. It
// fails when a phase completed nothing, measured no pickup latency or no
// CPU, or when a produced job was lost or completed twice.
func BenchmarkLoadQuick(b *testing.B) {
	cfg := loadbench.Quick(loadbench.Default())
	cfg.URL = testenv.Postgres(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var progress strings.Builder
	start := time.Now()
	rep, err := loadbench.Run(ctx, cfg, &progress)
	if rep != nil {
		var out strings.Builder
		rep.Print(&out)
		b.Log("\n" + progress.String() + out.String())
	}
	if err != nil {
		b.Fatal(err)
	}
	if bad := rep.Failed(); bad != "" {
		b.Fatal(bad)
	}
	if len(rep.Runs) != 2 {
		b.Fatalf("%d runs, want weir and River", len(rep.Runs))
	}
	for _, r := range rep.Runs {
		if len(r.Phases) != len(cfg.Phases) || !r.Drained {
			b.Fatalf("%s: %d of %d phases, drained %v", r.System, len(r.Phases), len(cfg.Phases), r.Drained)
		}
		for _, p := range r.Phases {
			if p.Completed == 0 || p.Rate <= 0 || p.P99.Median <= 0 || p.WorkerCPUPer1k <= 0 || p.SizeEnd <= 0 {
				b.Fatalf("%s %s: completed %d, rate %.0f, p99 %.1f ms, worker CPU %.3f s/1k, table %d bytes: want each positive",
					r.System, p.Phase, p.Completed, p.Rate, p.P99.Median, p.WorkerCPUPer1k, p.SizeEnd)
			}
			if p.Phase != loadbench.Clean && p.Fault == "" {
				b.Fatalf("%s %s: the fault reported nothing", r.System, p.Phase)
			}
		}
	}
	for _, r := range rep.Runs {
		b.ReportMetric(r.Phases[0].Rate, string(r.System)+"-clean-jobs/s")
	}
	b.ReportMetric(time.Since(start).Seconds(), "run-s")
	for b.Loop() {
	}
}

// With a repeated-kill phase the worker processes report each job whose
// work finished: every produced job's work finished at least once, and
// a job whose work finished twice ran at a later attempt (a rerun).
func TestWorkFinishedTwiceIsCounted(t *testing.T) {
	cfg := loadbench.Quick(loadbench.Default())
	cfg.URL = testenv.Postgres(t)
	cfg.Systems = []loadbench.System{loadbench.Weir}
	cfg.Phases = []loadbench.Phase{{Kind: loadbench.Clean, Duration: time.Second}, {Kind: loadbench.RepeatedKill, Duration: 3 * time.Second}}
	cfg.KillEvery = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var progress strings.Builder
	rep, err := loadbench.Run(ctx, cfg, &progress)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if bad := rep.Failed(); bad != "" {
		t.Fatal(bad)
	}
	if len(rep.Runs) != 1 {
		t.Fatalf("%d runs, want weir's", len(rep.Runs))
	}
	r := rep.Runs[0]
	t.Logf("produced %d, reruns %d, work finished %d, twice %d", r.Produced, r.Reruns, r.WorkDone, r.WorkTwice)
	if !r.WorkCounted || r.Produced == 0 || r.WorkDone != r.Produced {
		t.Fatalf("work counted %v: %d jobs finished their work, want every one of the %d produced", r.WorkCounted, r.WorkDone, r.Produced)
	}
	if r.WorkTwice > r.Reruns {
		t.Fatalf("%d jobs finished their work twice, more than the %d that ran again", r.WorkTwice, r.Reruns)
	}
}
