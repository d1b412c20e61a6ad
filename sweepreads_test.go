package weir_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// deadLettered is one DeadLettered call of the client's metrics.
type deadLettered struct {
	kind, queue string
	reason      weirtype.AbandonReason
}

// recordingMetrics records the client's DeadLettered calls and ignores
// the others.
type recordingMetrics struct {
	weir.Metrics // nil: the other hooks are not called by these tests
	mu           sync.Mutex
	dead         []deadLettered
}

func (m *recordingMetrics) DeadLettered(kind, queue string, reason weirtype.AbandonReason) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dead = append(m.dead, deadLettered{kind, queue, reason})
}

func (m *recordingMetrics) deadLettered() []deadLettered {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.dead)
}

func (*recordingMetrics) Enqueued(string, string, weirtype.InsertOutcome)                    {}
func (*recordingMetrics) AttemptDone(string, string, weirtype.AttemptOutcome, time.Duration) {}
func (*recordingMetrics) Rescued(int)                                                        {}
func (*recordingMetrics) Swept(string, int, int, int)                                        {}
func (*recordingMetrics) SweepRun(time.Duration, error)                                      {}

// The jobs the rescue, the deadline sweep and a late completion abandon
// are counted and logged by kind and queue as the store names them: the
// client reads none back (it read each one, up to a thousand a rescue).
func TestSweepsCountTheJobsTheyAbandonWithoutReadingThemBack(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		b := newBlocker()
		m := &recordingMetrics{}
		fs := wrap(nil)
		e := newEnvOn(t, open, weir.WorkFunc(b.work), weir.KindConfig{}, func(c *weir.Config) {
			withFaults(fs)(c)
			c.Metrics = m
			c.LeaseFor = time.Hour
			c.RescueEvery = 24 * time.Hour // one rescue and one deadline sweep, at Start
		})
		ctx := context.Background()
		ex := e.s.Executor()
		// A waiting job past its deadline, and a job whose worker died on its
		// last attempt, in queues this client does not work.
		if _, err := ex.Insert(ctx, t0, []store.InsertParams{
			{Kind: "other", Queue: "waits", DeadlineAt: t0.Add(time.Minute)},
			{Kind: "other", Queue: "crashed", MaxAttempts: 1},
		}); err != nil {
			t.Fatal(err)
		}
		if js, err := ex.Claim(ctx, store.ClaimParams{Now: t0, Queue: "crashed", Limit: 1, Owner: "gone", LeaseFor: time.Minute}); err != nil || len(js) != 1 {
			t.Fatalf("claim: %v, %v", js, err)
		}
		e.fc.Advance(time.Hour)
		e.start()
		want := []deadLettered{
			{"other", "waits", weirtype.AbandonDeadline},
			{"other", "crashed", weirtype.AbandonMaxAttempts},
		}
		waitFor(t, func() bool { return len(m.deadLettered()) >= len(want) })
		if got := m.deadLettered(); !slices.Equal(got, want) {
			t.Fatalf("dead lettered %v, want %v", got, want)
		}

		// An attempt that succeeds past its deadline, before any deadline
		// sweep: its late completion abandons the job, and counts it.
		j := e.insert(task{}, &weir.InsertOpts{DeadlineAt: e.fc.Now().Add(time.Minute)})
		waitFor(t, func() bool { return b.hasStarted(1) })
		e.advanceUntil(10*time.Second, func() bool { return b.cause(1) != nil })
		e.fc.Advance(time.Second) // past the deadline, not at it
		b.release <- nil
		want = append(want, deadLettered{"task", weir.DefaultQueue, weirtype.AbandonDeadline})
		waitFor(t, func() bool { return len(m.deadLettered()) >= len(want) })
		if got := m.deadLettered(); !slices.Equal(got, want) {
			t.Fatalf("dead lettered %v, want %v", got, want)
		}
		if lrs, err := e.c.LateResults(ctx, weirtype.LateResultFilter{JobID: j.ID}); err != nil || len(lrs) != 1 {
			t.Fatalf("late results %v, %v; want the attempt's", lrs, err)
		}
		if n := fs.ex.getJobs.Load(); n != 0 {
			t.Fatalf("the client read %d jobs back to count them", n)
		}
	})
}
