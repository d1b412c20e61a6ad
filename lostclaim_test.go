package weir_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/internal/eventually"
	"github.com/weirhq/weir/internal/faultproxy"
	"github.com/weirhq/weir/internal/syncio"
	"github.com/weirhq/weir/internal/teststore"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/postgres"
	"github.com/weirhq/weir/weirtype"
)

// lostReplyStore is a PostgreSQL store reached through a faultproxy whose
// next claim that takes a job commits on the server and then loses its
// reply: the proxy cuts every connection, and the claim fails.
type lostReplyStore struct {
	*postgres.Store
	ex *lostReplyEx
}

func (s *lostReplyStore) Executor() store.Executor { return s.ex }

type lostReplyEx struct {
	store.Executor
	proxy  *faultproxy.Proxy
	armed  atomic.Bool
	lost   chan []*weirtype.Job // the jobs of the claim whose reply was lost
	claims atomic.Int64         // Claim calls
}

func (e *lostReplyEx) Claim(ctx context.Context, p store.ClaimParams) ([]*weirtype.Job, error) {
	e.claims.Add(1)
	if !e.armed.Load() {
		return e.Executor.Claim(ctx, p)
	}
	jobs, err := e.Executor.Claim(ctx, p)
	if err != nil || len(jobs) == 0 || !e.armed.CompareAndSwap(true, false) {
		return jobs, err
	}
	// Committed on the server; the reply never arrives.
	e.proxy.Cut()
	e.proxy.Restore()
	e.lost <- jobs
	return nil, fmt.Errorf("claim: read the reply: %w", io.ErrUnexpectedEOF)
}

