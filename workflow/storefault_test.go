package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/internal/eventually"
	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
	"github.com/weirhq/weir/workflow"
)

// errConnReset is what a driver returns when the database's connection is
// cut under a statement.
var errConnReset = &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}

// flakyStore is a workflow.Store whose AdvanceWorkflow fails with a lost
// connection the first time each workflow named in failOnce is moved to
// the status given for it, as a database cut in the middle of the write
// does.
type flakyStore struct {
	workflow.Store
	mu       sync.Mutex
	failOnce map[string]weirtype.WorkflowStatus
	failed   map[string]bool
}

func newFlakyStore(s workflow.Store, failOnce map[string]weirtype.WorkflowStatus) *flakyStore {
	return &flakyStore{Store: s, failOnce: failOnce, failed: map[string]bool{}}
}

func (s *flakyStore) Executor() store.Executor { return flakyExecutor{s.Store.Executor(), s} }

func (s *flakyStore) InTx(ctx context.Context, fn func(ex store.Executor) error) error {
	return s.Store.InTx(ctx, func(ex store.Executor) error { return fn(flakyExecutor{ex, s}) })
}

// cut reports whether this advance of workflow id to status is the one to
// fail.
func (s *flakyStore) cut(id string, status weirtype.WorkflowStatus) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if want, ok := s.failOnce[id]; !ok || want != status || s.failed[id] {
		return false
	}
	s.failed[id] = true
	return true
}

// allCut reports whether every write meant to fail has failed.
func (s *flakyStore) allCut() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.failed) == len(s.failOnce)
}

type flakyExecutor struct {
	store.Executor
	s *flakyStore
}

func (e flakyExecutor) AdvanceWorkflow(ctx context.Context, now time.Time, p store.AdvanceParams) (*weirtype.Workflow, error) {
	status := p.Status
	if status == "" {
		status = weirtype.WorkflowRunning
	}
	if e.s.cut(p.ID, status) {
		return nil, fmt.Errorf("advance workflow %s: %w", p.ID, errConnReset)
	}
	return e.Executor.AdvanceWorkflow(ctx, now, p)
}

// A lost connection under the write that ends or moves a workflow is
// retried: it is never taken for the state's failure, nor does it turn a
// permanent error, or the last attempt, into a step dead-lettered while
// its workflow stays running. Here the write fails once: for a state that
// fails permanently ("poison"), for one that fails on its last attempt
// ("flaky"), and for one that moves on at its last attempt ("late").
func TestStoreFailureUnderATransitionIsRetried(t *testing.T) {
	forEachStore(t, testStoreFailureUnderATransitionIsRetried)
}

