package metrics_test

import (
	"context"
	"sync"
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
	// block makes CountJobs wait for its context to end.
	block bool

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
	f.mu.Unlock()
	if f.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return f.counts, f.err
}

// ListPauses of the job-count tests' fake store: nothing is paused.
func (f *fakeExecutor) ListPauses(context.Context, time.Time) ([]*weirtype.Pause, error) {
	return nil, nil
}

// ListLimits of the job-count tests' fake store: there is none.
func (f *fakeExecutor) ListLimits(context.Context) ([]*weirtype.Limit, error) { return nil, nil }
