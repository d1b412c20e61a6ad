package weir_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/internal/syncio"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// Regression tests of the engine review findings (docs/design-notes.md),
// each injecting its fault through a store that wraps the SQLite one.

var errInjected = errors.New("injected: connection reset")

// faultStore is a store whose executor is ex.
type faultStore struct {
	store.Store
	ex *faultEx
}

func (s *faultStore) Executor() store.Executor { return s.ex }

// faultEx fails the next failComplete CompleteMany calls, the next failFail
// Fail calls, every ReleaseOwned without giveBack while failRelease is
// set and every Heartbeat while failHeartbeat is set; while blockClaim is
// set, Claim blocks until its context ends. It counts the calls of the
// client's loops.
type faultEx struct {
	store.Executor
	failComplete  atomic.Int32
	failFail      atomic.Int32
	failRelease   atomic.Bool
	failHeartbeat atomic.Bool
	blockClaim    atomic.Bool
	loopCalls     atomic.Int64 // Claim, Heartbeat and RescueExpired calls
	heartbeats    atomic.Int64 // Heartbeat calls
	blockedClaims atomic.Int64 // Claim calls blocked by blockClaim
	getJobs       atomic.Int64 // GetJob calls
	// duringHeartbeat, when set before the client starts, runs inside
	// each Heartbeat call, before the store's.
	duringHeartbeat func()
	// afterComplete, when set before the client starts, runs inside each
	// CompleteMany call, after the store's has written.
	afterComplete  func()
	heartbeatsDone atomic.Int64 // Heartbeat calls that returned
	// blockKinds, when set before the client starts, is closed by each
	// FinalJobKinds call (the retention sweep's first read), which then
	// waits for its context to end.
	blockKinds chan struct{}
}

func (e *faultEx) FinalJobKinds(ctx context.Context) ([]string, error) {
	if e.blockKinds != nil {
		close(e.blockKinds)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return e.Executor.FinalJobKinds(ctx)
}

func (e *faultEx) GetJob(ctx context.Context, id int64) (*weirtype.Job, error) {
	e.getJobs.Add(1)
	return e.Executor.GetJob(ctx, id)
}

func (e *faultEx) CompleteMany(ctx context.Context, now time.Time, ls []store.Lease) ([]int64, error) {
	if e.failComplete.Add(-1) >= 0 {
		return nil, errInjected
	}
	lost, err := e.Executor.CompleteMany(ctx, now, ls)
	if e.afterComplete != nil {
		e.afterComplete()
	}
	return lost, err
}

func (e *faultEx) Fail(ctx context.Context, p store.FailParams) (*weirtype.Job, error) {
	if e.failFail.Add(-1) >= 0 {
		return nil, errInjected
	}
	return e.Executor.Fail(ctx, p)
}

func (e *faultEx) ReleaseOwned(ctx context.Context, now time.Time, owner string, giveBack bool) ([]int64, error) {
	if !giveBack && e.failRelease.Load() {
		return nil, errInjected
	}
	return e.Executor.ReleaseOwned(ctx, now, owner, giveBack)
}

func (e *faultEx) Claim(ctx context.Context, p store.ClaimParams) ([]*weirtype.Job, error) {
	e.loopCalls.Add(1)
	if e.blockClaim.Load() {
		e.blockedClaims.Add(1)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return e.Executor.Claim(ctx, p)
}

func (e *faultEx) Heartbeat(ctx context.Context, now time.Time, ls []store.Lease, leaseFor time.Duration) ([]int64, error) {
	e.loopCalls.Add(1)
	e.heartbeats.Add(1)
	if e.duringHeartbeat != nil {
		e.duringHeartbeat()
	}
	defer e.heartbeatsDone.Add(1)
	if e.failHeartbeat.Load() {
		return nil, errInjected
	}
	return e.Executor.Heartbeat(ctx, now, ls, leaseFor)
}

func (e *faultEx) RescueExpired(ctx context.Context, now time.Time, limit int) ([]store.JobRef, []store.JobRef, error) {
	e.loopCalls.Add(1)
	return e.Executor.RescueExpired(ctx, now, limit)
}

// wrap returns s with faults; nil for a store withFaults sets.
func wrap(s store.Store) *faultStore {
	fs := &faultStore{Store: s, ex: &faultEx{}}
	if s != nil {
		fs.ex.Executor = s.Executor()
	}
	return fs
}

// withFaults makes the client of newEnv use fs, wrapping newEnv's store.
func withFaults(fs *faultStore) func(*weir.Config) {
	return func(c *weir.Config) {
		fs.Store = c.Store
		fs.ex.Executor = fs.Store.Executor()
		c.Store = fs
	}
}

// Finding 1: a job taken back while its attempt still runs here (once by
// an insert of its key finding it stuck; an insert now leaves a job whose
// lease is alive alone, so here an operator cancels and retries it) and
// claimed again by the same client must not leave its earlier attempt
// running: the earlier attempt's context is cancelled with
// store.ErrLeaseLost when the job is claimed again, before any heartbeat
// could report its lease lost.
func TestJobClaimedAgainBySameClientCancelsTheEarlierAttempt(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	started := map[int]bool{}
	causes := map[int]error{}
	e := newEnv(t, weir.WorkFunc(func(ctx context.Context, j *weir.Job[task]) error {
		mu.Lock()
		started[j.Attempt] = true
		mu.Unlock()
		<-ctx.Done()
		mu.Lock()
		causes[j.Attempt] = context.Cause(ctx)
		mu.Unlock()
		return ctx.Err()
	}), weir.KindConfig{}, longLease).start()
	id := e.insert(task{}, &weir.InsertOpts{IdempotencyKey: "blob-1"}).ID
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return started[1] })
	// Through the store, as another process would: this client is not told.
	ex := e.s.Executor()
	if _, err := ex.Cancel(context.Background(), e.fc.Now(), id); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.RetryJob(context.Background(), e.fc.Now(), id); err != nil {
		t.Fatal(err)
	}
	// The next poll claims it again; no heartbeat is due (LeaseFor 1 h).
	e.advanceUntil(time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return started[2] })
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return causes[1] != nil })
	mu.Lock()
	defer mu.Unlock()
	if !errors.Is(causes[1], store.ErrLeaseLost) {
		t.Fatalf("attempt 1 cancelled with %v, want ErrLeaseLost", causes[1])
	}
	if causes[2] != nil {
		t.Fatalf("attempt 2 cancelled with %v", causes[2])
	}
}