func testStoreFailureUnderATransitionIsRetried(t *testing.T, s workflow.Store) {
	var (
		mu   sync.Mutex
		runs = map[string]int{}
	)
	ran := func(id string) {
		mu.Lock()
		defer mu.Unlock()
		runs[id]++
	}
	def := &workflow.Definition{Name: "w", Start: "a", NotifyTopic: "w.done", States: map[string]workflow.Handler{
		"a": func(_ context.Context, r *workflow.Run) (workflow.Next, error) {
			ran(r.Workflow.ID)
			switch id := r.Workflow.ID; {
			case id == "poison":
				return workflow.Next{}, retry.Permanent(errors.New("unreadable document"))
			case id == "flaky" || r.Attempt < 3:
				return workflow.Next{}, fmt.Errorf("attempt %d failed", r.Attempt)
			}
			return workflow.Goto("b", nil), nil
		},
		"b": func(context.Context, *workflow.Run) (workflow.Next, error) { return workflow.Complete(nil), nil },
	}}
	flaky := newFlakyStore(s, map[string]weirtype.WorkflowStatus{
		"poison": weirtype.WorkflowFailed, "flaky": weirtype.WorkflowFailed, "late": weirtype.WorkflowRunning})
	// The engine writes through the flaky store; the client (its claims,
	// its dead letters) through the real one.
	eng := runningOn(t, flaky, s, "w1", def)
	want := map[string]weirtype.WorkflowStatus{"poison": weirtype.WorkflowFailed, "flaky": weirtype.WorkflowFailed, "late": weirtype.WorkflowCompleted}
	for id := range want {
		start(t, s, eng, "w", id, nil)
	}

	ctx := context.Background()
	ex := s.Executor()
	eventually.True(t, "every workflow ended", 30*time.Second, func() (bool, string) {
		// The dead letters first: a step dead-lettered before this read
		// must find its workflow ended by the next.
		dls, err := ex.ListDeadLetters(ctx, store.DeadLetterFilter{})
		if err != nil {
			t.Fatal(err)
		}
		ended := 0
		for id := range want {
			wf, err := ex.GetWorkflow(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if wf.Status.Final() {
				ended++
				continue
			}
			for _, dl := range dls {
				if dl.Source == "workflow "+id {
					t.Fatalf("the step of %s was dead-lettered (%s: %s) while the workflow is still running, in %s at version %d: nothing would ever end it",
						id, dl.Reason, dl.LastError, wf.State, wf.Version)
				}
			}
		}
		return ended == len(want), fmt.Sprintf("%d of %d workflows ended", ended, len(want))
	})
	if !flaky.allCut() {
		t.Fatal("not every write meant to fail was made: the test tested nothing")
	}

	for id, status := range want {
		wf, err := ex.GetWorkflow(ctx, id)
		if err != nil || wf.Status != status {
			t.Fatalf("%s ended %+v (%v), want %s", id, wf, err, status)
		}
	}
	if wf, _ := ex.GetWorkflow(ctx, "poison"); !strings.Contains(wf.Error, "unreadable document") || strings.Contains(wf.Error, "reset") {
		t.Fatalf("poison failed with %q, want the state's error alone", wf.Error)
	}
	mu.Lock()
	if runs["poison"] != 2 || runs["flaky"] != 4 {
		t.Fatalf("the states ran %v; want poison twice (its failure written at the second run) and flaky 4 times", runs)
	}
	mu.Unlock()
	got := map[string]weirtype.WorkflowStatus{}
	for _, n := range notifications(t, s) {
		if _, dup := got[n.Workflow]; dup {
			t.Fatalf("%s notified twice", n.Workflow)
		}
		got[n.Workflow] = n.Status
	}
	for id, status := range want {
		if got[id] != status {
			t.Fatalf("notifications %v, want %s for %s", got, status, id)
		}
	}
	// The failed workflows' steps, and only theirs, are dead letters, once
	// each, for the state's own reason. A step's job is abandoned after
	// its workflow's end is written (never a dead letter for a running
	// workflow), so the last one may land just after the workflow ended.
	var dls []*weirtype.DeadLetter
	eventually.True(t, "both failed steps dead-lettered", 10*time.Second, func() (bool, string) {
		var err error
		if dls, err = ex.ListDeadLetters(ctx, store.DeadLetterFilter{}); err != nil {
			t.Fatal(err)
		}
		return len(dls) >= 2, fmt.Sprintf("%d dead letters", len(dls))
	})
	reasons := map[string]weirtype.AbandonReason{}
	for _, dl := range dls {
		id := strings.TrimPrefix(dl.Source, "workflow ")
		if _, dup := reasons[id]; dup {
			t.Fatalf("the step of %s is dead-lettered twice", id)
		}
		reasons[id] = dl.Reason
		if strings.Contains(dl.LastError, "reset") {
			t.Fatalf("the step of %s is dead-lettered with the store's error: %s", id, dl.LastError)
		}
	}
	if len(reasons) != 2 || reasons["poison"] != weirtype.AbandonPermanent || reasons["flaky"] != weirtype.AbandonMaxAttempts {
		t.Fatalf("dead letters %v, want poison non_retryable and flaky max_attempts_exceeded only", reasons)
	}
}

// slowStore is a workflow.Store whose first GetWorkflow (slowRead) or
// first AdvanceWorkflow (otherwise) takes longer than the step's timeout,
// as a database under load does: it answers after delay, or fails when
// its context ends first.
type slowStore struct {
	workflow.Store
	slowRead bool
	delay    time.Duration
	once     sync.Once
}

func (s *slowStore) Executor() store.Executor { return slowExecutor{s.Store.Executor(), s} }

func (s *slowStore) InTx(ctx context.Context, fn func(ex store.Executor) error) error {
	return s.Store.InTx(ctx, func(ex store.Executor) error { return fn(slowExecutor{ex, s}) })
}

// wait waits out the delay the first time, or until ctx ends.
func (s *slowStore) wait(ctx context.Context) error {
	var err error
	s.once.Do(func() {
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-time.After(s.delay):
		}
	})
	return err
}

