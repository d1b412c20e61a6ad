package weir_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/metrics"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// finished makes a job of args in a queue no client works, and leaves it
// completed, cancelled or dead at at.
func (e *env) finished(args weir.JobArgs, state weirtype.State, at time.Time) int64 {
	e.t.Helper()
	ctx := context.Background()
	ex := e.s.Executor()
	r, err := e.c.Insert(ctx, args, &weir.InsertOpts{Queue: "elsewhere"})
	if err != nil {
		e.t.Fatal(err)
	}
	if state == weirtype.StateCancelled {
		if _, err := ex.Cancel(ctx, at, r.Job.ID); err != nil {
			e.t.Fatal(err)
		}
		return r.Job.ID
	}
	jobs, err := ex.Claim(ctx, store.ClaimParams{Now: at, Queue: "elsewhere", Limit: 1, Owner: "someone", LeaseFor: time.Minute})
	if err != nil || len(jobs) != 1 {
		e.t.Fatalf("claim: %v, %v", jobs, err)
	}
	if state == weirtype.StateDead {
		_, err = ex.Fail(ctx, store.FailParams{Now: at, Lease: store.LeaseOf(jobs[0]), Abandon: weirtype.AbandonPermanent,
			Error: weirtype.AttemptError{Attempt: 1, At: at, Message: "boom"}})
	} else {
		_, err = ex.Complete(ctx, at, store.LeaseOf(jobs[0]))
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return r.Job.ID
}

func (e *env) exists(id int64) bool {
	e.t.Helper()
	_, err := e.s.Executor().GetJob(context.Background(), id)
	return err == nil
}

// The retention sweep deletes completed and cancelled jobs past their
// kind's retention, leaves dead, waiting and younger jobs, runs on one
// process at a time, and counts what it deletes.
func TestRetentionSweep(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		reg := prometheus.NewPedanticRegistry()
		e := newEnvOn(t, open, weir.WorkFunc(func(context.Context, *weir.Job[task]) error { return nil }),
			weir.KindConfig{Retention: time.Hour}, func(c *weir.Config) {
				c.JobRetention = 2 * time.Hour
				m, err := metrics.New(reg, metrics.Options{})
				if err != nil {
					t.Fatal(err)
				}
				c.Metrics = m
			})
		done := e.finished(task{}, weirtype.StateCompleted, t0)
		cancelled := e.finished(task{}, weirtype.StateCancelled, t0)
		dead := e.finished(task{}, weirtype.StateDead, t0)
		young := e.finished(task{}, weirtype.StateCompleted, t0.Add(time.Hour))
		otherDone := e.finished(other{}, weirtype.StateCompleted, t0)
		waiting := e.insert(task{}, &weir.InsertOpts{Queue: "elsewhere"}).ID

		e.fc.Set(t0.Add(90 * time.Minute))
		res, err := e.c.SweepRetention(context.Background())
		if err != nil || res.Skipped || res.Deleted["task"] != 2 || len(res.Deleted) != 1 {
			t.Fatalf("sweep at 90 min = %+v, %v; want 2 task jobs deleted (retention 1 h), none of other (2 h)", res, err)
		}
		for id, want := range map[int64]bool{done: false, cancelled: false, dead: true, young: true, otherDone: true, waiting: true} {
			if got := e.exists(id); got != want {
				t.Errorf("after the sweep at 90 min, job %d exists = %v, want %v", id, got, want)
			}
		}

		// Another process finds the lease held, and deletes nothing.
		second, err := weir.NewClient(weir.Config{Store: e.s, ID: "second", Clock: e.fc, Logger: testLogger(), JobRetention: time.Nanosecond})
		if err != nil {
			t.Fatal(err)
		}
		e.fc.Set(t0.Add(91 * time.Minute))
		if res, err := second.SweepRetention(context.Background()); err != nil || !res.Skipped || len(res.Deleted) != 0 {
			t.Fatalf("sweep of a second process while the first holds the lease = %+v, %v; want skipped", res, err)
		}
		if !e.exists(otherDone) || !e.exists(young) {
			t.Fatal("the second process deleted jobs without the lease")
		}
		e.fc.Set(t0.Add(3 * time.Hour))
		res, err = e.c.SweepRetention(context.Background())
		if err != nil || res.Skipped || res.Deleted["other"] != 1 || res.Deleted["task"] != 1 {
			t.Fatalf("sweep at 3 h = %+v, %v; want the other kind's job (2 h) and the younger task job", res, err)
		}
		if !e.exists(dead) || !e.exists(waiting) {
			t.Fatal("the sweep deleted a dead or a waiting job")
		}
		got := gather(t, reg)
		if n := got[`weir_jobs_deleted_total{kind="task"}`]; n != 3 {
			t.Errorf("weir_jobs_deleted_total{kind=task} = %v, want 3", n)
		}
		// Once the first process's lease has ended (3 × RetentionEvery),
		// the second takes over.
		e.fc.Set(t0.Add(3*time.Hour + weir.DefaultRetentionEvery))
		if res, err := second.SweepRetention(context.Background()); err != nil || !res.Skipped {
			t.Fatalf("sweep of the second process within the lease = %+v, %v; want skipped", res, err)
		}
		e.fc.Set(t0.Add(3*time.Hour + 3*weir.DefaultRetentionEvery))
		if res, err := second.SweepRetention(context.Background()); err != nil || res.Skipped {
			t.Fatalf("sweep of the second process once the lease ended = %+v, %v", res, err)
		}
	})
}

// A started client sweeps on its own; KeepJobs keeps a kind's jobs.
func TestRetentionLoopAndKeepJobs(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		e := newEnvOn(t, open, weir.WorkFunc(func(context.Context, *weir.Job[task]) error { return nil }),
			weir.KindConfig{Retention: weir.KeepJobs}, func(c *weir.Config) { c.JobRetention = time.Hour })
		// Both finished longer ago than the retention: the first sweep,
		// at Start, deletes one.
		kept := e.finished(task{}, weirtype.StateCompleted, t0.Add(-2*time.Hour))
		gone := e.finished(other{}, weirtype.StateCompleted, t0.Add(-2*time.Hour))
		e.start()
		e.advanceUntil(weir.DefaultRetentionEvery, func() bool { return !e.exists(gone) })
		if !e.exists(kept) {
			t.Fatal("a job of a kind with KeepJobs was deleted")
		}
	})
}

// Negative retentions are refused, naming the field.
func TestRetentionRefusesNegative(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	if _, err := weir.NewClient(weir.Config{Store: s, JobRetention: -time.Hour}); err == nil || !strings.Contains(err.Error(), "JobRetention") {
		t.Errorf("negative JobRetention: %v", err)
	}
	if _, err := weir.NewClient(weir.Config{Store: s, RetentionEvery: -time.Second}); err == nil || !strings.Contains(err.Error(), "RetentionEvery") {
		t.Errorf("negative RetentionEvery: %v", err)
	}
	err := weir.AddWorker(weir.NewWorkers(), weir.WorkFunc(func(context.Context, *weir.Job[task]) error { return nil }), weir.KindConfig{Retention: -time.Minute})
	if err == nil || !strings.Contains(err.Error(), "KindConfig.Retention") {
		t.Errorf("negative KindConfig.Retention: %v", err)
	}
}
