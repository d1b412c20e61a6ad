package weir_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/internal/syncio"
	"github.com/weirhq/weir/schedule"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

var every15 = weir.PeriodicJob{Name: "report", Schedule: "every 15 minutes", Args: task{Name: "report"}}

// periodicClient makes a client with id on s and fc, with a worker for
// task and the periodic jobs pjs, logging at Debug to logs when it is not
// nil, and starts it. The client is stopped at the test's end.
func periodicClient(t *testing.T, s store.Store, fc *clock.Fake, id string, logs *syncio.Buffer, pjs ...weir.PeriodicJob) *weir.Client {
	t.Helper()
	ws := weir.NewWorkers()
	if err := weir.AddWorker(ws, weir.WorkFunc(ok), weir.KindConfig{}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	if logs != nil {
		log = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	c, err := weir.NewClient(weir.Config{Store: s, Workers: ws, ID: id, Clock: fc, Logger: log, Periodic: pjs})
	if err != nil {
		t.Fatal(err)
	}
	startClient(t, c)
	return c
}

// allJobs returns every job of the store (up to store.MaxJobListLimit),
// lowest id first.
func allJobs(t *testing.T, s store.Store) []*weirtype.Job {
	t.Helper()
	jobs, err := s.Executor().ListJobs(context.Background(), store.JobFilter{Limit: store.MaxJobListLimit})
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(jobs) // newest first
	return jobs
}

// waitJobs waits for the store to hold n jobs, and returns them.
func waitJobs(t *testing.T, s store.Store, n int) []*weirtype.Job {
	t.Helper()
	return waitJobsUntil(t, s, n, func(*weirtype.Job) bool { return true })
}

// waitDone waits for the store to hold n jobs, all completed, and returns
// them. A test waits for it before it moves the fake clock past the lease
// of a job that may be running.
func waitDone(t *testing.T, s store.Store, n int) []*weirtype.Job {
	t.Helper()
	return waitJobsUntil(t, s, n, func(j *weirtype.Job) bool { return j.State == weirtype.StateCompleted })
}

func waitJobsUntil(t *testing.T, s store.Store, n int, cond func(*weirtype.Job) bool) []*weirtype.Job {
	t.Helper()
	var jobs []*weirtype.Job
	waitFor(t, func() bool {
		jobs = allJobs(t, s)
		if len(jobs) > n {
			return true
		}
		for _, j := range jobs {
			if !cond(j) {
				return false
			}
		}
		return len(jobs) == n
	})
	if len(jobs) != n {
		t.Fatalf("%d jobs, want %d", len(jobs), n)
	}
	return jobs
}

// checkTicks checks that jobs are those of the ticks of the periodic job
// name, one each, in order.
func checkTicks(t *testing.T, jobs []*weirtype.Job, name string, ticks ...time.Time) {
	t.Helper()
	if len(jobs) != len(ticks) {
		t.Fatalf("%d jobs, want one for each of %v", len(jobs), ticks)
	}
	for i, j := range jobs {
		key := "periodic/" + name + "/" + ticks[i].UTC().Format(time.RFC3339)
		if !j.ScheduledAt.Equal(ticks[i]) || j.IdempotencyKey != key || j.Source != "periodic/"+name || j.Kind != "task" {
			t.Errorf("job %d: scheduled %v, key %q, source %q, kind %q; want scheduled %v, key %q",
				j.ID, j.ScheduledAt, j.IdempotencyKey, j.Source, j.Kind, ticks[i], key)
		}
	}
}

// at is a time on t0's day, in UTC.
func at(hour, min, sec int) time.Time {
	return time.Date(t0.Year(), t0.Month(), t0.Day(), hour, min, sec, 0, time.UTC)
}

// "every 15 minutes" over a simulated hour: the tick at Start, then one
// job per tick, each scheduled at its tick, each run.
func TestPeriodicEvery15MinutesOverAnHour(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		s := open(t)
		fc := clock.NewFake(at(15, 30, 0)) // on a tick
		periodicClient(t, s, fc, "test", nil, every15)

		ticks := []time.Time{at(15, 30, 0)}
		waitDone(t, s, 1)
		for _, tk := range []time.Time{at(15, 45, 0), at(16, 0, 0), at(16, 15, 0), at(16, 30, 0)} {
			fc.Set(tk.Add(-time.Second))
			fc.Set(tk)
			ticks = append(ticks, tk)
			waitDone(t, s, len(ticks))
		}
		fc.Set(at(16, 44, 59))
		jobs := allJobs(t, s)
		checkTicks(t, jobs, "report", ticks...)
		for _, j := range jobs {
			if !j.CreatedAt.Equal(j.ScheduledAt) {
				t.Errorf("job %d created at %v, not at its tick %v", j.ID, j.CreatedAt, j.ScheduledAt)
			}
		}
	})
}

