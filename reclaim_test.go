package weir_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// An insert of a running job's key by another process, configured with
// the default StuckAfter of 10 minutes, does not reclaim a job whose kind
// allows an hour while its worker heartbeats: the attempt goes on, is not
// cancelled, and the job runs once. Neither process's stuck sweep takes it
// back before its kind's StuckAfter.
func TestForeignInsertNeverReclaimsAJobWhoseLeaseIsAlive(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		b := newBlocker()
		// The worker's process: the kind registered with a long StuckAfter,
		// heartbeats every 20 s (LeaseFor 1 min).
		e := newEnvOn(t, open, weir.WorkFunc(b.work), weir.KindConfig{StuckAfter: time.Hour}, nil).start()
		// Another process, on the same database and clock, that only inserts:
		// it knows nothing of the kind, so its threshold is the default.
		foreign, err := weir.NewClient(weir.Config{Store: e.s, ID: "foreign", Clock: e.fc, Logger: testLogger()})
		if err != nil {
			t.Fatal(err)
		}
		opts := &weir.InsertOpts{IdempotencyKey: "blob-1"}
		id := e.insert(task{}, opts).ID
		waitFor(t, func() bool { return b.hasStarted(1) })

		// Past the foreign process's StuckAfter, heartbeats holding the lease.
		from := e.fc.Now()
		heartbeatUntil(e, id, from.Add(weir.DefaultStuckAfter+time.Minute))
		j := e.job(id)
		if j.State != weirtype.StateRunning || !j.LeaseExpiresAt.After(e.fc.Now()) {
			t.Fatalf("before the foreign insert the job is %s, lease until %v (now %v): want running, its lease alive", j.State, j.LeaseExpiresAt, e.fc.Now())
		}
		r, err := foreign.Insert(context.Background(), task{}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if r.Outcome != weirtype.DuplicateRunning || r.Job.ID != id {
			t.Fatalf("foreign insert %v after the attempt began: %s of job %d, want duplicate_running of %d", e.fc.Now().Sub(from), r.Outcome, r.Job.ID, id)
		}
		// The sweeps: the worker's process knows the kind allows an hour, the
		// foreign one does not register the kind.
		for name, c := range map[string]*weir.Client{"worker's": e.c, "foreign": foreign} {
			res, err := c.SweepStuck(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.Requeued["task"]+res.MaxRetriesExceeded["task"] != 0 {
				t.Fatalf("the %s stuck sweep took back an attempt within its kind's StuckAfter: %+v", name, res)
			}
		}
		// The attempt runs on: a few more heartbeats, then it succeeds.
		heartbeatUntil(e, id, e.fc.Now().Add(time.Minute))
		if c := b.cause(1); c != nil {
			t.Fatalf("the running attempt was cancelled: %v", c)
		}
		b.release <- nil
		j = e.waitState(id, weirtype.StateCompleted, 1)
		if b.hasStarted(2) || len(j.Errors) != 0 {
			t.Fatalf("the job ran again (attempt 2 started: %v), errors %+v", b.hasStarted(2), j.Errors)
		}
	})
}

// heartbeatUntil moves e's fake clock to until in steps of half a
// heartbeat, and after each waits (in real time, with a deadline) for the
// heartbeats of running job id to have kept up: its lease lasts at least
// LeaseFor − HeartbeatEvery from now, so no rescue can find it expired,
// however slowly the machine runs the heartbeat loop.
func heartbeatUntil(e *env, id int64, until time.Time) {
	e.t.Helper()
	const leaseFor, every = weir.DefaultLeaseFor, weir.DefaultLeaseFor / 3
	for e.fc.Now().Before(until) {
		e.fc.Advance(min(every/2, until.Sub(e.fc.Now())))
		waitFor(e.t, func() bool {
			j := e.job(id)
			return j.State == weirtype.StateRunning && !j.LeaseExpiresAt.Before(e.fc.Now().Add(leaseFor-every))
		})
	}
}

// A kind whose StuckAfter is shorter than Config.StuckAfter is swept at its
// own threshold, not at the client's.
func TestStuckSweepTakesBackAKindAtItsShorterStuckAfter(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		b := newBlocker()
		e := newEnvOn(t, open, weir.WorkFunc(b.work), weir.KindConfig{StuckAfter: 2 * time.Minute}, longLease).start()
		id := e.insert(task{}, nil).ID
		waitFor(t, func() bool { return b.hasStarted(1) })
		e.fc.Advance(3 * time.Minute) // past the kind's 2 min and its backoff, not Config's 10 min
		res, err := e.c.SweepStuck(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if res.Requeued["task"] != 1 {
			t.Fatalf("sweep 3 min into an attempt of a kind stuck after 2 min: %+v, want it requeued", res)
		}
		waitFor(t, func() bool { return b.hasStarted(2) })
		b.release <- nil // attempt 1, superseded: records nothing
		b.release <- nil // attempt 2
		j := e.waitState(id, weirtype.StateCompleted, 2)
		if len(j.Errors) != 1 || j.Errors[0].Type != weirtype.ErrorTypeStuck {
			t.Fatalf("errors %+v, want the stuck attempt's", j.Errors)
		}
		if c := b.cause(1); c == nil {
			t.Fatal("the stuck attempt's context was not cancelled")
		}
	})
}

// countFails is the test env's store with a job count that fails: the
// stuck sweep's count, which reads every job kept, times out on a table
// grown large. It listens as the env's store does.
type countFails struct{ counted }

func (s countFails) Executor() store.Executor { return countFailsEx{s.counted.Executor()} }

type countFailsEx struct{ store.Executor }

var errCountTimedOut = errors.New("canceling statement due to statement timeout")

func (countFailsEx) CountJobs(context.Context, time.Time) ([]store.JobCount, error) {
	return nil, errCountTimedOut
}

// A failed count does not keep the stuck sweep from taking back a stuck
// attempt; the sweep reports the count's error.
func TestStuckSweepTakesBackAttemptsWhenTheCountFails(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		b := newBlocker()
		e := newEnvOn(t, open, weir.WorkFunc(b.work), weir.KindConfig{StuckAfter: 2 * time.Minute}, func(c *weir.Config) {
			longLease(c)
			c.Store = countFails{c.Store.(counted)}
		}).start()
		id := e.insert(task{}, nil).ID
		waitFor(t, func() bool { return b.hasStarted(1) })
		e.fc.Advance(3 * time.Minute)
		res, err := e.c.SweepStuck(context.Background())
		if !errors.Is(err, errCountTimedOut) {
			t.Errorf("sweep error %v, want the count's", err)
		}
		if res.Requeued["task"] != 1 {
			t.Fatalf("sweep with a failed count: %+v, want the stuck attempt requeued", res)
		}
		waitFor(t, func() bool { return b.hasStarted(2) })
		b.release <- nil // attempt 1, superseded
		b.release <- nil // attempt 2
		e.waitState(id, weirtype.StateCompleted, 2)
	})
}
