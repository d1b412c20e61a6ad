package metrics_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

var t0 = time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)

// fakeStore is a store.Store whose Executor returns canned CountJobs
// results. Every other method of the embedded nil interfaces panics if
// called, which the tests would report.
type fakeStore struct {
	store.Store
	ex *fakeExecutor
}

var _ store.Store = (*fakeStore)(nil)

func (f *fakeStore) Executor() store.Executor { return f.ex }

type fakeExecutor struct {
	store.Executor

	counts []store.JobCount
	err    error
	// block makes CountJobs wait for its context to end, or for gate to
	// close when it is set.
	block bool
	gate  chan struct{}

	mu          sync.Mutex
	calls       int
	stuckBefore time.Time
	hadDeadline bool
}

func (f *fakeExecutor) CountJobs(ctx context.Context, stuckBefore time.Time) ([]store.JobCount, error) {
	f.mu.Lock()
	f.calls++
	f.stuckBefore = stuckBefore
	_, f.hadDeadline = ctx.Deadline()
	block, gate := f.block, f.gate
	f.mu.Unlock()
	if block {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-gate:
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts, f.err
}

// set changes what the next counts return, and whether they block.
func (f *fakeExecutor) set(counts []store.JobCount, block bool, gate chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts, f.block, f.gate = counts, block, gate
}

// callCount returns how many counts were asked for.
func (f *fakeExecutor) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// ListPauses of the job-count tests' fake store: nothing is paused.
func (f *fakeExecutor) ListPauses(context.Context, time.Time) ([]*weirtype.Pause, error) {
	return nil, nil
}

// ListLimits of the job-count tests' fake store: there is none.
func (f *fakeExecutor) ListLimits(context.Context) ([]*weirtype.Limit, error) { return nil, nil }

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
