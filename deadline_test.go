package weir_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// blocker is a worker that records each attempt's start and the cause
// its context ended with, and returns what release sends it (ignoring its
// context until then, as a worker calling a slow service might).
type blocker struct {
	mu      sync.Mutex
	started map[int]bool
	causes  map[int]error
	release chan error
}

func newBlocker() *blocker {
	return &blocker{started: map[int]bool{}, causes: map[int]error{}, release: make(chan error)}
}

func (b *blocker) work(ctx context.Context, j *weir.Job[task]) error {
	b.mu.Lock()
	b.started[j.Attempt] = true
	b.mu.Unlock()
	go func() {
		<-ctx.Done()
		b.mu.Lock()
		b.causes[j.Attempt] = context.Cause(ctx)
		b.mu.Unlock()
	}()
	return <-b.release
}

func (b *blocker) hasStarted(attempt int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.started[attempt]
}

func (b *blocker) cause(attempt int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.causes[attempt]
}

// slaJob starts a client whose worker blocks, on a kind with an SLA of 20
// minutes (and a StuckAfter of an hour), and inserts a job of the kind.
func slaJob(t *testing.T, open opener) (*env, *blocker, *weirtype.Job) {
	t.Helper()
	b := newBlocker()
	e := newEnvOn(t, open, weir.WorkFunc(b.work), weir.KindConfig{SLA: 20 * time.Minute, StuckAfter: time.Hour}, longLease).start()
	return e, b, e.insert(task{}, nil)
}

// A running attempt's context ends at the job's deadline with a
// *DeadlineError; the attempt's error then abandons the job with reason
// deadline_exceeded.
func TestDeadlineEndsTheAttemptAndAbandonsTheJob(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e, b, j := slaJob(t, open)
		if want := t0.Add(20 * time.Minute); !j.DeadlineAt.Equal(want) {
			t.Fatalf("deadline %v, want the insert's time plus the SLA, %v", j.DeadlineAt, want)
		}
		waitFor(t, func() bool { return b.hasStarted(1) })
		e.advanceUntil(10*time.Second, func() bool { return b.cause(1) != nil })
		var de *weir.DeadlineError
		if !errors.As(b.cause(1), &de) || !de.DeadlineAt.Equal(j.DeadlineAt) {
			t.Fatalf("cause %v, want a *DeadlineError at %v", b.cause(1), j.DeadlineAt)
		}
		b.release <- context.DeadlineExceeded
		got := e.waitState(j.ID, weirtype.StateDead, 1)
		if last := got.Errors[len(got.Errors)-1]; last.Type != weirtype.ErrorTypeDeadlineExceeded {
			t.Fatalf("last error %+v, want type deadline_exceeded", last)
		}
		if dl := e.deadLetter(j.ID); dl.Reason != weirtype.AbandonDeadline {
			t.Fatalf("dead letter reason %s, want deadline_exceeded", dl.Reason)
		}
	})
}

// A success that comes after the deadline is stored as a late result,
// the job left abandoned, until an operator accepts it.
func TestSuccessAfterTheDeadlineIsALateResult(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e, b, j := slaJob(t, open)
		waitFor(t, func() bool { return b.hasStarted(1) })
		e.advanceUntil(10*time.Second, func() bool { return b.cause(1) != nil })
		// The success comes a minute after the deadline, heartbeats going on
		// meanwhile.
		from := e.fc.Now()
		e.advanceUntil(10*time.Second, func() bool { return e.fc.Now().Sub(from) >= time.Minute })
		b.release <- nil

		var lrs []*weirtype.LateResult
		waitFor(t, func() bool {
			var err error
			lrs, err = e.c.LateResults(context.Background(), store.LateResultFilter{Pending: true})
			if err != nil {
				t.Fatal(err)
			}
			return len(lrs) == 1
		})
		lr := lrs[0]
		if lr.JobID != j.ID || lr.Attempt != 1 || lr.Owner != "test" || !lr.ReceivedAt.After(j.DeadlineAt) {
			t.Fatalf("late result %+v", *lr)
		}
		if got := e.job(j.ID); got.State != weirtype.StateDead {
			t.Fatalf("job %+v, want dead until the late result is accepted", *got)
		}
		if _, err := e.c.AcceptLateResult(context.Background(), lr.ID); err != nil {
			t.Fatal(err)
		}
		if got := e.job(j.ID); got.State != weirtype.StateCompleted {
			t.Fatalf("job after accepting its late result: %+v, want completed", *got)
		}
		if _, err := e.c.AcceptLateResult(context.Background(), lr.ID); !errors.Is(err, store.ErrFinal) {
			t.Fatalf("second accept: %v, want ErrFinal", err)
		}
	})
}