// Finding 2: when heartbeats fail for LeaseFor (the database unreachable),
// the lease passes and the job may be rescued and run elsewhere: the
// handler's context is cancelled with store.ErrLeaseLost once the lease
// has passed locally, not left running beside another attempt.
func TestHandlerIsCancelledWhenItsLeasePassesWithoutHeartbeats(t *testing.T) {
	t.Parallel()
	fs := &faultStore{ex: &faultEx{}}
	fs.ex.failHeartbeat.Store(true)
	var mu sync.Mutex
	started := false
	var cause error
	e := newEnv(t, weir.WorkFunc(func(ctx context.Context, _ *weir.Job[task]) error {
		mu.Lock()
		started = true
		mu.Unlock()
		<-ctx.Done()
		mu.Lock()
		cause = context.Cause(ctx)
		mu.Unlock()
		return ctx.Err()
	}), weir.KindConfig{}, func(c *weir.Config) {
		withFaults(fs)(c)
		// No rescue: a reclaim by this client would cancel the attempt
		// too (finding 1), hiding a missing local expiry.
		c.RescueEvery = 100 * weir.DefaultLeaseFor
	}).start()
	e.insert(task{}, nil)
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return started })
	claimed := e.fc.Now() // the clock has not moved since the claim
	// Up to the end of the lease, heartbeats failing all along.
	e.advanceUntil(5*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		if d := e.fc.Now().Sub(claimed); cause != nil && d < weir.DefaultLeaseFor {
			t.Fatalf("handler cancelled (%v) %v after the claim, before its lease of %v passed", cause, d, weir.DefaultLeaseFor)
		}
		return !e.fc.Now().Before(claimed.Add(weir.DefaultLeaseFor))
	})
	// The clock stays there: nothing else (a rescue, a reclaim) ends the
	// attempt.
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return cause != nil })
	mu.Lock()
	defer mu.Unlock()
	if !errors.Is(cause, store.ErrLeaseLost) {
		t.Fatalf("handler cancelled with %v, want ErrLeaseLost", cause)
	}
	if fs.ex.heartbeats.Load() == 0 {
		t.Fatal("no heartbeat was tried")
	}
}