// Two clients on one database with the same periodic job make one job per
// tick between them.
func TestPeriodicTwoClientsOneJobPerTick(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		s := open(t)
		fc := clock.NewFake(at(15, 37, 0))
		logs := &syncio.Buffer{}
		periodicClient(t, s, fc, "a", logs, every15)
		periodicClient(t, s, fc, "b", logs, every15)

		// Each client inserts each tick once: one makes the job, the other
		// finds it.
		handled := func(ticks int) {
			t.Helper()
			waitFor(t, func() bool {
				l := logs.String()
				return strings.Count(l, `"msg":"periodic job inserted"`)+strings.Count(l, `"msg":"periodic job of the tick exists"`) >= 2*ticks
			})
		}
		ticks := []time.Time{at(15, 30, 0)} // the most recent tick at Start
		handled(1)
		waitDone(t, s, 1)
		for _, tk := range []time.Time{at(15, 45, 0), at(16, 0, 0), at(16, 15, 0)} {
			fc.Set(tk)
			ticks = append(ticks, tk)
			handled(len(ticks))
			waitDone(t, s, len(ticks))
		}
		checkTicks(t, allJobs(t, s), "report", ticks...)
		if n := strings.Count(logs.String(), `"msg":"periodic job inserted"`); n != len(ticks) {
			t.Fatalf("%d inserts made a job, want %d:\n%s", n, len(ticks), logs)
		}
	})
}

// A restart just after a tick neither repeats that tick's job nor loses
// the next; a restart just after a tick that the stopped client missed
// inserts it.
func TestPeriodicRestart(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		s := open(t)
		fc := clock.NewFake(at(15, 55, 0))
		a := periodicClient(t, s, fc, "test", nil, every15)
		waitDone(t, s, 1) // 15:45, at Start
		fc.Set(at(16, 0, 0))
		waitDone(t, s, 2)
		fc.Set(at(16, 0, 5))
		stopClient(t, a)

		// Restart 10 s after the 16:00 tick, which a inserted.
		fc.Set(at(16, 0, 10))
		logs := &syncio.Buffer{}
		b := periodicClient(t, s, fc, "test", logs, every15)
		waitFor(t, func() bool { return strings.Contains(logs.String(), `"msg":"periodic job of the tick exists"`) })
		checkTicks(t, allJobs(t, s), "report", at(15, 45, 0), at(16, 0, 0))
		fc.Set(at(16, 15, 0))
		waitDone(t, s, 3)
		fc.Set(at(16, 20, 0))
		stopClient(t, b)

		// Restart 10 s after the 16:30 tick, which nobody inserted.
		fc.Set(at(16, 30, 10))
		periodicClient(t, s, fc, "test", nil, every15)
		jobs := waitDone(t, s, 4)
		if !jobs[3].CreatedAt.Equal(at(16, 30, 10)) {
			t.Fatalf("the missed tick's job was created at %v, want at the restart", jobs[3].CreatedAt)
		}
		fc.Set(at(16, 45, 0))
		checkTicks(t, waitDone(t, s, 5), "report", at(15, 45, 0), at(16, 0, 0), at(16, 15, 0), at(16, 30, 0), at(16, 45, 0))
	})
}

