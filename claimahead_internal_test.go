package weir

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/clock"
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

// With a worker idle the producer claims for every free slot and its
// reserve at once; with all busy it waits until a batch has been taken
// from the reserve, which still holds the jobs its workers finish while
// the claim is in flight. A batch is as many jobs as it has workers, at
// most 4 per job ahead, or, when more, the jobs its workers run in 5 ms,
// at most 32. Without measures, or with attempts long beside a claim, it
// claims only for free workers, one at a time as they free.
func TestToClaimBatchesWhileTheWorkersAreBusy(t *testing.T) {
	c := &Client{}
	for _, tc := range []struct {
		name           string
		workers        int
		claim, ran     time.Duration
		running, ready int
		want           int
	}{
		{"nothing measured, all idle", 8, 0, 0, 0, 0, 8},
		{"nothing measured, one free", 8, 0, 0, 7, 0, 1},
		{"nothing measured, all busy", 8, 0, 0, 8, 0, 0},
		{"long attempts, one free", 8, time.Millisecond, time.Second, 7, 0, 1},
		// ahead 2: a reserve of 2 and a batch of 10, the jobs of 5 ms.
		{"all idle", 8, time.Millisecond, 4 * time.Millisecond, 0, 0, 20},
		{"one idle", 8, time.Millisecond, 4 * time.Millisecond, 7, 0, 13},
		{"all busy, reserve full", 8, time.Millisecond, 4 * time.Millisecond, 8, 12, 0},
		{"all busy, less than a batch taken", 8, time.Millisecond, 4 * time.Millisecond, 8, 3, 0},
		{"all busy, a batch taken", 8, time.Millisecond, 4 * time.Millisecond, 8, 2, 10},
		{"all busy, more taken", 8, time.Millisecond, 4 * time.Millisecond, 8, 1, 11},
		// ahead 1 (attempts of 8 claims): a batch of 5, the jobs of 5 ms.
		{"long attempts, all busy, reserve full", 8, time.Millisecond, 8 * time.Millisecond, 8, 6, 0},
		{"long attempts, all busy, a batch taken", 8, time.Millisecond, 8 * time.Millisecond, 8, 1, 5},
		// As many workers as jobs of 5 ms: the batch of 4 per job ahead.
		{"workers' batch", 8, 10 * time.Millisecond, 5 * time.Millisecond, 8, 8, 8},
		// Two workers on jobs of 1 ms: a batch of 10, not 2; of 100 µs,
		// the most, 32.
		{"few workers, short attempts", 2, time.Millisecond, time.Millisecond, 2, 2, 10},
		{"few workers, shorter attempts", 2, time.Millisecond, 100 * time.Microsecond, 2, 2, 32},
	} {
		p := &producer{max: tc.workers, ready: make(chan *claimedJob, readyCap(tc.workers))}
		p.claimTook.Store(int64(tc.claim))
		p.ranFor.Store(int64(tc.ran))
		for range tc.ready {
			p.ready <- &claimedJob{}
		}
		if got := c.toClaim(p, tc.running); got != tc.want {
			t.Errorf("%s (%d workers, %d running, %d ready): claims %d, want %d", tc.name, tc.workers, tc.running, tc.ready, got, tc.want)
		}
	}
	// What the producer holds ahead fits in its ready channel however
	// the claims and attempts run.
	for _, workers := range []int{1, 2, 8, 31, 32, 33, 100, 1000} {
		p := &producer{max: workers}
		for _, claim := range []time.Duration{time.Nanosecond, time.Millisecond, time.Second} {
			for _, ran := range []time.Duration{time.Nanosecond, time.Microsecond, time.Millisecond, time.Second} {
				p.claimTook.Store(int64(claim))
				p.ranFor.Store(int64(ran))
				if a := c.ahead(p); a+c.batch(p, a) > readyCap(workers) {
					t.Errorf("%d workers, claims of %v, attempts of %v: %d ahead and a batch of %d, more than the %d ready holds", workers, claim, ran, a, c.batch(p, a), readyCap(workers))
				}
			}
		}
	}
}

