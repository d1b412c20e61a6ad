package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/internal/crashpoint"
	"github.com/weirhq/weir/internal/eventually"
	"github.com/weirhq/weir/internal/teststore"
	"github.com/weirhq/weir/ledger/ledgertest"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/sqlite"
	"github.com/weirhq/weir/weirtype"
	"github.com/weirhq/weir/workflow"
)

func openStore(t *testing.T, path string) *sqlite.Store { return teststore.SQLite(t, path) }

// running starts an engine with defs and a client that runs its steps,
// stopped at the test's end.
func running(t *testing.T, s workflow.Store, id string, defs ...*workflow.Definition) *workflow.Engine {
	t.Helper()
	return runningOn(t, s, s, id, defs...)
}

// runningOn is running with the engine on es and the client on cs.
func runningOn(t *testing.T, es, cs workflow.Store, id string, defs ...*workflow.Definition) *workflow.Engine {
	t.Helper()
	return runningWith(t, es, cs, id, weir.KindConfig{MaxAttempts: 3, Backoff: backoff.Constant(10 * time.Millisecond).WithJitter(backoff.JitterNone)}, defs...)
}

// runningWith is runningOn with step as the policy of the step jobs.
func runningWith(t *testing.T, es, cs workflow.Store, id string, step weir.KindConfig, defs ...*workflow.Definition) *workflow.Engine {
	t.Helper()
	ws := weir.NewWorkers()
	eng, err := workflow.New(workflow.Config{Store: es, Workers: ws, Definitions: defs, Logger: slog.New(slog.DiscardHandler), Step: step})
	if err != nil {
		t.Fatal(err)
	}
	c, err := weir.NewClient(weir.Config{Store: cs, Workers: ws, ID: id, PollEvery: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return eng
}

// waitEnded waits for workflow id to end and returns it.
func waitEnded(t *testing.T, s workflow.Store, id string) *weirtype.Workflow {
	t.Helper()
	var wf *weirtype.Workflow
	eventually.True(t, "workflow "+id+" ended", 20*time.Second, func() (bool, string) {
		var err error
		wf, err = s.Executor().GetWorkflow(context.Background(), id)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		return wf != nil && wf.Status.Final(), fmt.Sprintf("%+v", wf)
	})
	return wf
}

func start(t *testing.T, s workflow.Store, eng *workflow.Engine, name, id string, data []byte) {
	t.Helper()
	err := s.InTx(context.Background(), func(ex store.Executor) error {
		// The workflows and jobs roles alone: no more than Start needs.
		_, _, err := eng.Start(context.Background(), struct {
			store.Workflows
			store.Jobs
		}{ex, ex}, name, id, data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// notifications returns the bodies of the messages in the outbox.
func notifications(t *testing.T, s workflow.Store) []workflow.Notification {
	t.Helper()
	msgs, err := s.Executor().ClaimOutbox(context.Background(), store.OutboxClaimParams{Now: time.Now(), Limit: 100, Owner: "check", LeaseFor: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var out []workflow.Notification
	for _, m := range msgs {
		var n workflow.Notification
		if err := json.Unmarshal(m.Payload, &n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// forEachStore runs test on a SQLite store and on a PostgreSQL one.
func forEachStore(t *testing.T, test func(t *testing.T, s workflow.Store)) {
	t.Run("sqlite", func(t *testing.T) { test(t, teststore.SQLite(t, filepath.Join(t.TempDir(), "weir.db"))) })
	t.Run("postgres", func(t *testing.T) {
		s, _ := teststore.PostgresStore(t, "wf_", 8)
		test(t, s)
	})
}

// A workflow goes through its states, its context persisted at each
// transition, and its end is notified once.
func TestWorkflowRunsThroughItsStates(t *testing.T) {
	forEachStore(t, testWorkflowRunsThroughItsStates)
}

func testWorkflowRunsThroughItsStates(t *testing.T, s workflow.Store) {
	var (
		mu   sync.Mutex
		seen []string
	)
	saw := func(r *workflow.Run) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, fmt.Sprintf("%s@%d:%s", r.Workflow.State, r.Workflow.Version, r.Workflow.Data))
	}
	def := &workflow.Definition{Name: "ingest", Start: "upload", NotifyTopic: "ingest.done", States: map[string]workflow.Handler{
		"upload": func(_ context.Context, r *workflow.Run) (workflow.Next, error) {
			saw(r)
			return workflow.Goto("index", []byte(`{"blob":"b1"}`)), nil
		},
		"index": func(_ context.Context, r *workflow.Run) (workflow.Next, error) {
			saw(r)
			return workflow.Goto("notify", nil), nil
		},
		"notify": func(_ context.Context, r *workflow.Run) (workflow.Next, error) {
			saw(r)
			return workflow.Complete(nil), nil
		},
	}}
	eng := running(t, s, "w1", def)
	start(t, s, eng, "ingest", "doc-1", []byte(`{"doc":1}`))
	wf := waitEnded(t, s, "doc-1")
	if wf.Status != weirtype.WorkflowCompleted || wf.State != "notify" || wf.Version != 4 || string(wf.Data) != `{"blob":"b1"}` {
		t.Fatalf("ended %+v", wf)
	}
	mu.Lock()
	got := strings.Join(seen, " ")
	mu.Unlock()
	if want := `upload@1:{"doc":1} index@2:{"blob":"b1"} notify@3:{"blob":"b1"}`; got != want {
		t.Fatalf("the handlers saw %s, want %s", got, want)
	}
	ns := notifications(t, s)
	if len(ns) != 1 || ns[0].Workflow != "doc-1" || ns[0].Status != weirtype.WorkflowCompleted || string(ns[0].Data) != `{"blob":"b1"}` {
		t.Fatalf("notifications %+v, want one for doc-1", ns)
	}
	// Starting it again finds it.
	if err := s.InTx(context.Background(), func(ex store.Executor) error {
		wf, started, err := eng.Start(context.Background(), ex, "ingest", "doc-1", nil)
		if err == nil && (started || wf.Version != 4) {
			err = fmt.Errorf("started again: %v, %+v", started, wf)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// A permanent error, or an error on the last attempt, fails the workflow
// and notifies it; Fail ends it as failed.
func TestWorkflowFails(t *testing.T) { forEachStore(t, testWorkflowFails) }

func testWorkflowFails(t *testing.T, s workflow.Store) {
	def := &workflow.Definition{Name: "w", Start: "a", NotifyTopic: "w.done", States: map[string]workflow.Handler{
		"a": func(_ context.Context, r *workflow.Run) (workflow.Next, error) {
			switch r.Workflow.ID {
			case "poison":
				return workflow.Next{}, retry.Permanent(errors.New("unreadable document"))
			case "flaky":
				return workflow.Next{}, fmt.Errorf("attempt %d failed", r.Attempt)
			default:
				return workflow.Fail("rejected by policy"), nil
			}
		},
	}}
	eng := running(t, s, "w1", def)
	for _, id := range []string{"poison", "flaky", "rejected"} {
		start(t, s, eng, "w", id, nil)
	}
	for id, want := range map[string]string{"poison": "unreadable document", "flaky": "attempt 3 failed", "rejected": "rejected by policy"} {
		wf := waitEnded(t, s, id)
		if wf.Status != weirtype.WorkflowFailed || !strings.Contains(wf.Error, want) {
			t.Fatalf("%s ended %+v, want failed with %q", id, wf, want)
		}
	}
	if ns := notifications(t, s); len(ns) != 3 {
		t.Fatalf("%d notifications, want one per failed workflow", len(ns))
	}
}

// A stalled workflow is cleaned up and failed by the sweep; a moving one
// is left alone.
func TestSweepStalled(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "weir.db"))
	fc := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	var cleaned []string
	def := &workflow.Definition{Name: "w", Start: "a", StallAfter: time.Hour,
		States:  map[string]workflow.Handler{"a": func(context.Context, *workflow.Run) (workflow.Next, error) { return workflow.Complete(nil), nil }},
		OnStall: func(_ context.Context, wf *weirtype.Workflow) error { cleaned = append(cleaned, wf.ID); return nil }}
	eng, err := workflow.New(workflow.Config{Store: s, Workers: weir.NewWorkers(), Definitions: []*workflow.Definition{def}, Clock: fc,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ex := s.Executor()
	for _, id := range []string{"old", "new"} {
		if _, _, err := eng.Start(context.Background(), ex, "w", id, nil); err != nil {
			t.Fatal(err)
		}
		fc.Advance(50 * time.Minute)
	}
	n, err := eng.SweepStalled(context.Background())
	if err != nil || n != 1 || len(cleaned) != 1 || cleaned[0] != "old" {
		t.Fatalf("sweep: %d, %v, cleaned %v; want old only", n, err, cleaned)
	}
	wf, err := ex.GetWorkflow(context.Background(), "old")
	if err != nil || wf.Status != weirtype.WorkflowFailed || !strings.Contains(wf.Error, "no progress for 1h0m0s") {
		t.Fatalf("old after the sweep: %+v, %v", wf, err)
	}
	if wf, err := ex.GetWorkflow(context.Background(), "new"); err != nil || wf.Status != weirtype.WorkflowRunning {
		t.Fatalf("new after the sweep: %+v, %v", wf, err)
	}
}

// Resume gives a running workflow without a job its step job, once.
func TestResumeInsertsMissingSteps(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "weir.db"))
	if _, _, err := s.Executor().CreateWorkflow(context.Background(), time.Now(), store.WorkflowParams{ID: "orphan", Name: "w", State: "a"}); err != nil {
		t.Fatal(err)
	}
	def := &workflow.Definition{Name: "w", Start: "a", States: map[string]workflow.Handler{
		"a": func(context.Context, *workflow.Run) (workflow.Next, error) { return workflow.Complete(nil), nil }}}
	eng, err := workflow.New(workflow.Config{Store: s, Workers: weir.NewWorkers(), Definitions: []*workflow.Definition{def}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{1, 0} {
		if n, err := eng.Resume(context.Background()); err != nil || n != want {
			t.Fatalf("Resume %d: %d, %v; want %d", i, n, err, want)
		}
	}
	running(t, s, "w1", def)
	if wf := waitEnded(t, s, "orphan"); wf.Status != weirtype.WorkflowCompleted {
		t.Fatalf("orphan ended %+v", wf)
	}
}

// A process killed in the middle of a transition: after a restart the
// workflow resumes from its persisted state, and its effects, through the
// ledger, happen once.
func TestKilledMidTransitionResumes(t *testing.T) {
	dir := os.Getenv("WORKFLOW_CHILD_DIR")
	child := dir != ""
	if !child {
		dir = t.TempDir()
	} else {
		teststore.ArmCrashPoint(t)
	}
	s := openStore(t, filepath.Join(dir, "weir.db"))
	step := func(name, next string) workflow.Handler {
		return func(ctx context.Context, r *workflow.Run) (workflow.Next, error) {
			if _, err := r.Ledger.Do(ctx, store.EffectKey{Txn: r.Workflow.ID, Series: name}, ledgertest.FileEffect(dir, name)); err != nil {
				return workflow.Next{}, err
			}
			if next == "" {
				return workflow.Complete(nil), nil
			}
			return workflow.Goto(next, nil), nil
		}
	}
	def := &workflow.Definition{Name: "w", Start: "upload", States: map[string]workflow.Handler{
		"upload": step("upload", "index"), "index": step("index", ""),
	}}
	if child {
		eng := running(t, s, "worker", def)
		start(t, s, eng, "w", "doc-1", nil)
		time.Sleep(20 * time.Second)
		t.Fatal("the child was not killed")
	}
	teststore.RunKilled(t, "TestKilledMidTransitionResumes", "WORKFLOW_CHILD_DIR="+dir, crashpoint.Env+"="+crashpoint.WorkflowMidTransition)
	if wf, err := s.Executor().GetWorkflow(context.Background(), "doc-1"); err != nil || wf.State != "upload" || wf.Version != 1 {
		t.Fatalf("after the kill: %+v, %v; want it still in upload, its effect done but not its transition", wf, err)
	}
	running(t, s, "worker", def) // the same worker id takes its job back at once
	if wf := waitEnded(t, s, "doc-1"); wf.Status != weirtype.WorkflowCompleted || wf.Version != 3 {
		t.Fatalf("after the restart: %+v", wf)
	}
	writes, err := os.ReadFile(filepath.Join(dir, "writes"))
	if err != nil || string(writes) != "upload\nindex\n" {
		t.Fatalf("effects written %q (%v), want each once", writes, err)
	}
}

// A workflow whose step job ended without moving it on (here abandoned
// by hand, as a rescue does on the last attempt) is failed by Resume.
func TestResumeFailsAWorkflowWhoseStepDied(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "weir.db"))
	ctx := context.Background()
	def := &workflow.Definition{Name: "w", Start: "a", States: map[string]workflow.Handler{
		"a": func(context.Context, *workflow.Run) (workflow.Next, error) { return workflow.Complete(nil), nil }}}
	eng, err := workflow.New(workflow.Config{Store: s, Workers: weir.NewWorkers(), Definitions: []*workflow.Definition{def}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ex := s.Executor()
	if _, _, err := eng.Start(ctx, ex, "w", "doomed", nil); err != nil {
		t.Fatal(err)
	}
	jobs, err := ex.Claim(ctx, store.ClaimParams{Now: time.Now(), Limit: 1, Owner: "gone", LeaseFor: time.Minute})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim the step: %v, %v", jobs, err)
	}
	if _, err := ex.Fail(ctx, store.FailParams{Now: time.Now(), Lease: store.LeaseOf(jobs[0]), Abandon: weirtype.AbandonMaxAttempts,
		Error: weirtype.AttemptError{Attempt: 1, At: time.Now(), Type: "lease_expired", Message: "the worker died"}}); err != nil {
		t.Fatal(err)
	}
	if n, err := eng.Resume(ctx); err != nil || n != 0 {
		t.Fatalf("Resume: %d, %v", n, err)
	}
	wf, err := ex.GetWorkflow(ctx, "doomed")
	if err != nil || wf.Status != weirtype.WorkflowFailed || !strings.Contains(wf.Error, "ended (duplicate_final)") {
		t.Fatalf("after Resume: %+v, %v; want it failed", wf, err)
	}
}

// A state that overruns its step's timeout on its last attempt fails the
// workflow, although the attempt's context has ended.
func TestTimeoutOnTheLastAttemptFailsTheWorkflow(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "weir.db"))
	def := &workflow.Definition{Name: "w", Start: "a", States: map[string]workflow.Handler{
		"a": func(ctx context.Context, _ *workflow.Run) (workflow.Next, error) {
			<-ctx.Done()
			return workflow.Next{}, ctx.Err()
		}}}
	eng := runningWith(t, s, s, "w1", weir.KindConfig{MaxAttempts: 1, Timeout: 50 * time.Millisecond}, def)
	start(t, s, eng, "w", "slow", nil)
	if wf := waitEnded(t, s, "slow"); wf.Status != weirtype.WorkflowFailed || !strings.Contains(wf.Error, "context canceled") {
		t.Fatalf("ended %+v, want failed by the timeout", wf)
	}
}