// A job nobody runs is abandoned by the deadline sweep once its deadline
// passes.
func TestDeadlineSweepAbandonsAWaitingJob(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := newEnvOn(t, open, weir.WorkFunc(func(context.Context, *weir.Job[task]) error { return nil }), weir.KindConfig{}, func(c *weir.Config) {
			c.Queues = map[string]weir.QueueConfig{weir.DefaultQueue: {}}
			c.RescueEvery = time.Minute
		}).start()
		// Kind other waits in a queue this client does not work.
		j := e.insert(other{}, &weir.InsertOpts{Queue: "unworked", DeadlineAt: t0.Add(5 * time.Minute)})
		got := e.advanceState(j.ID, 10*time.Second, weirtype.StateDead, 0)
		if got.FinalizedAt.Before(j.DeadlineAt) {
			t.Fatalf("abandoned at %v, before its deadline %v", got.FinalizedAt, j.DeadlineAt)
		}
		if dl := e.deadLetter(j.ID); dl.Reason != weirtype.AbandonDeadline {
			t.Fatalf("dead letter reason %s, want deadline_exceeded", dl.Reason)
		}
	})
}

// A retry that would start after the deadline is not scheduled: the job is
// abandoned at once.
func TestRetryPastTheDeadlineAbandonsTheJob(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := newEnvOn(t, open, weir.WorkFunc(func(context.Context, *weir.Job[task]) error { return errors.New("service unavailable") }),
			weir.KindConfig{SLA: 5 * time.Minute, Backoff: backoff.Constant(10 * time.Minute).WithJitter(backoff.JitterNone)}, nil).start()
		j := e.insert(task{}, nil)
		e.waitState(j.ID, weirtype.StateDead, 1)
		if dl := e.deadLetter(j.ID); dl.Reason != weirtype.AbandonDeadline || dl.LastError != "service unavailable" {
			t.Fatalf("dead letter %+v, want reason deadline_exceeded with the attempt's error", *dl)
		}
	})
}

// hungEnv starts a client whose worker hangs, ignoring its context, and
// moves the clock past the stuck threshold with heartbeats holding the
// lease.
func hungEnv(t *testing.T, kc weir.KindConfig) (*env, *blocker, *weirtype.Job) {
	t.Helper()
	b := newBlocker()
	// A lease longer than the wait, so that the attempt stays held however
	// late the heartbeats run on a loaded machine (a lapsed lease would be
	// rescued and the job claimed again, no longer stuck).
	e := newEnv(t, weir.WorkFunc(b.work), kc, func(c *weir.Config) {
		c.SweepEvery = 1000 * time.Hour
		c.LeaseFor = time.Hour
	}).start()
	t.Cleanup(func() { close(b.release) })
	j := e.insert(task{}, nil)
	waitFor(t, func() bool { return b.hasStarted(1) })
	from := e.fc.Now()
	e.advanceUntil(10*time.Second, func() bool { return e.fc.Now().Sub(from) > 11*time.Minute })
	if got := e.job(j.ID); got.State != weirtype.StateRunning || got.Attempt != 1 || !got.LeaseExpiresAt.After(e.fc.Now()) {
		t.Fatalf("hung job %+v, want running its first attempt with the lease held", *got)
	}
	return e, b, j
}

// The stuck sweep takes back an attempt that hangs while heartbeats hold
// its lease: the job runs again, the stuck attempt counted, and the hung
// handler's context is cancelled.
func TestStuckSweepRequeuesAHungAttempt(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e, b, j := hungEnv(t, weir.KindConfig{MaxAttempts: 3, Backoff: backoff.Constant(time.Minute)})
		res, err := e.c.SweepStuck(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if res.Requeued["task"] != 1 || res.SkippedBackoff["task"] != 0 || res.MaxRetriesExceeded["task"] != 0 {
			t.Fatalf("sweep %+v, want task requeued once", res)
		}
		waitFor(t, func() bool { return b.hasStarted(2) })
		got := e.job(j.ID)
		if len(got.Errors) != 1 || got.Errors[0].Type != weirtype.ErrorTypeStuck || got.Errors[0].Attempt != 1 {
			t.Fatalf("errors %+v, want one stuck error for attempt 1", got.Errors)
		}
		e.advanceUntil(10*time.Second, func() bool { return b.cause(1) != nil })
		if !errors.Is(b.cause(1), store.ErrLeaseLost) {
			t.Fatalf("hung attempt cancelled with %v, want ErrLeaseLost", b.cause(1))
		}
	})
}