// Finding 3: a transient CompleteMany error keeps the job leased and the
// write is retried: a success on the last attempt ends completed, not
// rescued and dead-lettered.
func TestTransientCompleteErrorStillCompletesTheJob(t *testing.T) {
	t.Parallel()
	fs := &faultStore{ex: &faultEx{}}
	fs.ex.failComplete.Store(1)
	var runs atomic.Int32
	e := newEnv(t, weir.WorkFunc(func(context.Context, *weir.Job[task]) error {
		runs.Add(1)
		return nil
	}), weir.KindConfig{MaxAttempts: 1}, withFaults(fs)).start()
	id := e.insert(task{}, nil).ID
	waitFor(t, func() bool { return runs.Load() == 1 })
	j := e.advanceState(id, time.Second, weirtype.StateCompleted, 1)
	if len(j.Errors) != 0 || runs.Load() != 1 {
		t.Fatalf("job %+v after %d runs", *j, runs.Load())
	}
	// Past the lease: nothing rescues it.
	e.fc.Advance(2 * weir.DefaultLeaseFor)
	if j := e.waitState(id, weirtype.StateCompleted, 1); len(j.Errors) != 0 || runs.Load() != 1 {
		t.Fatalf("job %+v after %d runs", *j, runs.Load())
	}
}

// Finding 3, for Fail: a transient error recording a failed attempt keeps
// the job leased and the write is retried: the attempt's own error is
// recorded, not a lease_expired one from a rescue.
func TestTransientFailErrorStillRecordsTheAttempt(t *testing.T) {
	t.Parallel()
	fs := &faultStore{ex: &faultEx{}}
	fs.ex.failFail.Store(1)
	var runs atomic.Int32
	e := newEnv(t, weir.WorkFunc(func(context.Context, *weir.Job[task]) error {
		if runs.Add(1) == 1 {
			return errors.New("boom")
		}
		return nil
	}), weir.KindConfig{MaxAttempts: 2}, withFaults(fs)).start()
	id := e.insert(task{}, nil).ID
	j := e.advanceState(id, time.Second, weirtype.StateCompleted, 2)
	if len(j.Errors) != 1 || j.Errors[0].Message != "boom" || runs.Load() != 2 {
		t.Fatalf("job %+v after %d runs", *j, runs.Load())
	}
}

