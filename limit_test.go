package weir_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/internal/eventually"
	"github.com/weirhq/weir/weirtype"
)

// gate is a worker whose attempts wait for release, and which keeps the
// most attempts it saw running at once.
type gate struct {
	release             chan struct{}
	running, most, done atomic.Int64
}

func newGate() *gate { return &gate{release: make(chan struct{})} }

func (g *gate) work(ctx context.Context, _ *weir.Job[task]) error {
	n := g.running.Add(1)
	for {
		m := g.most.Load()
		if n <= m || g.most.CompareAndSwap(m, n) {
			break
		}
	}
	defer g.running.Add(-1)
	select {
	case <-g.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	g.done.Add(1)
	return nil
}

// secondClient starts another client of the env's store, as another
// process would, with the same worker and kind config.
func (e *env) secondClient(w weir.Worker[task], kc weir.KindConfig) *weir.Client {
	e.t.Helper()
	ws := weir.NewWorkers()
	if err := weir.AddWorker(ws, w, kc); err != nil {
		e.t.Fatal(err)
	}
	c, err := weir.NewClient(weir.Config{Store: e.s, Workers: ws, ID: "second", Clock: e.fc, Logger: testLogger()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = stopOnFakeClock(c, e.fc) })
	if err := c.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	return c
}

// gatedOnTwoClients starts an env on open and a second client of its
// store, both running g's work under kc.
func gatedOnTwoClients(t *testing.T, open opener, g *gate, kc weir.KindConfig) *env {
	t.Helper()
	e := newEnvOn(t, open, weir.WorkFunc(g.work), kc, nil).start()
	e.secondClient(weir.WorkFunc(g.work), kc)
	return e
}

// settleAfter advances the clock until cond holds, then five seconds more,
// a second at a time, in which any attempt a limit let through would
// start.
func (e *env) settleAfter(cond func() bool) {
	e.t.Helper()
	e.advanceUntil(100*time.Millisecond, cond)
	for range 5 {
		e.advance(time.Second)
	}
}

// MaxRunning holds across clients: two clients of ten workers each run at
// most two attempts of the kind between them, and run every job.
func TestMaxRunningHoldsAcrossClients(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		g := newGate()
		kc := weir.KindConfig{MaxRunning: 2}
		e := gatedOnTwoClients(t, open, g, kc)
		var ids []int64
		for range 6 {
			ids = append(ids, e.insert(task{}, nil).ID)
		}
		e.settleAfter(func() bool { return g.running.Load() == 2 })
		if n := g.most.Load(); n != 2 {
			t.Fatalf("%d attempts ran at once, want the limit's 2", n)
		}
		ls, err := e.c.ListLimits(ctx)
		if err != nil || len(ls) != 1 || ls[0].Key != "task" || ls[0].MaxRunning != 2 || ls[0].Running != 2 {
			t.Fatalf("ListLimits = %+v, %v; want task's limit of 2 with 2 running", ls, err)
		}
		close(g.release)
		for _, id := range ids {
			e.advanceUntil(100*time.Millisecond, func() bool { return e.job(id).State == weirtype.StateCompleted })
		}
		if n := g.most.Load(); n != 2 {
			t.Fatalf("%d attempts ran at once, want the limit's 2", n)
		}
	})
}

// Rate holds across clients: three starts an hour, whichever client
// claims; the next window lets the rest start.
func TestRateHoldsAcrossClients(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		g := newGate()
		close(g.release)
		kc := weir.KindConfig{Rate: weir.Rate{N: 3, Per: time.Hour}}
		e := gatedOnTwoClients(t, open, g, kc)
		for range 5 {
			e.insert(task{}, nil)
		}
		e.settleAfter(func() bool { return g.done.Load() == 3 })
		if n := g.done.Load(); n != 3 {
			t.Fatalf("%d jobs ran in the hour, want the rate's 3", n)
		}
		ls, err := e.c.ListLimits(ctx)
		if err != nil || len(ls) != 1 || ls[0].WindowStarts != 3 || !ls[0].WindowStart.Equal(t0.Truncate(time.Hour)) {
			t.Fatalf("ListLimits = %+v, %v; want 3 starts in the window of %v", ls, err, t0.Truncate(time.Hour))
		}
		e.advance(t0.Truncate(time.Hour).Add(time.Hour).Sub(e.fc.Now()))
		e.advanceUntil(100*time.Millisecond, func() bool { return g.done.Load() == 5 })
	})
}

// A client records its kinds' limits at Start, and removes those its
// kinds no longer give.
func TestStartRecordsAndRemovesLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGate()
	e := newEnv(t, weir.WorkFunc(g.work), weir.KindConfig{MaxRunning: 4, Rate: weir.Rate{N: 10, Per: time.Second}}, nil).start()
	ls, err := e.c.ListLimits(ctx)
	if err != nil || len(ls) != 1 || ls[0].MaxRunning != 4 || ls[0].Rate != 10 || ls[0].Per != time.Second ||
		!slices.Equal(ls[0].Kinds, []string{"task"}) {
		t.Fatalf("ListLimits = %+v, %v; want task's", ls, err)
	}
	second := e.secondClient(weir.WorkFunc(g.work), weir.KindConfig{})
	if ls, err := second.ListLimits(ctx); err != nil || len(ls) != 0 {
		t.Fatalf("ListLimits after a client without limits started = %+v, %v; want none", ls, err)
	}
}

