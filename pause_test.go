package weir_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// Pause is a hold the client writes after an attempt: counted as its
// other writes are, so that advance waits for it.
func (e countedEx) Pause(ctx context.Context, now time.Time, p store.PauseParams) (*weirtype.Pause, error) {
	defer e.calls.enter()()
	return e.Executor.Pause(ctx, now, p)
}

// counter is a worker that counts its calls and runs fn, if set.
type counter struct {
	calls atomic.Int64
	fn    func(ctx context.Context, j *weir.Job[task]) error
}

func (w *counter) work(ctx context.Context, j *weir.Job[task]) error {
	w.calls.Add(1)
	if w.fn != nil {
		return w.fn(ctx, j)
	}
	return nil
}

// A paused queue runs none of its jobs, in any client on the store, until
// it is resumed; the pause says who paused, why and since when.
func TestPauseQueueHoldsItsJobsInEveryClient(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		w := &counter{}
		e := newEnvOn(t, open, weir.WorkFunc(w.work), weir.KindConfig{}, nil)
		// A second process on the same store.
		ws := weir.NewWorkers()
		if err := weir.AddWorker(ws, weir.WorkFunc(w.work), weir.KindConfig{}); err != nil {
			t.Fatal(err)
		}
		second, err := weir.NewClient(weir.Config{Store: e.s, Workers: ws, ID: "second", Clock: e.fc, Logger: testLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = stopOnFakeClock(second, e.fc) })
		p, err := e.c.Pause(ctx, weir.PauseParams{Queue: weir.DefaultQueue, By: "alice", Reason: "reindex"})
		if err != nil {
			t.Fatal(err)
		}
		if p.By != "alice" || p.Reason != "reindex" || !p.PausedAt.Equal(t0) || p.Cause != weirtype.PauseOperator {
			t.Fatalf("pause = %+v", p)
		}
		e.start()
		if err := second.Start(ctx); err != nil {
			t.Fatal(err)
		}
		ids := []int64{e.insert(task{}, nil).ID, e.insert(task{}, nil).ID}
		for range 5 {
			e.advance(weir.DefaultPollEvery)
		}
		if n := w.calls.Load(); n != 0 {
			t.Fatalf("%d attempts ran in a paused queue", n)
		}
		for _, id := range ids {
			if j := e.job(id); j.State != weirtype.StateAvailable || j.Attempt != 0 {
				t.Fatalf("job %d is %s at attempt %d while paused, want available at 0", id, j.State, j.Attempt)
			}
		}
		list, err := second.ListPauses(ctx)
		if err != nil || len(list) != 1 || list[0].By != "alice" {
			t.Fatalf("ListPauses from the other client = %v, %v", list, err)
		}
		if _, err := e.c.Resume(ctx, weir.DefaultQueue, ""); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			e.advanceState(id, weir.DefaultPollEvery, weirtype.StateCompleted, 1)
		}
		if _, err := e.c.Resume(ctx, weir.DefaultQueue, ""); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("second Resume: %v, want ErrNotFound", err)
		}
	})
}

// A pause names a queue, or a kind the client registers or the queue
// holds; anything else is refused with an error that says so.
func TestPauseRefusesWhatItCannotPause(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, weir.WorkFunc((&counter{}).work), weir.KindConfig{}, nil)
	if _, err := e.c.Pause(ctx, weir.PauseParams{}); err == nil {
		t.Fatal("Pause of nothing: no error")
	}
	if _, err := e.c.Pause(ctx, weir.PauseParams{Queue: weir.DefaultQueue, Kind: "typo"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Pause of an unknown kind: %v, want ErrNotFound", err)
	}
	// A queue the client works may be paused before its first job; one it
	// does not work, with no job and no pause, is refused.
	if p, err := e.c.Pause(ctx, weir.PauseParams{Queue: weir.DefaultQueue}); err != nil || p.Queue != weir.DefaultQueue || p.Kind != "" {
		t.Fatalf("Pause of the client's queue = %+v, %v", p, err)
	}
	if _, err := e.c.Pause(ctx, weir.PauseParams{Queue: "defualt"}); !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), `queue "defualt" has no job and no pause`) {
		t.Fatalf("Pause of a queue the client does not work: %v, want ErrNotFound naming it", err)
	}
	// A registered kind's queue comes from its KindConfig, before its
	// first job.
	p, err := e.c.Pause(ctx, weir.PauseParams{Kind: "task"})
	if err != nil || p.Queue != weir.DefaultQueue || p.Kind != "task" {
		t.Fatalf("Pause of a registered kind = %+v, %v", p, err)
	}
}

// openFor is the open period of the tests' breakers.
const openFor = 30 * time.Second