type aheadArgs struct {
	Slow bool `json:"slow,omitempty"`
}

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
	// Attempts that take no time beside a claim: the producer claims
	// ahead as many as it has workers (2), and the largest batch.
	const ahead = 2 + batchSpanMax
	const n = 2 + ahead + 4
	for range n {
		if _, err := c.Insert(ctx, aheadArgs{}, nil); err != nil {
			t.Fatal(err)
		}
	}
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
	for len(running()) < 2+ahead {
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs running in the store, want the 2 workers' and %d claimed ahead", len(running()), ahead)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := len(running()); got != 2+ahead {
		t.Fatalf("%d jobs running in the store, want %d: 2 workers' and %d claimed ahead (a reserve of 2 and a batch of %d), no more", got, 2+ahead, ahead, batchSpanMax)
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
	if completed != 2 || givenBack != ahead {
		t.Fatalf("%d completed and %d given back after a claim, want 2 and the %d claimed ahead", completed, givenBack, ahead)
	}
}

// With CompleteWithin, a success waits for the other jobs of its claim
// that still run, and is written with the last of them as soon as that
// one ends (not CompleteWithin later); a job claimed alone is written at
// once; a success whose claim-mate runs longer than CompleteWithin is
// written after CompleteWithin.
func TestCompleteWithinWaitsForTheRestOfItsClaim(t *testing.T) {
	ctx := context.Background()
	s := teststore.SQLite(t, filepath.Join(t.TempDir(), "weir.db"))
	var returned sync.WaitGroup
	release := make(chan struct{})
	slowStarted := make(chan struct{}, 2)
	ws := NewWorkers()
	if err := AddWorker(ws, WorkFunc(func(ctx context.Context, j *Job[aheadArgs]) error {
		defer returned.Done()
		if j.Args.Slow {
			slowStarted <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done(): // Stop after a failure
			}
		}
		return nil
	}), KindConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewClient(Config{Store: s, Workers: ws, CompleteWithin: -time.Second}); err == nil {
		t.Fatal("NewClient with a negative CompleteWithin: no error")
	}
	const within = 3 * time.Second
	c, err := NewClient(Config{Store: s, Workers: ws, ID: "gather", CompleteWithin: within, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := (Config{Store: s, Workers: ws}).withDefaults(); err != nil || got.CompleteWithin != 10*time.Millisecond {
		t.Fatalf("default CompleteWithin %v (%v), want 10ms", got.CompleteWithin, err)
	}
	state := func(id int64) weirtype.State {
		j, err := s.Executor().GetJob(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return j.State
	}
	waitState := func(id int64, want weirtype.State, limit time.Duration) time.Duration {
		began := time.Now()
		for state(id) != want {
			if time.Since(began) > limit {
				t.Fatalf("job %d is %s %v later, want %s", id, state(id), limit, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
		return time.Since(began)
	}
	// One claim takes both: they are inserted before the start.
	quick, err := c.Insert(ctx, aheadArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	slow, err := c.Insert(ctx, aheadArgs{Slow: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	returned.Add(2)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	released := false
	defer func() {
		if !released {
			close(release)
		}
		if err := c.Stop(ctx); err != nil {
			t.Error(err)
		}
	}()
	<-slowStarted
	began := time.Now()
	for state(quick.Job.ID) == weirtype.StateAvailable {
		time.Sleep(5 * time.Millisecond)
	}
	// The quick job's handler returns at once; its success waits for the
	// slow one, its claim-mate.
	time.Sleep(100 * time.Millisecond)
	if st := state(quick.Job.ID); st != weirtype.StateRunning && time.Since(began) < within/2 {
		t.Fatalf("the quick job is %s while its claim-mate runs, want running (its success waiting)", st)
	}
	close(release)
	released = true
	returned.Wait()
	if took := waitState(quick.Job.ID, weirtype.StateCompleted, within/2); took > within/3 {
		t.Errorf("the quick job was written %v after the last of its claim ended, want at once", took)
	}
	waitState(slow.Job.ID, weirtype.StateCompleted, time.Second)

	// A job claimed alone is written at once.
	returned.Add(1)
	alone, err := c.Insert(ctx, aheadArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	returned.Wait()
	if took := waitState(alone.Job.ID, weirtype.StateCompleted, within/2); took > within/3 {
		t.Errorf("a job claimed alone was written %v after its handler returned, want at once", took)
	}
}

// A success whose claim-mate runs past CompleteWithin is written after
// CompleteWithin, without waiting for it.
func TestCompleteWithinBoundsTheWait(t *testing.T) {
	ctx := context.Background()
	s := teststore.SQLite(t, filepath.Join(t.TempDir(), "weir.db"))
	release := make(chan struct{})
	ws := NewWorkers()
	if err := AddWorker(ws, WorkFunc(func(ctx context.Context, j *Job[aheadArgs]) error {
		if j.Args.Slow {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	}), KindConfig{}); err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(Config{Store: s, Workers: ws, ID: "bound", CompleteWithin: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	quick, err := c.Insert(ctx, aheadArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Insert(ctx, aheadArgs{Slow: true}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		close(release)
		if err := c.Stop(ctx); err != nil {
			t.Error(err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, err := s.Executor().GetJob(ctx, quick.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.State == weirtype.StateCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the quick job is %s 10 s on while its claim-mate runs, want completed after CompleteWithin", j.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// With ClaimCooldown, an insert into an idle queue is claimed at once,
// and one that comes right after that claim waits until ClaimCooldown
// has passed since it began.
func TestClaimCooldownSpacesClaimsOfInserts(t *testing.T) {
	ctx := context.Background()
	s := teststore.SQLite(t, filepath.Join(t.TempDir(), "weir.db"))
	started := make(chan time.Time, 2)
	ws := NewWorkers()
	if err := AddWorker(ws, WorkFunc(func(ctx context.Context, j *Job[aheadArgs]) error {
		started <- time.Now()
		return nil
	}), KindConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewClient(Config{Store: s, Workers: ws, ClaimCooldown: -time.Second}); err == nil {
		t.Fatal("NewClient with a negative ClaimCooldown: no error")
	}
	const cooldown = 400 * time.Millisecond
	c := startClient(t, Config{Store: s, Workers: ws, ID: "cooldown", ClaimCooldown: cooldown, PollEvery: time.Minute, Logger: slog.New(slog.DiscardHandler)})
	// The start's first claim found the queue empty; let its cooldown
	// pass, so that the first insert meets an idle queue.
	time.Sleep(cooldown + 100*time.Millisecond)
	inserted := time.Now()
	if _, err := c.Insert(ctx, aheadArgs{}, nil); err != nil {
		t.Fatal(err)
	}
	first := <-started
	if wait := first.Sub(inserted); wait >= cooldown {
		t.Fatalf("the first insert into an idle queue started %v later, want at once (before the cooldown of %v)", wait, cooldown)
	}
	if _, err := c.Insert(ctx, aheadArgs{}, nil); err != nil {
		t.Fatal(err)
	}
	second := <-started
	// The second claim begins at least cooldown after the first began,
	// which was before the first job started.
	if gap := second.Sub(first); gap < cooldown-50*time.Millisecond {
		t.Fatalf("the second insert started %v after the first, want the cooldown of %v between their claims", gap, cooldown)
	}
}

// ClaimCooldown is 25 ms by default, and a wake right after a claim
// waits for the cooldown's end.
func TestClaimCooldownDefaultAndWait(t *testing.T) {
	if got, err := (Config{Store: teststore.SQLite(t, filepath.Join(t.TempDir(), "weir.db")), Workers: NewWorkers()}).withDefaults(); err != nil || got.ClaimCooldown != 25*time.Millisecond {
		t.Fatalf("default ClaimCooldown %v (%v), want 25ms", got.ClaimCooldown, err)
	}
	const cooldown = 300 * time.Millisecond
	c := &Client{cfg: Config{ClaimCooldown: cooldown}, clock: clock.Real, realTime: true, stopping: make(chan struct{})}
	began := time.Now()
	if !c.cooldown(began) {
		t.Fatal("cooldown: reported a stop")
	}
	if waited := time.Since(began); waited < cooldown-50*time.Millisecond {
		t.Errorf("cooldown of %v: waited %v after a claim that began at once", cooldown, waited)
	}
}

// ridingEx counts, by job id, the completions written by CompleteMany
// and those written with a claim (store.CompletingClaimer).
type ridingEx struct {
	store.Executor
	mu          sync.Mutex
	alone, rode map[int64]int
	fail        int // CompleteAndClaim calls with completions still to fail
}

func (e *ridingEx) CompleteMany(ctx context.Context, now time.Time, ls []store.Lease) ([]int64, error) {
	lost, err := e.Executor.CompleteMany(ctx, now, ls)
	if err == nil {
		e.count(e.alone, ls)
	}
	return lost, err
}

func (e *ridingEx) CompleteAndClaim(ctx context.Context, done []store.Lease, p store.ClaimParams) ([]int64, []*weirtype.Job, error) {
	e.mu.Lock()
	failing := len(done) > 0 && e.fail > 0
	if failing {
		e.fail--
	}
	e.mu.Unlock()
	if failing {
		return nil, nil, errors.New("injected: connection lost")
	}
	lost, jobs, err := e.Executor.(store.CompletingClaimer).CompleteAndClaim(ctx, done, p)
	if err == nil {
		e.count(e.rode, done)
	}
	return lost, jobs, err
}

func (e *ridingEx) count(m map[int64]int, ls []store.Lease) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, l := range ls {
		m[l.ID]++
	}
}

func (e *ridingEx) counts(id int64) (alone, rode int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.alone[id], e.rode[id]
}

type ridingStore struct {
	store.Store
	ex *ridingEx
}

func (s ridingStore) Executor() store.Executor { return s.ex }

// A success queued while its producer cools down after a claim that
// emptied the queue waits for the claim the producer wakes for, and rides
// with it: one transaction writes both. A failed write with a claim gives
// the successes back, to be written once: nothing is lost or written
// twice.
func TestSuccessesRideWithTheNextClaim(t *testing.T) {
	for _, fail := range []int{0, 1} {
		t.Run(map[int]string{0: "written", 1: "write-failed"}[fail], func(t *testing.T) {
			testSuccessesRide(t, fail)
		})
	}
}

func testSuccessesRide(t *testing.T, fail int) {
	ctx := context.Background()
	s := teststore.SQLite(t, filepath.Join(t.TempDir(), "weir.db"))
	ex := &ridingEx{Executor: s.Executor(), alone: map[int64]int{}, rode: map[int64]int{}, fail: fail}
	returned := make(chan int64, 8)
	ws := NewWorkers()
	if err := AddWorker(ws, WorkFunc(func(_ context.Context, j *Job[aheadArgs]) error {
		returned <- j.ID
		return nil
	}), KindConfig{}); err != nil {
		t.Fatal(err)
	}
	const cooldown = 400 * time.Millisecond
	c := startClient(t, Config{Store: ridingStore{s, ex}, Workers: ws, ID: "riding", ClaimCooldown: cooldown,
		PollEvery: time.Second, Logger: slog.New(slog.DiscardHandler)})
	completed := func(id int64) {
		t.Helper()
		for began := time.Now(); ; time.Sleep(5 * time.Millisecond) {
			j, err := s.Executor().GetJob(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			// The write is counted once it returned, after its commit.
			if alone, rode := ex.counts(id); j.State == weirtype.StateCompleted && alone+rode > 0 {
				return
			}
			if time.Since(began) > 10*time.Second {
				t.Fatalf("job %d is %s 10 s later, want completed and its write counted", id, j.State)
			}
		}
	}
	// a is claimed alone at once; its claim starts the cooldown.
	a, err := c.Insert(ctx, aheadArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-returned
	// b wakes the producer during the cooldown: its claim, at the end of
	// the cooldown, takes a's success.
	time.Sleep(cooldown / 8)
	if st, err := s.Executor().GetJob(ctx, a.Job.ID); err != nil || st.State != weirtype.StateRunning {
		t.Fatalf("a's success is written (%v, %v) before the claim its producer woke for", st.State, err)
	}
	b, err := c.Insert(ctx, aheadArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A failed claim is tried again after the poll's backoff.
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("b did not run within 10 s")
	}
	completed(a.Job.ID)
	alone, rode := ex.counts(a.Job.ID)
	if fail == 0 && (alone != 0 || rode != 1) {
		t.Errorf("a's success written %d times alone and %d with a claim, want with the claim only", alone, rode)
	}
	if fail == 1 {
		ex.mu.Lock()
		left := ex.fail
		ex.mu.Unlock()
		if left != 0 || alone+rode != 1 {
			t.Errorf("after a failed write with a claim (%d failures left to inject), a's success written %d times alone and %d with a claim, want once", left, alone, rode)
		}
	}
	// b's success is written once, with a claim or after the cooldown.
	completed(b.Job.ID)
	if alone, rode := ex.counts(b.Job.ID); alone+rode != 1 {
		t.Errorf("b's success written %d times alone and %d with a claim, want once", alone, rode)
	}
}

// With the queue full, the producer claims again as soon as its workers
// took a batch of the jobs it claimed ahead, and the successes queued
// meanwhile ride with that claim: two workers on short jobs write almost
// every success with a claim, where the completer, idle, would write
// each alone or in pairs. Each success is still written once.
func TestSuccessesRideWithClaimsWhileTheQueueIsFull(t *testing.T) {
	for name, open := range map[string]func(*testing.T) store.Store{
		"sqlite": func(t *testing.T) store.Store { return teststore.SQLite(t, filepath.Join(t.TempDir(), "weir.db")) },
		"postgres": func(t *testing.T) store.Store {
			s, _ := teststore.PostgresStore(t, "weirtest_riding_", 8)
			return s
		},
	} {
		t.Run(name, func(t *testing.T) { testSuccessesRideWhileFull(t, open(t)) })
	}
}

func testSuccessesRideWhileFull(t *testing.T, s store.Store) {
	ctx := context.Background()
	ex := &ridingEx{Executor: s.Executor(), alone: map[int64]int{}, rode: map[int64]int{}}
	const n = 600
	var ran atomic.Int64
	ws := NewWorkers()
	if err := AddWorker(ws, WorkFunc(func(_ context.Context, j *Job[aheadArgs]) error {
		time.Sleep(time.Millisecond)
		ran.Add(1)
		return nil
	}), KindConfig{}); err != nil {
		t.Fatal(err)
	}
	params := make([]InsertManyParams, n)
	for i := range params {
		params[i] = InsertManyParams{Args: aheadArgs{}}
	}
	// CompleteWithin, the longest wait, long enough for a loaded machine.
	c := startClient(t, Config{Store: ridingStore{s, ex}, Workers: ws, ID: "busy",
		Queues:         map[string]QueueConfig{DefaultQueue: {MaxWorkers: 2}},
		CompleteWithin: 200 * time.Millisecond,
		PollEvery:      time.Second, Logger: slog.New(slog.DiscardHandler)})
	if _, err := c.InsertMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	for began := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		ex.mu.Lock()
		written := len(ex.alone) + len(ex.rode)
		ex.mu.Unlock()
		if written == n {
			break
		}
		if time.Since(began) > 30*time.Second {
			t.Fatalf("%d of %d successes written after 30 s (%d ran)", written, n, ran.Load())
		}
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	var alone, rode int
	for id, k := range ex.alone {
		alone += k
		if ex.rode[id] > 0 || k != 1 {
			t.Errorf("job %d's success written %d times alone and %d with a claim, want once", id, k, ex.rode[id])
		}
	}
	for id, k := range ex.rode {
		rode += k
		if k != 1 {
			t.Errorf("job %d's success written %d times with a claim, want once", id, k)
		}
	}
	// The last claim comes back short and its successes wait through the
	// cooldown.
	if rode < n*9/10 {
		t.Errorf("%d of %d successes rode with a claim and %d were written alone, want at least 90%% with a claim", rode, n, alone)
	}
}

// startClient makes a client of cfg and starts it; it is stopped when
// the test ends.
func startClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return c
}