func TestLimitConfigRefusesBadValues(t *testing.T) {
	t.Parallel()
	g := newGate()
	for _, c := range []struct {
		kc   weir.KindConfig
		want string
	}{
		{weir.KindConfig{MaxRunning: -1}, "MaxRunning -1 is negative"},
		{weir.KindConfig{Rate: weir.Rate{N: 5}}, "per 0s is outside"},
		{weir.KindConfig{Rate: weir.Rate{N: -1, Per: time.Second}}, "rate -1 is negative"},
		{weir.KindConfig{Rate: weir.Rate{Per: time.Second}}, "per 1s is set without a rate"},
	} {
		err := weir.AddWorker(weir.NewWorkers(), weir.WorkFunc(g.work), c.kc)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("AddWorker(%+v) = %v, want an error with %q", c.kc, err, c.want)
		}
	}
	// Kinds sharing a key must give it the same limits.
	ws := weir.NewWorkers()
	if err := weir.AddWorker(ws, weir.WorkFunc(g.work), weir.KindConfig{RateLimitKey: "llm", MaxRunning: 2}); err != nil {
		t.Fatal(err)
	}
	if err := weir.AddWorker(ws, weir.WorkFunc(func(context.Context, *weir.Job[other]) error { return nil }),
		weir.KindConfig{RateLimitKey: "llm", MaxRunning: 3}); err != nil {
		t.Fatal(err)
	}
	_, err := weir.NewClient(weir.Config{Store: sqliteStore(t), Workers: ws})
	if err == nil || !strings.Contains(err.Error(), `share the limit key "llm" but not its limits`) {
		t.Fatalf("NewClient with two limits for one key: %v", err)
	}
	// Nor may a kind without limits name a limited kind's key.
	ws = weir.NewWorkers()
	if err := weir.AddWorker(ws, weir.WorkFunc(g.work), weir.KindConfig{RateLimitKey: "llm", MaxRunning: 2}); err != nil {
		t.Fatal(err)
	}
	if err := weir.AddWorker(ws, weir.WorkFunc(func(context.Context, *weir.Job[other]) error { return nil }),
		weir.KindConfig{RateLimitKey: "llm"}); err != nil {
		t.Fatal(err)
	}
	_, err = weir.NewClient(weir.Config{Store: sqliteStore(t), Workers: ws})
	if err == nil || !strings.Contains(err.Error(), `"other" gives no MaxRunning or Rate`) {
		t.Fatalf("NewClient with a limited and an unlimited kind of one key: %v", err)
	}
}

// A limit below the workers' count does not make its queue look empty: a
// claim the limit cut short is followed by the next as the kind's
// attempts end and their successes are written, so that the jobs run one
// after another with the clock standing, where the producer used to wait
// for PollEvery after every claim.
func TestLimitedQueueClaimsAsAttemptsEnd(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		var ran atomic.Int64
		w := weir.WorkFunc(func(context.Context, *weir.Job[task]) error {
			ran.Add(1)
			return nil
		})
		e := newEnvOn(t, open, w, weir.KindConfig{MaxRunning: 2}, nil).start()
		const n = 30
		ids := make([]int64, 0, n)
		for range n {
			ids = append(ids, e.insert(task{}, nil).ID)
		}
		eventually.True(t, "every job run with the clock standing", waitLimit, func() (bool, string) {
			return ran.Load() == n, fmt.Sprintf("%d of %d run", ran.Load(), n)
		})
		for _, id := range ids {
			e.waitState(id, weirtype.StateCompleted, 1)
		}
	})
}

// task2 is a second kind, for tests of two kinds in one client.
type task2 struct{}

func (task2) Kind() string { return "task2" }

// Two kinds in two queues share one MaxRunning through RateLimitKey: the
// attempts of one queue's kind free the limit for the other queue too,
// whose producer claims again with the clock standing.
func TestSharedLimitAcrossQueuesRunsBoth(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		var ran1, ran2 atomic.Int64
		w := weir.WorkFunc(func(context.Context, *weir.Job[task]) error { ran1.Add(1); return nil })
		w2 := weir.WorkFunc(func(context.Context, *weir.Job[task2]) error { ran2.Add(1); return nil })
		e := newEnvOn(t, open, w, weir.KindConfig{MaxRunning: 1, RateLimitKey: "api"}, func(c *weir.Config) {
			c.Queues = map[string]weir.QueueConfig{weir.DefaultQueue: {MaxWorkers: 4}, "q2": {MaxWorkers: 4}}
			if err := weir.AddWorker(c.Workers, w2, weir.KindConfig{MaxRunning: 1, RateLimitKey: "api", Queue: "q2"}); err != nil {
				t.Fatal(err)
			}
		}).start()
		const n = 20
		for range n {
			e.insert(task{}, nil)
			if _, err := e.c.Insert(context.Background(), task2{}, nil); err != nil {
				t.Fatal(err)
			}
		}
		eventually.True(t, "every job of both queues run with the clock standing", waitLimit, func() (bool, string) {
			return ran1.Load() == n && ran2.Load() == n, fmt.Sprintf("queue default %d of %d, queue q2 %d of %d", ran1.Load(), n, ran2.Load(), n)
		})
	})
}

// A limited kind inserted in another queue of the client (InsertOpts.Queue)
// runs there one attempt after another with the clock standing, as in its
// own queue.
func TestLimitedKindInAnotherQueueRuns(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		var ran atomic.Int64
		w := weir.WorkFunc(func(context.Context, *weir.Job[task]) error { ran.Add(1); return nil })
		e := newEnvOn(t, open, w, weir.KindConfig{MaxRunning: 2}, func(c *weir.Config) {
			c.Queues = map[string]weir.QueueConfig{weir.DefaultQueue: {MaxWorkers: 4}, "other": {MaxWorkers: 4}}
		}).start()
		const n = 20
		for range n {
			e.insert(task{}, &weir.InsertOpts{Queue: "other"})
		}
		eventually.True(t, "every job run with the clock standing", waitLimit, func() (bool, string) {
			return ran.Load() == n, fmt.Sprintf("%d of %d", ran.Load(), n)
		})
	})
}