// "daily at 02:00" fires at 02:00 UTC; "daily at 02:00 in Europe/Paris"
// at 01:00 UTC in winter.
func TestPeriodicDaily(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		s := open(t)
		fc := clock.NewFake(t0) // 2026-01-21 15:30 UTC
		periodicClient(t, s, fc, "test", nil,
			weir.PeriodicJob{Name: "nightly", Schedule: "daily at 02:00", Args: task{}},
			weir.PeriodicJob{Name: "paris", Schedule: "daily at 02:00 in Europe/Paris", Args: task{}})
		day := func(d, h int) time.Time { return time.Date(2026, 1, d, h, 0, 0, 0, time.UTC) }
		jobs := waitDone(t, s, 2) // the most recent ticks: this morning's
		byKey := func(jobs []*weirtype.Job) map[string]*weirtype.Job {
			m := map[string]*weirtype.Job{}
			for _, j := range jobs {
				m[j.IdempotencyKey] = j
			}
			return m
		}
		for key, want := range map[string]time.Time{
			"periodic/nightly/2026-01-21T02:00:00Z": day(21, 2),
			"periodic/paris/2026-01-21T01:00:00Z":   day(21, 1),
		} {
			if j := byKey(jobs)[key]; j == nil || !j.ScheduledAt.Equal(want) {
				t.Fatalf("no job %q scheduled at %v among %d", key, want, len(jobs))
			}
		}

		fc.Set(day(22, 1))
		if j := waitDone(t, s, 3)[2]; j.IdempotencyKey != "periodic/paris/2026-01-22T01:00:00Z" {
			t.Fatalf("at 01:00 UTC the job of %q was made", j.IdempotencyKey)
		}
		fc.Set(day(22, 2).Add(-time.Second))
		fc.Set(day(22, 2))
		jobs = waitDone(t, s, 4)
		for key, want := range map[string]time.Time{
			"periodic/paris/2026-01-22T01:00:00Z":   day(22, 1),
			"periodic/nightly/2026-01-22T02:00:00Z": day(22, 2),
		} {
			j := byKey(jobs)[key]
			if j == nil || !j.ScheduledAt.Equal(want) || !j.CreatedAt.Equal(want) {
				t.Fatalf("job %q: %+v; want it scheduled and created at %v", key, j, want)
			}
		}
	})
}

// Ticks that passed at once (a paused process, a clock jump) are not
// inserted one by one: only the latest is, and the others are logged.
func TestPeriodicSkipsTicksThatPassedAtOnce(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		s := open(t)
		fc := clock.NewFake(at(15, 37, 0))
		logs := &syncio.Buffer{}
		periodicClient(t, s, fc, "test", logs, every15)
		waitDone(t, s, 1)
		fc.Set(at(16, 40, 0))
		checkTicks(t, waitDone(t, s, 2), "report", at(15, 30, 0), at(16, 30, 0))
		waitFor(t, func() bool { return strings.Contains(logs.String(), `"level":"WARN"`) })
		if l := logs.String(); !strings.Contains(l, `"skipped":3`) {
			t.Fatalf("no warning with the 3 skipped ticks:\n%s", l)
		}
	})
}