// Finding 4: Start and Stop called at once, with Start's take-back failing
// or not. Stop returns within its context, Start after Stop began fails,
// and no loop of the client runs once both have returned.
func TestStopRacingStartLeavesNothingRunning(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	fc := clock.NewFake(t0)
	var afterStop atomic.Int64 // loop calls made after Stop returned
	var clients []*faultEx
	for i := range 100 {
		fs := wrap(s)
		fs.ex.failRelease.Store(i%2 == 1)
		clients = append(clients, fs.ex)
		ws := weir.NewWorkers()
		if err := weir.AddWorker(ws, weir.WorkFunc(ok), weir.KindConfig{}); err != nil {
			t.Fatal(err)
		}
		c, err := weir.NewClient(weir.Config{Store: fs, Workers: ws, ID: "race", Clock: fc, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		startErr, stopErr := make(chan error, 1), make(chan error, 1)
		ready := make(chan struct{})
		go func() { <-ready; startErr <- c.Start(context.Background()) }()
		go func() {
			<-ready
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			stopErr <- c.Stop(ctx)
		}()
		close(ready)
		if err := <-stopErr; err != nil {
			t.Fatalf("run %d: Stop: %v", i, err)
		}
		calls := fs.ex.loopCalls.Load()
		<-startErr // nil when Start won the race, an error otherwise
		if err := c.Start(context.Background()); err == nil {
			t.Fatalf("run %d: Start after Stop succeeded", i)
		}
		if err := c.Stop(context.Background()); err != nil {
			t.Fatalf("run %d: second Stop: %v", i, err)
		}
		afterStop.Add(fs.ex.loopCalls.Load() - calls)
	}
	// A loop left running claims and rescues at once, and again at each
	// poll and rescue interval.
	fc.Advance(weir.DefaultRescueEvery)
	var total int64
	for _, ex := range clients {
		total += ex.loopCalls.Load()
	}
	waitFor(t, func() bool {
		var now int64
		for _, ex := range clients {
			now += ex.loopCalls.Load()
		}
		return now == total
	})
	if n := afterStop.Load(); n != 0 {
		t.Fatalf("%d loop calls after Stop returned", n)
	}
}

// Finding 5: Stop honours its context: with a loop blocked in a store
// call (a Claim that returns only when its context ends), Stop returns
// promptly with the context's error, and the blocked call is cancelled so
// that the shutdown still finishes (newEnv's cleanup Stops again).
func TestStopReturnsWhenItsContextEndsWithAStoreCallBlocked(t *testing.T) {
	t.Parallel()
	fs := &faultStore{ex: &faultEx{}}
	fs.ex.blockClaim.Store(true)
	e := newEnv(t, weir.WorkFunc(ok), weir.KindConfig{}, withFaults(fs)).start()
	waitFor(t, func() bool { return fs.ex.blockedClaims.Load() > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	stopErr := make(chan error, 1)
	go func() { stopErr <- e.c.Stop(ctx) }()
	wait, cancelWait := context.WithTimeout(context.Background(), waitLimit)
	defer cancelWait()
	select {
	case err := <-stopErr:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop: %v, want context.DeadlineExceeded", err)
		}
	case <-wait.Done():
		t.Fatalf("Stop did not return within %v of its context ending", waitLimit)
	}
}

// Review of the deadline work: a job requeued after its deadline and
// claimed again by the same client gets a lease equal to its abandoned
// attempt's (attempts restart from 1). The abandoned attempt, still
// running because it ignored its context, must write nothing: its failure
// must not abandon the new attempt's job, nor its exit stop the new
// attempt's heartbeats.
func TestAttemptAbandonedAtItsDeadlineCannotTouchTheRequeuedJob(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var releases []chan error
	started := func() int { mu.Lock(); defer mu.Unlock(); return len(releases) }
	e := newEnv(t, weir.WorkFunc(func(ctx context.Context, j *weir.Job[task]) error {
		ch := make(chan error, 1)
		mu.Lock()
		releases = append(releases, ch)
		mu.Unlock()
		return <-ch // ignores ctx
	}), weir.KindConfig{SLA: 20 * time.Minute, StuckAfter: 3 * time.Hour}, longLease).start()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, ch := range releases {
			select {
			case ch <- errors.New("test over"):
			default:
			}
		}
	})
	j := e.insert(task{}, nil)
	waitFor(t, func() bool { return started() == 1 })
	// Steps of RescueEvery: the deadline sweep abandons the job at the
	// first after the deadline (smaller steps only cost real time, which a
	// loaded machine may not have).
	e.advanceState(j.ID, weir.DefaultRescueEvery, weirtype.StateDead, 1)
	if _, err := e.s.Executor().RequeueDeadLetters(context.Background(), e.fc.Now(), store.DeadLetterFilter{Kind: "task"}); err != nil {
		t.Fatal(err)
	}
	e.advanceUntil(time.Second, func() bool { return started() == 2 })
	if got := e.job(j.ID); got.State != weirtype.StateRunning || got.Attempt != 1 || got.LeaseOwner != "test" {
		t.Fatalf("requeued job %+v, want running attempt 1 under the same owner", *got)
	}
	mu.Lock()
	zombie, fresh := releases[0], releases[1]
	mu.Unlock()
	zombie <- errors.New("the old attempt fails late")
	// Heartbeats must go on for the new attempt: move past its lease.
	from := e.fc.Now()
	e.advanceUntil(time.Minute, func() bool { return e.fc.Now().Sub(from) > 70*time.Minute })
	if got := e.job(j.ID); got.State != weirtype.StateRunning || !got.LeaseExpiresAt.After(e.fc.Now()) {
		t.Fatalf("job after the old attempt failed: %+v, want still running with its lease held", *got)
	}
	fresh <- nil
	e.waitState(j.ID, weirtype.StateCompleted, 1)
}

// longLease gives a test's client an hour-long lease (heartbeats every 20
// minutes), for tests that move the fake clock over many minutes while an
// attempt runs: on a loaded machine the heartbeat loop may fall behind the
// clock's steps, and a lapsed lease would be rescued and the job claimed
// again, which those tests are not about.
func longLease(c *weir.Config) { c.LeaseFor = time.Hour }

// A heartbeat that falls due while the previous one is being written (a
// slow store, a busy machine) is sent as soon as that write returns: the
// loop does not wait on a timer for a time that has passed already,
// which on the fake clock would never fire, and on any clock lets the
// lease run short.
func TestHeartbeatDueDuringTheLastOneIsSentAtOnce(t *testing.T) {
	t.Parallel()
	b := newBlocker()
	fs := wrap(nil)
	e := newEnv(t, weir.WorkFunc(b.work), weir.KindConfig{}, withFaults(fs))
	var once sync.Once
	fs.ex.duringHeartbeat = func() {
		// The clock passes the next heartbeat's time (20 s on) while the
		// first heartbeat is in flight.
		once.Do(func() { e.fc.Advance(30 * time.Second) })
	}
	e.start()
	id := e.insert(task{}, nil).ID
	waitFor(t, func() bool { return b.hasStarted(1) })
	e.fc.Advance(weir.DefaultLeaseFor / 3) // the first heartbeat
	// The second comes, and extends the lease, without the clock moving
	// again.
	second := t0.Add(weir.DefaultLeaseFor/3 + 30*time.Second)
	waitFor(t, func() bool { return e.job(id).LeaseExpiresAt.Equal(second.Add(weir.DefaultLeaseFor)) })
	b.release <- nil
	e.waitState(id, weirtype.StateCompleted, 1)
}

// A heartbeat that crosses the write of a success (the completion
// committed, the client not yet told) finds the job completed, no longer
// held: it cancels nothing and warns of nothing, since the attempt has
// ended and its write says what became of the job. (Under load, a batch
// of completions crossing a heartbeat printed a "lease lost" warning for
// each of its jobs.)
func TestHeartbeatCrossingACompletionWarnsOfNothing(t *testing.T) {
	t.Parallel()
	logs := &syncio.Buffer{}
	fs := wrap(nil)
	var runs atomic.Int32
	e := newEnv(t, weir.WorkFunc(func(context.Context, *weir.Job[task]) error {
		runs.Add(1)
		return nil
	}), weir.KindConfig{}, func(c *weir.Config) {
		withFaults(fs)(c)
		c.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	var once sync.Once
	crossed := make(chan bool, 1)
	fs.ex.afterComplete = func() {
		once.Do(func() {
			// The job is completed in the store and still among the
			// client's running ones: a heartbeat now, and back. (On the
			// completer's goroutine: no t.Fatal here.)
			before := fs.ex.heartbeatsDone.Load()
			e.fc.Advance(weir.DefaultLeaseFor / 3)
			deadline := time.Now().Add(waitLimit)
			for fs.ex.heartbeatsDone.Load() == before && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			// Give the heartbeat's loop time to act on what it found.
			time.Sleep(100 * time.Millisecond)
			crossed <- fs.ex.heartbeatsDone.Load() > before
		})
	}
	e.start()
	id := e.insert(task{}, nil).ID
	select {
	case ok := <-crossed:
		if !ok {
			t.Fatalf("no heartbeat within %v of the completion's write", waitLimit)
		}
	case <-time.After(2 * waitLimit):
		t.Fatal("the completion was not written")
	}
	e.waitState(id, weirtype.StateCompleted, 1)
	if runs.Load() != 1 {
		t.Fatalf("%d runs, want 1", runs.Load())
	}
	if strings.Contains(logs.String(), "lease") {
		t.Fatalf("a heartbeat crossing the completion logged:\n%s", logs.String())
	}
}

// A retention sweep that Stop interrupts (a vacuum of minutes, at a
// deploy) is logged at Info, not as a failure of the sweep.
func TestSweepInterruptedByStopIsNoError(t *testing.T) {
	t.Parallel()
	logs := &syncio.Buffer{}
	fs := wrap(nil)
	fs.ex.blockKinds = make(chan struct{})
	e := newEnv(t, weir.WorkFunc(func(context.Context, *weir.Job[task]) error { return nil }), weir.KindConfig{}, func(c *weir.Config) {
		withFaults(fs)(c)
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	e.start()
	select {
	case <-fs.ex.blockKinds:
	case <-time.After(waitLimit):
		t.Fatal("no retention sweep began at Start")
	}
	stopClient(t, e.c)
	out := logs.String()
	if strings.Contains(out, "level=ERROR") || !strings.Contains(out, `msg="retention sweep: interrupted by Stop"`) {
		t.Fatalf("a retention sweep interrupted by Stop logged:\n%s", out)
	}
}