func newBreaker(t *testing.T, fc *clock.Fake) *breaker.Breaker {
	t.Helper()
	b, err := breaker.New(breaker.Config{Name: "dep", Strategy: breaker.Consecutive(1), OpenDelay: openFor,
		HalfOpenSuccessRatio: 0.01, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// While a kind's breaker is open its jobs are not claimed, nor their
// attempts spent; at each probe time one job goes through; a failed probe
// holds the kind another period, a successful one resumes it.
func TestBreakerPausesItsKind(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		var (
			down  atomic.Bool
			mu    sync.Mutex
			calls []time.Time
		)
		down.Store(true)
		var e *env
		var b *breaker.Breaker
		w := func(ctx context.Context, j *weir.Job[task]) error {
			return b.Do(ctx, func(context.Context) error {
				mu.Lock()
				calls = append(calls, e.fc.Now())
				mu.Unlock()
				if down.Load() {
					return errors.New("503 service unavailable")
				}
				return nil
			})
		}
		callCount := func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(calls)
		}
		var kc weir.KindConfig
		e = newEnvOn(t, open, weir.WorkFunc(w), kc, func(c *weir.Config) {
			b = newBreaker(t, c.Clock.(*clock.Fake))
			c.Queues = map[string]weir.QueueConfig{weir.DefaultQueue: {MaxWorkers: 1}}
			ws := weir.NewWorkers()
			if err := weir.AddWorker(ws, weir.WorkFunc(w), weir.KindConfig{Breaker: b}); err != nil {
				t.Fatal(err)
			}
			c.Workers = ws
		})
		var ids []int64
		for range 4 {
			ids = append(ids, e.insert(task{}, nil).ID)
		}
		e.start()
		e.waitState(ids[0], weirtype.StateScheduled, 1)
		waitFor(t, func() bool {
			ps, err := e.c.ListPauses(context.Background())
			return err == nil && len(ps) == 1 && ps[0].Cause == weirtype.PauseBreaker && ps[0].By == "dep"
		})
		// Open: nothing is claimed, nothing spent.
		for range 5 {
			e.advance(openFor / 6)
		}
		if n := callCount(); n != 1 {
			t.Fatalf("%d calls while the breaker was open, want the 1 that opened it", n)
		}
		for _, id := range ids[1:] {
			if j := e.job(id); j.Attempt != 0 {
				t.Fatalf("job %d spent %d attempts while its kind was paused", id, j.Attempt)
			}
		}
		// The first probe fails: one call, and another open period.
		e.advanceUntil(time.Second, func() bool { return callCount() == 2 })
		probeAt := e.fc.Now()
		for e.fc.Now().Before(probeAt.Add(openFor - time.Second)) {
			e.advance(time.Second)
		}
		if n := callCount(); n != 2 {
			t.Fatalf("%d calls within the open period after a failed probe, want 2", n)
		}
		// The next probe succeeds and the kind flows again.
		down.Store(false)
		for _, id := range ids {
			e.advanceUntil(time.Second, func() bool { return e.job(id).State == weirtype.StateCompleted })
		}
		if ps, err := e.c.ListPauses(context.Background()); err != nil || len(ps) != 0 {
			t.Fatalf("pauses after the probe succeeded: %v, %v", ps, err)
		}
		if n := callCount(); n != 6 {
			t.Fatalf("%d calls in all, want 6: the failure that opened the breaker, a failed probe, and one success a job", n)
		}
	})
}

// rateLimited is the second kind of the Retry-After test.
type rateLimited struct{}

func (rateLimited) Kind() string { return "rate_limited" }

// A Retry-After on one kind holds every kind of its RateLimitKey, in the
// store, until the hint has passed: no job of the key runs sooner.
func TestRetryAfterHoldsTheRateLimitKey(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		var otherRan atomic.Int64
		first := true
		var mu sync.Mutex
		w := func(ctx context.Context, j *weir.Job[task]) error {
			mu.Lock()
			defer mu.Unlock()
			if first {
				first = false
				return retry.After(errors.New("429 too many requests"), time.Minute)
			}
			return nil
		}
		e := newEnvOn(t, open, weir.WorkFunc(w), weir.KindConfig{RateLimitKey: "llm"}, func(c *weir.Config) {
			err := weir.AddWorker(c.Workers, weir.WorkFunc(func(context.Context, *weir.Job[rateLimited]) error {
				otherRan.Add(1)
				return nil
			}), weir.KindConfig{RateLimitKey: "llm"})
			if err != nil {
				t.Fatal(err)
			}
		})
		e.start()
		failed := e.insert(task{}, nil)
		j := e.waitState(failed.ID, weirtype.StateScheduled, 1)
		heldUntil := j.Errors[0].At.Add(time.Minute)
		waitFor(t, func() bool {
			ps, err := e.c.ListPauses(context.Background())
			return err == nil && len(ps) == 2
		})
		ps, _ := e.c.ListPauses(context.Background())
		for _, p := range ps {
			if p.Cause != weirtype.PauseRetryAfter || p.By != "llm" || !p.Until.Equal(heldUntil) {
				t.Fatalf("hold %+v, want retry_after by llm until %v", p, heldUntil)
			}
		}
		later := e.insert(rateLimited{}, nil)
		for e.fc.Now().Before(heldUntil.Add(-5 * time.Second)) {
			e.advance(5 * time.Second)
		}
		if n := otherRan.Load(); n != 0 {
			t.Fatalf("a job of the held key ran %v before the Retry-After passed", heldUntil.Sub(e.fc.Now()))
		}
		e.advanceState(later.ID, time.Second, weirtype.StateCompleted, 1)
		if got := e.job(later.ID).AttemptedAt; got.Before(heldUntil) {
			t.Fatalf("the held kind's job started at %v, before the hold's end %v", got, heldUntil)
		}
		e.advanceState(failed.ID, time.Second, weirtype.StateCompleted, 2)
	})
}