// A client without workers starts only to insert its periodic jobs.
func TestPeriodicSchedulerOnlyClient(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		s := open(t)
		fc := clock.NewFake(at(15, 37, 0))
		c, err := weir.NewClient(weir.Config{Store: s, ID: "scheduler", Clock: fc, Logger: slog.New(slog.DiscardHandler),
			Periodic: []weir.PeriodicJob{every15}})
		if err != nil {
			t.Fatal(err)
		}
		startClient(t, c)
		fc.Set(at(15, 45, 0))
		jobs := waitJobs(t, s, 2)
		checkTicks(t, jobs, "report", at(15, 30, 0), at(15, 45, 0))
		for _, j := range jobs {
			if j.State != weirtype.StateAvailable {
				t.Fatalf("job %d is %s: a client without workers ran it", j.ID, j.State)
			}
		}
	})
}

func TestPeriodicConfigErrors(t *testing.T) {
	t.Parallel()
	s := openSQLite(t)
	ws := weir.NewWorkers()
	if err := weir.AddWorker(ws, weir.WorkFunc(ok), weir.KindConfig{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		periodic []weir.PeriodicJob
		want     []string // in the error
		is       error
	}{
		{"bad spec", []weir.PeriodicJob{{Name: "report", Schedule: "every fortnight", Args: task{}}},
			[]string{`Config.Periodic[0] "report"`, `"every fortnight"`}, schedule.ErrInvalid},
		{"empty spec", []weir.PeriodicJob{{Name: "report", Args: task{}}},
			[]string{`"report"`, "empty schedule"}, schedule.ErrInvalid},
		{"empty name", []weir.PeriodicJob{{Schedule: "@hourly", Args: task{}}},
			[]string{"Config.Periodic[0]: Name is empty"}, nil},
		{"duplicate name", []weir.PeriodicJob{every15, {Name: "report", Schedule: "@hourly", Args: task{}}},
			[]string{`Config.Periodic[1] "report": Name is used`}, nil},
		{"nil args", []weir.PeriodicJob{{Name: "report", Schedule: "@hourly"}},
			[]string{`"report": Args is nil`}, nil},
		{"key set", []weir.PeriodicJob{{Name: "report", Schedule: "@hourly", Args: task{}, Opts: &weir.InsertOpts{IdempotencyKey: "k"}}},
			[]string{`"report": Opts.IdempotencyKey is set`}, nil},
		{"scheduled at set", []weir.PeriodicJob{{Name: "report", Schedule: "@hourly", Args: task{}, Opts: &weir.InsertOpts{ScheduledAt: t0}}},
			[]string{`"report": Opts.ScheduledAt is set`}, nil},
		{"deadline set", []weir.PeriodicJob{{Name: "report", Schedule: "@hourly", Args: task{}, Opts: &weir.InsertOpts{DeadlineAt: t0}}},
			[]string{`"report": Opts.DeadlineAt is set`}, nil},
		{"negative max attempts", []weir.PeriodicJob{{Name: "report", Schedule: "@hourly", Args: task{}, Opts: &weir.InsertOpts{MaxAttempts: -1}}},
			[]string{`"report"`, "max attempts -1"}, nil},
		{"unregistered kind in a worked queue", []weir.PeriodicJob{{Name: "sweep", Schedule: "@hourly", Args: other{}}},
			[]string{`"sweep": kind "other" has no worker`, `queue "default"`}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := weir.NewClient(weir.Config{Store: s, Workers: ws, Periodic: tc.periodic})
			if err == nil {
				t.Fatal("NewClient accepted the config")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %q is not %v", err, tc.is)
			}
		})
	}

	// A kind this client does not work may be inserted in a queue that
	// another process works, and by a client without workers.
	sweep := weir.PeriodicJob{Name: "sweep", Schedule: "@hourly", Args: other{}, Opts: &weir.InsertOpts{Queue: "maintenance"}}
	if _, err := weir.NewClient(weir.Config{Store: s, Workers: ws, Periodic: []weir.PeriodicJob{sweep}}); err != nil {
		t.Fatal(err)
	}
	sweep.Opts = nil
	if _, err := weir.NewClient(weir.Config{Store: s, Periodic: []weir.PeriodicJob{sweep}}); err != nil {
		t.Fatal(err)
	}
}
