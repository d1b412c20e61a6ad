package weir_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/internal/syncio"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// batchFailEx fails the first fail CompleteMany calls, the first once all
// of the test's handlers have returned, and records how many leases each
// failed call carried.
type batchFailEx struct {
	store.Executor
	fail     atomic.Int32
	returned func() bool
	mu       sync.Mutex
	failed   []int
}

func (e *batchFailEx) CompleteMany(ctx context.Context, now time.Time, ls []store.Lease) ([]int64, error) {
	if e.fail.Add(-1) < 0 {
		return e.Executor.CompleteMany(ctx, now, ls)
	}
	for !e.returned() && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	e.mu.Lock()
	e.failed = append(e.failed, len(ls))
	e.mu.Unlock()
	return nil, errInjected
}

type batchFailStore struct {
	store.Store
	ex *batchFailEx
}

func (s *batchFailStore) Executor() store.Executor { return s.ex }

// A failed write of a batch of completions logs one line, with how many
// jobs and their first ids, not one line per job: a lost connection fails
// every job of a batch alike, and used to print as many identical
// warnings as the batch held jobs.
func TestFailedCompletionBatchLogsOneLine(t *testing.T) {
	t.Parallel()
	const n = 8
	var returned atomic.Int32
	ex := &batchFailEx{returned: func() bool { return returned.Load() == n }}
	ex.fail.Store(2)
	var logs syncio.Buffer
	release := make(chan struct{})
	e := newEnv(t, weir.WorkFunc(func(context.Context, *weir.Job[task]) error {
		<-release
		returned.Add(1)
		return nil
	}), weir.KindConfig{}, func(c *weir.Config) {
		ex.Executor = c.Store.Executor()
		c.Store = &batchFailStore{Store: c.Store, ex: ex}
		warnsTo(c, n, &logs)
	}).start()
	ids := insertTasks(e, n)
	close(release)
	for _, id := range ids {
		e.advanceState(id, time.Second, weirtype.StateCompleted, 1)
	}
	ex.mu.Lock()
	failed := append([]int(nil), ex.failed...)
	ex.mu.Unlock()
	lines := strings.Count(logs.String(), "complete: write failed")
	if len(failed) != 2 || lines != len(failed) {
		t.Fatalf("%d failed writes of %v jobs logged %d lines, want one line each:\n%s", len(failed), failed, lines, logs.String())
	}
	for _, k := range failed {
		if !strings.Contains(logs.String(), fmt.Sprintf("jobs=%d ", k)) {
			t.Errorf("no line says jobs=%d:\n%s", k, logs.String())
		}
	}
}

// A heartbeat that finds the leases of several running attempts lost (here
// their jobs cancelled in the store behind the client's back, as another
// process's operator would) cancels each attempt and logs one line, with
// how many jobs and their ids, not one line per job.
func TestHeartbeatFindingLeasesLostLogsOneLine(t *testing.T) {
	t.Parallel()
	const n = 3
	var started, cancelled atomic.Int32
	var logs syncio.Buffer
	e := newEnv(t, weir.WorkFunc(func(ctx context.Context, _ *weir.Job[task]) error {
		started.Add(1)
		<-ctx.Done()
		if errors.Is(context.Cause(ctx), store.ErrLeaseLost) {
			cancelled.Add(1)
		}
		return ctx.Err()
	}), weir.KindConfig{}, func(c *weir.Config) {
		warnsTo(c, n, &logs)
	}).start()
	ids := insertTasks(e, n)
	waitFor(t, func() bool { return started.Load() == n })
	for _, id := range ids {
		if _, err := e.s.Executor().Cancel(context.Background(), e.fc.Now(), id); err != nil {
			t.Fatal(err)
		}
	}
	e.fc.Advance(weir.DefaultLeaseFor / 3) // the heartbeat
	waitFor(t, func() bool { return cancelled.Load() == n })
	if lines := strings.Count(logs.String(), "leases lost"); lines != 1 || !strings.Contains(logs.String(), fmt.Sprintf("jobs=%d ", n)) {
		t.Fatalf("%d lines for %d leases lost in one heartbeat, want one saying jobs=%d:\n%s", lines, n, n, logs.String())
	}
}

// warnsTo gives c n workers on the default queue and its warnings, as
// text, in logs.
func warnsTo(c *weir.Config, n int, logs *syncio.Buffer) {
	c.Queues = map[string]weir.QueueConfig{weir.DefaultQueue: {MaxWorkers: n}}
	c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// insertTasks inserts n tasks and returns their ids.
func insertTasks(e *env, n int) []int64 {
	ids := make([]int64, 0, n)
	for range n {
		ids = append(ids, e.insert(task{}, nil).ID)
	}
	return ids
}