// A stuck attempt whose backoff has not passed since it started is
// skipped; one on its last attempt is abandoned (spec 04's
// failed_max_retries).
func TestStuckSweepRespectsBackoffAndMaxAttempts(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		t.Run("backoff", func(t *testing.T) {
			t.Parallel()
			e, _, j := hungEnv(t, weir.KindConfig{MaxAttempts: 3, Backoff: backoff.Exponential(30*time.Minute, 2, time.Hour)})
			res, err := e.c.SweepStuck(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.SkippedBackoff["task"] != 1 || res.Requeued["task"] != 0 {
				t.Fatalf("sweep %+v, want task skipped for backoff (job %+v at %v)", res, *e.job(j.ID), e.fc.Now())
			}
			if got := e.job(j.ID); got.State != weirtype.StateRunning || got.Attempt != 1 {
				t.Fatalf("skipped job %+v, want still running", *got)
			}
		})
		t.Run("max attempts", func(t *testing.T) {
			t.Parallel()
			e, _, j := hungEnv(t, weir.KindConfig{MaxAttempts: 1, Backoff: backoff.Constant(time.Minute)})
			res, err := e.c.SweepStuck(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.MaxRetriesExceeded["task"] != 1 || res.Requeued["task"] != 0 {
				t.Fatalf("sweep %+v, want task abandoned at max retries", res)
			}
			if dl := e.deadLetter(j.ID); dl.Reason != weirtype.AbandonMaxAttempts || dl.ErrorType != weirtype.ErrorTypeStuck {
				t.Fatalf("dead letter %+v", *dl)
			}
		})
		t.Run("kind allows longer", func(t *testing.T) {
			t.Parallel()
			e, _, _ := hungEnv(t, weir.KindConfig{StuckAfter: time.Hour, Backoff: backoff.Constant(time.Minute)})
			res, err := e.c.SweepStuck(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Requeued)+len(res.SkippedBackoff)+len(res.MaxRetriesExceeded) != 0 {
				t.Fatalf("sweep %+v, want nothing: the kind's StuckAfter is an hour", res)
			}
		})
	})
}

// A job requeued from the dead-letter store gets its TTL anew: its first
// failure after the requeue is retried, not abandoned for a TTL that ran
// from the job's creation.
func TestRequeuedJobGetsItsTTLAnew(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := newEnvOn(t, open, weir.WorkFunc(func(context.Context, *weir.Job[task]) error { return errors.New("index unavailable") }),
			weir.KindConfig{MaxAttempts: 2, TTL: 30 * time.Minute, Backoff: backoff.Constant(time.Minute).WithJitter(backoff.JitterNone)}, nil).start()
		j := e.insert(task{}, nil)
		// Steps of a second, so that a loaded machine's slow retry still
		// runs long before the TTL (1,800 steps): with steps of ten, the
		// TTL once abandoned the job at its first attempt.
		e.advanceState(j.ID, time.Second, weirtype.StateDead, 2)
		e.fc.Advance(2 * time.Hour)
		if _, err := e.s.Executor().RequeueDeadLetters(context.Background(), e.fc.Now(), store.DeadLetterFilter{Kind: "task"}); err != nil {
			t.Fatal(err)
		}
		got := e.advanceState(j.ID, time.Second, weirtype.StateScheduled, 1)
		if last := got.Errors[len(got.Errors)-1]; last.Message != "index unavailable" || last.Attempt != 1 {
			t.Fatalf("job after the requeue %+v, want its first attempt's failure scheduled for a retry", *got)
		}
	})
}

// The stuck sweep takes back only attempts of the kinds its client
// registers: another process's kind may allow its attempts far longer.
func TestStuckSweepLeavesOtherProcessesKinds(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := newEnvOn(t, open, weir.WorkFunc(func(context.Context, *weir.Job[task]) error { return nil }), weir.KindConfig{},
			func(c *weir.Config) { c.SweepEvery = 1000 * time.Hour }).start()
		j := e.insert(other{}, &weir.InsertOpts{Queue: "elsewhere"})
		claimed, err := e.s.Executor().Claim(context.Background(), store.ClaimParams{
			Now: e.fc.Now(), Queue: "elsewhere", Limit: 1, Owner: "another-process", LeaseFor: 24 * time.Hour,
		})
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim: %v, %v", claimed, err)
		}
		e.fc.Advance(time.Hour)
		res, err := e.c.SweepStuck(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Requeued)+len(res.MaxRetriesExceeded)+len(res.SkippedBackoff) != 0 {
			t.Fatalf("sweep %+v, want another process's kind left alone", res)
		}
		if got := e.job(j.ID); got.State != weirtype.StateRunning || got.LeaseOwner != "another-process" {
			t.Fatalf("job %+v, want still running under its owner", *got)
		}
	})
}
