package weir

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/teststore"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// The producer claims ahead about as many jobs as its workers finish
// while a claim is in flight, none before it has measured both, none
// when attempts run long beside a claim, at most its workers, and none
// in a client with a limited kind.
func TestClaimAheadFollowsClaimAndRunTimes(t *testing.T) {
	c := &Client{}
	p := &producer{max: 8}
	for _, tc := range []struct {
		claim, ran time.Duration
		want       int
	}{
		{0, 0, 0},
		{time.Millisecond, 0, 0},
		{0, time.Millisecond, 0},
		{time.Millisecond, time.Millisecond, 8},
		{time.Millisecond, 4 * time.Millisecond, 2},
		{time.Millisecond, 10 * time.Millisecond, 1},
		{time.Millisecond, time.Second, 0},
		{10 * time.Millisecond, time.Millisecond, 8},
	} {
		p.claimTook.Store(int64(tc.claim))
		p.ranFor.Store(int64(tc.ran))
		if got := c.ahead(p); got != tc.want {
			t.Errorf("claims of %v, attempts of %v: %d ahead, want %d", tc.claim, tc.ran, got, tc.want)
		}
	}
	c.limits = []store.LimitParams{{Key: "k", MaxRunning: 1}}
	if got := c.ahead(p); got != 0 {
		t.Errorf("a client with a limited kind claims %d ahead, want none", got)
	}
}

type aheadArgs struct{}

func (aheadArgs) Kind() string { return "ahead" }

// Jobs claimed ahead are held running in the store beside the running
// ones (their leases heartbeated), and a Stop gives them back, their
// attempts returned, without running them: the workers that were busy
// finish their jobs, and no worker takes a job claimed ahead once the
// client is stopping.
func TestClaimedAheadJobsAreGivenBackAtStop(t *testing.T) {
	ctx := context.Background()
	s := teststore.SQLite(t, filepath.Join(t.TempDir(), "weir.db"))
	gate := make(chan struct{})
	var mu sync.Mutex
	var ran []int64
	ws := NewWorkers()
	if err := AddWorker(ws, WorkFunc(func(ctx context.Context, j *Job[aheadArgs]) error {
		mu.Lock()
		ran = append(ran, j.ID)
		mu.Unlock()
		<-gate
		return nil
	}), KindConfig{}); err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(Config{
		Store: s, Workers: ws, ID: "ahead", PollEvery: 20 * time.Millisecond,
		Queues: map[string]QueueConfig{DefaultQueue: {MaxWorkers: 2}},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	const n = 10
	for range n {
		if _, err := c.Insert(ctx, aheadArgs{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Attempts that take no time beside a claim: the producer claims as
	// many ahead as it has workers.
	c.producers[DefaultQueue].ranFor.Store(1)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	running := func() []*weirtype.Job {
		jobs, err := s.Executor().ListJobs(ctx, store.JobFilter{States: []weirtype.State{weirtype.StateRunning}, Limit: n})
		if err != nil {
			t.Fatal(err)
		}
		return jobs
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(running()) < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs running in the store, want the 2 workers' and 2 claimed ahead", len(running()))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := len(running()); got != 4 {
		t.Fatalf("%d jobs running in the store, want 4: 2 workers' and 2 claimed ahead, no more", got)
	}

	stopped := make(chan error, 1)
	go func() { stopped <- c.Stop(ctx) }()
	<-c.stopping
	close(gate)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != 2 {
		t.Fatalf("handlers ran for jobs %v, want only the 2 workers' first jobs", ran)
	}
	jobs, err := s.Executor().ListJobs(ctx, store.JobFilter{Limit: 2 * n})
	if err != nil {
		t.Fatal(err)
	}
	completed, givenBack := 0, 0
	for _, j := range jobs {
		switch {
		case j.State == weirtype.StateCompleted && j.Attempt == 1:
			completed++
		case j.State == weirtype.StateAvailable && j.Attempt == 0:
			if len(j.Errors) > 0 {
				givenBack++
			}
		default:
			t.Errorf("job %d: %s at attempt %d, want completed at 1 or available at 0", j.ID, j.State, j.Attempt)
		}
	}
	if completed != 2 || givenBack != 2 {
		t.Fatalf("%d completed and %d given back after a claim, want 2 and the 2 claimed ahead", completed, givenBack)
	}
}

// With CompleteWithin, successes wait up to that long to be written
// together: a job whose handler returned is still running in the store
// for a while, then completed about CompleteWithin later.
func TestCompleteWithinGathersSuccesses(t *testing.T) {
	ctx := context.Background()
	s := teststore.SQLite(t, filepath.Join(t.TempDir(), "weir.db"))
	var returned sync.WaitGroup
	ws := NewWorkers()
	if err := AddWorker(ws, WorkFunc(func(ctx context.Context, j *Job[aheadArgs]) error {
		defer returned.Done()
		return nil
	}), KindConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewClient(Config{Store: s, Workers: ws, CompleteWithin: -time.Second}); err == nil {
		t.Fatal("NewClient with a negative CompleteWithin: no error")
	}
	c, err := NewClient(Config{Store: s, Workers: ws, ID: "gather", CompleteWithin: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	returned.Add(3)
	for range 3 {
		if _, err := c.Insert(ctx, aheadArgs{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Stop(ctx); err != nil {
			t.Error(err)
		}
	}()
	returned.Wait()
	count := func(state weirtype.State) int {
		jobs, err := s.Executor().ListJobs(ctx, store.JobFilter{States: []weirtype.State{state}})
		if err != nil {
			t.Fatal(err)
		}
		return len(jobs)
	}
	if n := count(weirtype.StateRunning); n != 3 && time.Since(began) < 500*time.Millisecond {
		t.Fatalf("%d of 3 jobs running right after their handlers returned, want all 3 waiting to be written", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for count(weirtype.StateCompleted) != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 3 jobs completed 10 s after their handlers returned", count(weirtype.StateCompleted))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if waited := time.Since(began); waited < 500*time.Millisecond {
		t.Fatalf("the successes were written %v after the start, want about CompleteWithin (1 s) later", waited)
	}
}