type slowExecutor struct {
	store.Executor
	s *slowStore
}

func (e slowExecutor) GetWorkflow(ctx context.Context, id string) (*weirtype.Workflow, error) {
	if e.s.slowRead {
		if err := e.s.wait(ctx); err != nil {
			return nil, fmt.Errorf("get workflow %s: %w", id, err)
		}
	}
	return e.Executor.GetWorkflow(ctx, id)
}

func (e slowExecutor) AdvanceWorkflow(ctx context.Context, now time.Time, p store.AdvanceParams) (*weirtype.Workflow, error) {
	if !e.s.slowRead {
		if err := e.s.wait(ctx); err != nil {
			return nil, fmt.Errorf("advance workflow %s: %w", p.ID, err)
		}
	}
	return e.Executor.AdvanceWorkflow(ctx, now, p)
}

// The engine's own reads and writes of a workflow are not cut short by
// the step's timeout, which would end the step's job, on its last
// attempt, with the workflow left running. A read that outlasts the
// timeout still finds the workflow, whose state then fails it on the
// ended attempt; a transition whose write outlasts it is written.
func TestSlowStoreOnTheLastAttemptEndsTheWorkflow(t *testing.T) {
	t.Run("read", func(t *testing.T) { testSlowStoreOnTheLastAttempt(t, true, weirtype.WorkflowFailed) })
	t.Run("transition", func(t *testing.T) { testSlowStoreOnTheLastAttempt(t, false, weirtype.WorkflowCompleted) })
}

func testSlowStoreOnTheLastAttempt(t *testing.T, slowRead bool, want weirtype.WorkflowStatus) {
	s := openStore(t, filepath.Join(t.TempDir(), "weir.db"))
	def := &workflow.Definition{Name: "w", Start: "a", NotifyTopic: "w.done", States: map[string]workflow.Handler{
		"a": func(ctx context.Context, _ *workflow.Run) (workflow.Next, error) {
			if err := ctx.Err(); err != nil && slowRead {
				return workflow.Next{}, err // the read outlasted the attempt
			}
			return workflow.Complete(nil), nil // done; the write is to be slow
		}}}
	slow := &slowStore{Store: s, slowRead: slowRead, delay: 300 * time.Millisecond}
	eng := runningWith(t, slow, s, "w1", weir.KindConfig{MaxAttempts: 1, Timeout: 50 * time.Millisecond}, def)
	start(t, s, eng, "w", "slow", nil)
	eventually.True(t, "the workflow ended", 20*time.Second, func() (bool, string) {
		dls, err := s.Executor().ListDeadLetters(context.Background(), store.DeadLetterFilter{})
		if err != nil {
			t.Fatal(err)
		}
		wf, err := s.Executor().GetWorkflow(context.Background(), "slow")
		if err != nil {
			t.Fatal(err)
		}
		if wf.Status.Final() {
			if wf.Status != want || want == weirtype.WorkflowFailed && !strings.Contains(wf.Error, "canceled") {
				t.Fatalf("ended %+v, want %s (failed by the step's timeout)", wf, want)
			}
			return true, ""
		}
		if len(dls) > 0 {
			t.Fatalf("the step was dead-lettered (%s: %s) while its workflow is still running", dls[0].Reason, dls[0].LastError)
		}
		return false, fmt.Sprintf("workflow %+v", wf)
	})
	if ns := notifications(t, s); len(ns) != 1 || ns[0].Status != want {
		t.Fatalf("notifications %+v, want one, %s", ns, want)
	}
}