// On PostgreSQL, a claim that commits on the server and whose reply is
// lost to a cut connection leaves its job held by the client, which does
// not run it. The client gives it back as soon as the claim has failed
// (or, while the store still fails, at its next poll), its attempt
// returned, and runs it well within the lease: no rescue is what runs it.
func TestPostgresClaimWhoseReplyIsLostRunsAgainWithinALease(t *testing.T) {
	t.Parallel()
	pg, proxy, _ := teststore.PostgresBehindProxy(t, "weirtest_lostclaim_", 4)
	ls := &lostReplyStore{Store: pg, ex: &lostReplyEx{Executor: pg.Executor(), proxy: proxy, lost: make(chan []*weirtype.Job, 1)}}
	fc := clock.NewFake(t0)
	var mu sync.Mutex
	runs := map[int64][]int{}
	ws := weir.NewWorkers()
	if err := weir.AddWorker(ws, weir.WorkFunc(func(_ context.Context, j *weir.Job[task]) error {
		mu.Lock()
		defer mu.Unlock()
		runs[j.ID] = append(runs[j.ID], j.Attempt)
		return nil
	}), weir.KindConfig{}); err != nil {
		t.Fatal(err)
	}
	// The client's log, shown if the test fails.
	var logs syncio.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the client's log:\n%s", logs.String())
		}
	})
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := weir.NewClient(weir.Config{Store: ls, Workers: ws, ID: "lost-claim", Clock: fc, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	// Armed before the client starts: a claim begun before the arming
	// (a poll's, say) could otherwise take the job after the insert
	// commits, unarmed, and run it with no reply lost. Claims that find
	// no job leave it armed.
	ls.ex.armed.Store(true)
	startClient(t, c)
	r, err := c.Insert(context.Background(), task{Name: "cut"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The insert wakes the producer. Should that claim fail (a busy
	// machine), the next is the poll's: the clock moves a second at each
	// real one.
	var lost []*weirtype.Job
	for giveUp := time.Now().Add(waitLimit); lost == nil; {
		select {
		case lost = <-ls.ex.lost:
		case <-time.After(time.Second):
			if time.Now().After(giveUp) {
				t.Fatalf("no claim took the job within %v (%d claims)", waitLimit, ls.ex.claims.Load())
			}
			fc.Advance(time.Second)
		}
	}
	if len(lost) != 1 || lost[0].ID != r.Job.ID || lost[0].Attempt != 1 {
		t.Fatalf("the lost claim took %+v, want job %d at attempt 1", lost, r.Job.ID)
	}
	// The cut may leave dead connections in the pool, which fail the
	// first calls after it: the client tries the release again before
	// each claim, every poll (PollEvery, 1 s). The clock moves a second
	// at a time, each time once the client has claimed again since (or
	// after a second of real time).
	var j *weirtype.Job
	completed := func() bool {
		got, err := pg.Executor().GetJob(context.Background(), r.Job.ID)
		if err != nil {
			return false // a dead connection of the pool: read again
		}
		j = got
		return j.State == weirtype.StateCompleted
	}
	giveUp := time.Now().Add(waitLimit)
	for !completed() {
		if time.Now().After(giveUp) {
			t.Fatalf("the job is not completed within %v (fake clock at +%v): %+v", waitLimit, fc.Now().Sub(t0), j)
		}
		n := ls.ex.claims.Load()
		fc.Advance(time.Second)
		eventually.Wait(time.Second, func() (bool, string) { return ls.ex.claims.Load() != n || completed(), "" })
	}
	took := fc.Now().Sub(t0)
	t.Logf("completed %v (fake clock) after its claim's reply was lost; lease %v", took, weir.DefaultLeaseFor)
	if took >= weir.DefaultLeaseFor/2 {
		t.Fatalf("the job completed %v after its lost claim: not well within its lease of %v", took, weir.DefaultLeaseFor)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := runs[j.ID]; len(got) != 1 || got[0] != 1 || j.Attempt != 1 {
		t.Fatalf("the job ran at attempts %v, stored attempt %d; want once, at attempt 1 (the lost claim's given back)", got, j.Attempt)
	}
	if len(j.Errors) != 1 || j.Errors[0].Type != weirtype.ErrorTypeReleased {
		t.Fatalf("errors %+v, want the release of the lost claim's attempt", j.Errors)
	}
}

// waitJob polls job id in s until cond holds, failing after waitLimit.
func waitJob(t *testing.T, s store.Store, id int64, cond func(*weirtype.Job) bool) *weirtype.Job {
	t.Helper()
	var j *weirtype.Job
	waitFor(t, func() bool {
		var err error
		j, err = s.Executor().GetJob(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return cond(j)
	})
	return j
}

// raceStore is a SQLite store whose claims of queue "slow" hold the jobs
// they took, before returning them, until the test lets them go, and whose
// claims of queue "lost" that take a job fail as a lost reply does.
type raceStore struct {
	store.Store
	ex *raceEx
}

func (s *raceStore) Executor() store.Executor { return s.ex }

type raceEx struct {
	store.Executor
	slowArmed   atomic.Bool // the next slow claim that takes a job holds it
	lostArmed   atomic.Bool // the next lost claim that takes a job fails
	slowHeld    atomic.Bool
	slowClaimed chan struct{}
	letSlowGo   chan struct{}
	lostClaimed chan struct{}
	// releasedWhileSlowHeld is set when ReleaseOwnedExcept ran while a
	// slow claim held a job not yet started.
	releasedWhileSlowHeld atomic.Bool
	releases              atomic.Int32
}

func (e *raceEx) Claim(ctx context.Context, p store.ClaimParams) ([]*weirtype.Job, error) {
	jobs, err := e.Executor.Claim(ctx, p)
	if err != nil || len(jobs) == 0 {
		return jobs, err
	}
	switch {
	case p.Queue == "slow" && e.slowArmed.CompareAndSwap(true, false):
		e.slowHeld.Store(true)
		e.slowClaimed <- struct{}{}
		<-e.letSlowGo
		e.slowHeld.Store(false)
	case p.Queue == "lost" && e.lostArmed.CompareAndSwap(true, false):
		e.lostClaimed <- struct{}{}
		return nil, fmt.Errorf("claim: read the reply: %w", io.ErrUnexpectedEOF)
	}
	return jobs, nil
}

func (e *raceEx) ReleaseOwnedExcept(ctx context.Context, now time.Time, owner string, keep []store.Lease) ([]int64, error) {
	if e.slowHeld.Load() {
		e.releasedWhileSlowHeld.Store(true)
		e.letSlowGo <- struct{}{} // let the wronged job start, to show the harm
	}
	e.releases.Add(1)
	return e.Executor.ReleaseOwnedExcept(ctx, now, owner, keep)
}

type slowArgs struct{}

func (slowArgs) Kind() string { return "slow" }

type lostArgs struct{}

func (lostArgs) Kind() string { return "lost" }

// The jobs a failed claim may have taken are given back without touching
// a job that another producer's claim has just taken and not yet started:
// the release waits for claims in flight, so it reads that job among the
// running ones. Here a claim of queue "slow" holds its job while the claim
// of queue "lost" fails; the release must not run before the slow claim
// has handed its job over.
func TestReleaseAfterALostClaimSparesAJobBeingStarted(t *testing.T) {
	t.Parallel()
	ex := &raceEx{slowClaimed: make(chan struct{}, 1), letSlowGo: make(chan struct{}, 1), lostClaimed: make(chan struct{}, 1)}
	ex.slowArmed.Store(true)
	ex.lostArmed.Store(true)
	var mu sync.Mutex
	runs := map[string][]int{}
	record := func(kind string, attempt int) {
		mu.Lock()
		defer mu.Unlock()
		runs[kind] = append(runs[kind], attempt)
	}
	ws := weir.NewWorkers()
	if err := weir.AddWorker(ws, weir.WorkFunc(func(_ context.Context, j *weir.Job[slowArgs]) error {
		record("slow", j.Attempt)
		return nil
	}), weir.KindConfig{Queue: "slow"}); err != nil {
		t.Fatal(err)
	}
	if err := weir.AddWorker(ws, weir.WorkFunc(func(_ context.Context, j *weir.Job[lostArgs]) error {
		record("lost", j.Attempt)
		return nil
	}), weir.KindConfig{Queue: "lost"}); err != nil {
		t.Fatal(err)
	}
	s := openSQLite(t)
	ex.Executor = s.Executor()
	c, err := weir.NewClient(weir.Config{
		Store: &raceStore{Store: s, ex: ex}, Workers: ws, ID: "race", Clock: clock.NewFake(t0), Logger: testLogger(),
		Queues: map[string]weir.QueueConfig{"slow": {}, "lost": {}},
	})
	if err != nil {
		t.Fatal(err)
	}
	startClient(t, c)
	ctx := context.Background()
	slow, err := c.Insert(ctx, slowArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-ex.slowClaimed
	lost, err := c.Insert(ctx, lostArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-ex.lostClaimed
	// The failed claim's release must wait for the slow claim: give it a
	// moment of real time to show that it does not, then let the slow
	// claim go (unless the release already did).
	// (A release that did not wait let it go itself.)
	if _, released := eventually.Wait(200*time.Millisecond, func() (bool, string) { return ex.releasedWhileSlowHeld.Load(), "" }); !released {
		ex.letSlowGo <- struct{}{}
	}
	ls := waitJob(t, s, lost.Job.ID, func(j *weirtype.Job) bool { return j.State == weirtype.StateCompleted })
	sl := waitJob(t, s, slow.Job.ID, func(j *weirtype.Job) bool { return j.State.Final() || len(j.Errors) > 0 })
	if ex.releasedWhileSlowHeld.Load() {
		t.Fatal("the release after the failed claim ran while another claim held a job it had not started")
	}
	if sl.State != weirtype.StateCompleted || sl.Attempt != 1 || len(sl.Errors) != 0 {
		t.Fatalf("the slow claim's job %+v: want completed at its first attempt, never released", *sl)
	}
	if ls.Attempt != 1 || len(ls.Errors) != 1 || ls.Errors[0].Type != weirtype.ErrorTypeReleased {
		t.Fatalf("the lost claim's job %+v: want it given back, then completed at attempt 1", *ls)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(runs["slow"]) != "[1]" || fmt.Sprint(runs["lost"]) != "[1]" {
		t.Fatalf("runs %v, want each job once at attempt 1", runs)
	}
}
