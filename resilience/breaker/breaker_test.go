package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/resilience/breaker"
)

var (
	t0      = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	errBoom = errors.New("boom")
)

func newBreaker(t testing.TB, cfg breaker.Config) (*breaker.Breaker, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(t0)
	cfg.Clock = clk
	b, err := breaker.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b, clk
}

func ok(context.Context) error     { return nil }
func fail(context.Context) error   { return errBoom }
func ignore(context.Context) error { return breaker.Ignore(errBoom) }

// step is one line of a script run against a breaker on a fake clock:
// wait, then make n calls with the outcome o.
type step struct {
	wait time.Duration
	n    int
	o    breaker.Outcome
}

func fails(n int) step            { return step{n: n, o: breaker.Failure} }
func oks(n int) step              { return step{n: n, o: breaker.Success} }
func ignores(n int) step          { return step{n: n, o: breaker.Ignored} }
func wait(d time.Duration) step   { return step{wait: d} }
func script(steps ...step) []step { return steps }
func repeat(n int, s ...step) []step {
	var out []step
	for range n {
		out = append(out, s...)
	}
	return out
}

func run(t *testing.T, b *breaker.Breaker, clk *clock.Fake, steps []step) {
	t.Helper()
	fns := map[breaker.Outcome]func(context.Context) error{
		breaker.Success: ok, breaker.Failure: fail, breaker.Ignored: ignore,
	}
	for _, s := range steps {
		clk.Advance(s.wait)
		for range s.n {
			if err := b.Do(context.Background(), fns[s.o]); errors.Is(err, breaker.ErrOpen) {
				t.Fatalf("call refused by the %v breaker while running the script", b.State())
			}
		}
	}
}

func TestTripThresholds(t *testing.T) {
	count := breaker.CountInWindow(5, 30*time.Second)
	rate := breaker.FailureRate(0.5, 10, 30*time.Second)
	consec := breaker.Consecutive(3)

	tests := []struct {
		name     string
		strategy breaker.Strategy
		steps    []step
		want     breaker.State
	}{
		{"count/no calls", count, nil, breaker.Closed},
		{"count/4 failures stay closed", count, script(fails(4)), breaker.Closed},
		{"count/5 failures open", count, script(fails(5)), breaker.Open},
		{"count/successes do not reset", count, script(fails(2), oks(100), fails(3)), breaker.Open},
		{"count/ignored do not count", count, script(fails(4), ignores(100)), breaker.Closed},
		{"count/ignored then 5th failure opens", count, script(fails(4), ignores(100), fails(1)), breaker.Open},
		{"count/5 failures within the window less 1ns open", count,
			script(fails(1), wait(30*time.Second-time.Nanosecond), fails(4)), breaker.Open},
		{"count/5 failures spread over exactly the window stay closed", count,
			script(fails(1), wait(30*time.Second), fails(4)), breaker.Closed},
		{"count/evenly spread over the window stay closed", count,
			append(script(fails(1)), repeat(4, wait(7500*time.Millisecond), fails(1))...), breaker.Closed},
		{"count/evenly spread within the window open", count,
			append(script(fails(1)), repeat(4, wait(7500*time.Millisecond-1), fails(1))...), breaker.Open},
		{"count/window slides", count, script(fails(4), wait(30*time.Second), fails(4)), breaker.Closed},
		{"count/window slides then fills", count, script(fails(4), wait(30*time.Second), fails(5)), breaker.Open},
		{"count/one failure of one", breaker.CountInWindow(1, time.Second), script(fails(1)), breaker.Open},
		{"count/nothing but successes", count, script(oks(1000)), breaker.Closed},

		{"rate/5 of 10 stay closed", rate, script(fails(5), oks(5)), breaker.Closed},
		{"rate/5 of 10 stay closed, successes first", rate, script(oks(5), fails(5)), breaker.Closed},
		{"rate/6 of 10 open", rate, script(oks(4), fails(6)), breaker.Open},
		{"rate/9 of 9 stay closed", rate, script(fails(9)), breaker.Closed},
		{"rate/10 of 10 open", rate, script(fails(10)), breaker.Open},
		{"rate/6 failures and 3 successes stay closed", rate, script(fails(6), oks(3)), breaker.Closed},
		{"rate/the success that makes 10 calls opens", rate, script(fails(6), oks(4)), breaker.Open},
		{"rate/50 of 100 stay closed", rate, script(oks(50), fails(50)), breaker.Closed},
		{"rate/ignored do not count as calls", rate, script(oks(4), ignores(20), fails(5)), breaker.Closed},
		{"rate/outcomes count until the window ends", rate,
			script(fails(9), wait(30*time.Second-time.Nanosecond), fails(1)), breaker.Open},
		{"rate/outcomes leave the window", rate, script(fails(9), wait(30*time.Second), fails(1)), breaker.Closed},
		{"rate/outcomes count for 9/10 of the window at least", rate,
			script(wait(3*time.Second-time.Nanosecond), fails(9), wait(27*time.Second), fails(1)), breaker.Open},
		{"rate/zero rate opens on the first failure", breaker.FailureRate(0, 1, time.Second), script(fails(1)), breaker.Open},
		{"rate/zero rate needs minCalls", breaker.FailureRate(0, 3, time.Second), script(oks(1), fails(1)), breaker.Closed},

		{"consecutive/2 stay closed", consec, script(fails(2)), breaker.Closed},
		{"consecutive/3 open", consec, script(fails(3)), breaker.Open},
		{"consecutive/2, a success, 2 stay closed", consec, script(fails(2), oks(1), fails(2)), breaker.Closed},
		{"consecutive/ignored do not break the run", consec, script(fails(2), ignores(5), fails(1)), breaker.Open},
		{"consecutive/no window", consec, script(fails(2), wait(24*time.Hour), fails(1)), breaker.Open},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, clk := newBreaker(t, breaker.Config{Strategy: tt.strategy})
			run(t, b, clk, tt.steps)
			if got := b.State(); got != tt.want {
				t.Errorf("state = %v, want %v (%+v)", got, tt.want, b.Snapshot().Counts)
			}
		})
	}
}

func TestDefaultStrategyIsFiveInThirtySeconds(t *testing.T) {
	b, clk := newBreaker(t, breaker.Config{})
	run(t, b, clk, script(fails(1), wait(30*time.Second-1), fails(3)))
	if got := b.State(); got != breaker.Closed {
		t.Fatalf("after 4 failures: %v", got)
	}
	run(t, b, clk, script(fails(1)))
	if got := b.State(); got != breaker.Open {
		t.Fatalf("after 5 failures in the window: %v", got)
	}
	if got, want := b.Snapshot().NextProbeAt.Sub(clk.Now()), breaker.DefaultOpenDelay; got != want {
		t.Errorf("open delay = %v, want %v", got, want)
	}
}

// openAndWait trips b and moves the clock to the end of its open delay.
func openAndWait(t *testing.T, b *breaker.Breaker, clk *clock.Fake) {
	t.Helper()
	b.Trip()
	clk.Set(b.Snapshot().NextProbeAt)
	if got := b.State(); got != breaker.HalfOpen {
		t.Fatalf("state at the end of the open delay = %v, want half-open", got)
	}
}

func TestHalfOpenAdmitsExactlyKProbes(t *testing.T) {
	for _, k := range []int{1, 2, 3, 5, 10} {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			t.Parallel()
			b, clk := newBreaker(t, breaker.Config{Name: "db", HalfOpenProbes: k})
			openAndWait(t, b, clk)
			var tickets []breaker.Ticket
			for i := range k {
				tk, err := b.Allow()
				if err != nil {
					t.Fatalf("probe %d: %v", i+1, err)
				}
				if tk.State() != breaker.HalfOpen {
					t.Fatalf("probe %d admitted as %v", i+1, tk.State())
				}
				tickets = append(tickets, tk)
			}
			for range 3 {
				_, err := b.Allow()
				var oe *breaker.OpenError
				if !errors.As(err, &oe) || !errors.Is(err, breaker.ErrOpen) {
					t.Fatalf("probe %d: err = %v, want an *OpenError", k+1, err)
				}
				if oe.State != breaker.HalfOpen || oe.RetryIn != 0 || oe.Name != "db" {
					t.Errorf("OpenError = %+v", oe)
				}
			}
			if got := b.Snapshot().Counts.Rejected; got != 3 {
				t.Errorf("Rejected = %d, want 3", got)
			}
			for _, tk := range tickets {
				b.Done(tk, breaker.Success)
			}
			if got := b.State(); got != breaker.Closed {
				t.Errorf("after %d successful probes: %v", k, got)
			}
		})
	}
}

func TestHalfOpenSuccessRatio(t *testing.T) {
	tests := []struct {
		probes int
		ratio  float64
		need   int // successes that close it: the least n with n > ratio × probes
	}{
		{1, 0, 1}, // the default ratio, 0.8
		{1, 0.8, 1},
		{2, 0.8, 2},
		{5, 0.8, 5},
		{10, 0.8, 9},
		{10, 0.5, 6},
		{4, 0.5, 3},
		{3, 0.34, 2},
		{10, 0.05, 1},
		{10, 0.1, 2},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d probes, ratio %v", tt.probes, tt.ratio), func(t *testing.T) {
			t.Parallel()
			b, clk := newBreaker(t, breaker.Config{HalfOpenProbes: tt.probes, HalfOpenSuccessRatio: tt.ratio})
			openAndWait(t, b, clk)
			tickets := make([]breaker.Ticket, tt.probes)
			for i := range tickets {
				var err error
				if tickets[i], err = b.Allow(); err != nil {
					t.Fatal(err)
				}
			}
			for i := range tt.need - 1 {
				b.Done(tickets[i], breaker.Success)
			}
			if got := b.State(); got != breaker.HalfOpen {
				t.Fatalf("after %d successes: %v, want half-open", tt.need-1, got)
			}
			if got := b.Snapshot().Counts.Successes; got != uint64(tt.need-1) {
				t.Errorf("Successes = %d, want %d", got, tt.need-1)
			}
			b.Done(tickets[tt.need-1], breaker.Success)
			if got := b.State(); got != breaker.Closed {
				t.Fatalf("after %d successes: %v, want closed", tt.need, got)
			}
		})
	}
}

func TestAnyHalfOpenFailureReopens(t *testing.T) {
	for _, before := range []int{0, 1, 4} {
		t.Run(fmt.Sprintf("after %d successes", before), func(t *testing.T) {
			t.Parallel()
			b, clk := newBreaker(t, breaker.Config{HalfOpenProbes: 5, OpenDelay: 10 * time.Second})
			openAndWait(t, b, clk)
			tickets := make([]breaker.Ticket, 5)
			for i := range tickets {
				tickets[i], _ = b.Allow()
			}
			for i := range before {
				b.Done(tickets[i], breaker.Success)
			}
			clk.Advance(time.Second)
			b.Done(tickets[before], breaker.Failure)
			s := b.Snapshot()
			if s.State != breaker.Open {
				t.Fatalf("state = %v, want open", s.State)
			}
			if !s.OpenedAt.Equal(clk.Now()) || !s.NextProbeAt.Equal(clk.Now().Add(10*time.Second)) {
				t.Errorf("OpenedAt %v, NextProbeAt %v; now %v", s.OpenedAt, s.NextProbeAt, clk.Now())
			}
			want := breaker.Counts{Successes: uint64(before), Failures: 1, ConsecutiveFailures: 1}
			if s.Counts != want {
				t.Errorf("Counts = %+v, want %+v", s.Counts, want)
			}
			// The other probes were admitted in the half-open period that
			// ended: their outcomes are dropped.
			for _, tk := range tickets[before+1:] {
				b.Done(tk, breaker.Success)
			}
			if got := b.State(); got != breaker.Open {
				t.Errorf("after stale successes: %v, want open", got)
			}
		})
	}
}

func TestIgnoredProbeFreesItsSlot(t *testing.T) {
	b, clk := newBreaker(t, breaker.Config{})
	openAndWait(t, b, clk)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := b.Do(ctx, func(ctx context.Context) error { return ctx.Err() })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want the call's own error", err)
	}
	if err := b.Do(context.Background(), ignore); !breaker.IsIgnored(err) {
		t.Fatalf("Do = %v, want the call's own error", err)
	}
	tk, err := b.Allow()
	if err != nil {
		t.Fatalf("probe after two ignored probes: %v", err)
	}
	if _, err := b.Allow(); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("second probe: %v, want ErrOpen", err)
	}
	b.Done(tk, breaker.Ignored)
	if err := b.Do(context.Background(), ok); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if got := b.State(); got != breaker.Closed {
		t.Errorf("state = %v, want closed", got)
	}
}

func TestClassify(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	live := context.Background()

	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want breaker.Outcome
	}{
		{"nil", live, nil, breaker.Success},
		{"nil with the context done", cancelled, nil, breaker.Success},
		{"error", live, errBoom, breaker.Failure},
		{"error with the context done", cancelled, errBoom, breaker.Failure},
		{"caller cancelled", cancelled, context.Canceled, breaker.Ignored},
		{"caller cancelled, wrapped", cancelled, fmt.Errorf("query: %w", context.Canceled), breaker.Ignored},
		{"caller's deadline", expired, context.DeadlineExceeded, breaker.Ignored},
		{"the dependency's own timeout", live, context.DeadlineExceeded, breaker.Failure},
		{"canceled, not by the caller", live, context.Canceled, breaker.Failure},
		{"marked", live, breaker.Ignore(errBoom), breaker.Ignored},
		{"marked and wrapped", live, fmt.Errorf("call: %w", breaker.Ignore(errBoom)), breaker.Ignored},
		{"nil context", nil, context.Canceled, breaker.Failure},
	}
	b, _ := newBreaker(t, breaker.Config{})
	for _, tt := range tests {
		if got := b.Outcome(tt.ctx, tt.err); got != tt.want {
			t.Errorf("%s: Outcome = %v, want %v", tt.name, got, tt.want)
		}
		if got := breaker.DefaultClassify(tt.ctx, tt.err); got != tt.want {
			t.Errorf("%s: DefaultClassify = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestCustomClassify(t *testing.T) {
	errNotFound := errors.New("not found")
	b, clk := newBreaker(t, breaker.Config{
		Strategy: breaker.Consecutive(2),
		Classify: func(ctx context.Context, err error) breaker.Outcome {
			if errors.Is(err, errNotFound) {
				return breaker.Success
			}
			return breaker.DefaultClassify(ctx, err)
		},
	})
	if got := b.Outcome(context.Background(), errNotFound); got != breaker.Success {
		t.Errorf("Outcome(not found) = %v", got)
	}
	for range 5 {
		if err := b.Do(context.Background(), func(context.Context) error { return errNotFound }); err != errNotFound {
			t.Fatalf("Do = %v, want fn's error unchanged", err)
		}
	}
	run(t, b, clk, script(fails(1)))
	if got := b.State(); got != breaker.Closed {
		t.Errorf("state = %v, want closed", got)
	}
}

func TestIgnoredOutcomesDoNotCount(t *testing.T) {
	b, _ := newBreaker(t, breaker.Config{Strategy: breaker.Consecutive(1)})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 10 {
		b.Do(ctx, func(ctx context.Context) error { return ctx.Err() })
		b.Do(context.Background(), ignore)
		tk, _ := b.Allow()
		b.Done(tk, breaker.Ignored)
	}
	s := b.Snapshot()
	if s.State != breaker.Closed || s.Counts != (breaker.Counts{}) {
		t.Errorf("snapshot = %+v, want closed with no counts", s)
	}
}

func TestOpenErrorRetryIn(t *testing.T) {
	b, clk := newBreaker(t, breaker.Config{Name: "llm", OpenDelay: 60 * time.Second})
	b.Trip()
	tests := []struct {
		advance time.Duration
		want    time.Duration
	}{
		{0, 60 * time.Second},
		{20 * time.Second, 40 * time.Second},
		{40*time.Second - 2, 2},
		{1, 1},
	}
	called := false
	for _, tt := range tests {
		clk.Advance(tt.advance)
		err := b.Do(context.Background(), func(context.Context) error { called = true; return nil })
		var oe *breaker.OpenError
		if !errors.As(err, &oe) {
			t.Fatalf("Do = %v, want an *OpenError", err)
		}
		if oe.RetryIn != tt.want || oe.State != breaker.Open || oe.Name != "llm" {
			t.Errorf("OpenError = %+v, want RetryIn %v", oe, tt.want)
		}
		if want := fmt.Sprintf(`circuit breaker "llm" is open: next probe in %v`, tt.want); oe.Error() != want {
			t.Errorf("Error() = %q, want %q", oe.Error(), want)
		}
	}
	if called {
		t.Fatal("fn was called while open")
	}
	clk.Advance(1)
	if err := b.Do(context.Background(), func(context.Context) error { called = true; return nil }); err != nil || !called {
		t.Fatalf("at the end of the open delay: err %v, called %v", err, called)
	}
}

func TestOpenErrorMessages(t *testing.T) {
	tests := []struct {
		err  *breaker.OpenError
		want string
	}{
		{&breaker.OpenError{State: breaker.Open, RetryIn: 1500 * time.Millisecond}, "circuit breaker is open: next probe in 1.5s"},
		{&breaker.OpenError{Name: "s3", State: breaker.HalfOpen}, `circuit breaker "s3" is half-open and all its probes are taken`},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
		wrapped := fmt.Errorf("call: %w", tt.err)
		if !errors.Is(wrapped, breaker.ErrOpen) {
			t.Errorf("%v does not match ErrOpen", wrapped)
		}
		if errors.Is(wrapped, errBoom) {
			t.Errorf("%v matches an unrelated error", wrapped)
		}
	}
}

func TestJitteredOpenDelayStaysInBounds(t *testing.T) {
	const d, j = 60 * time.Second, 0.2
	tests := []struct {
		u    float64
		want time.Duration
	}{
		{0, 48 * time.Second},
		{0.25, 54 * time.Second},
		{0.5, 60 * time.Second},
		{0.75, 66 * time.Second},
		{-3, 48 * time.Second}, // a bad Rand is clamped
		{7, 72 * time.Second},
	}
	for _, tt := range tests {
		u := tt.u
		b, clk := newBreaker(t, breaker.Config{OpenDelay: d, OpenJitter: j, Rand: func() float64 { return u }})
		b.Trip()
		got := b.Snapshot().NextProbeAt.Sub(clk.Now())
		if diff := got - tt.want; diff < -time.Microsecond || diff > time.Microsecond {
			t.Errorf("u = %v: delay %v, want %v", u, got, tt.want)
		}
		if got < 48*time.Second || got > 72*time.Second {
			t.Errorf("u = %v: delay %v out of [48s, 72s]", u, got)
		}
	}
}

func TestCallbacksInOrder(t *testing.T) {
	var (
		b      *breaker.Breaker
		got    []breaker.Transition
		inside []breaker.Snapshot
	)
	b, clk := newBreaker(t, breaker.Config{
		Name:     "api",
		Strategy: breaker.Consecutive(2),
		OnStateChange: func(tr breaker.Transition) {
			got = append(got, tr)
			inside = append(inside, b.Snapshot()) // must not deadlock
			if tr.To == breaker.HalfOpen && len(got) == 2 {
				b.Trip() // a callback may change the state; its own callback comes next
			}
		},
	})
	run(t, b, clk, script(fails(2)))      // closed → open
	clk.Advance(breaker.DefaultOpenDelay) //
	b.State()                             // open → half-open → open (Trip in the callback)
	clk.Advance(breaker.DefaultOpenDelay) //
	run(t, b, clk, script(oks(1)))        // open → half-open → closed
	b.Trip()                              // closed → open
	b.Reset()                             // open → closed
	b.Reset()                             // closed → closed: no callback
	want := []struct{ from, to breaker.State }{
		{breaker.Closed, breaker.Open},
		{breaker.Open, breaker.HalfOpen},
		{breaker.HalfOpen, breaker.Open},
		{breaker.Open, breaker.HalfOpen},
		{breaker.HalfOpen, breaker.Closed},
		{breaker.Closed, breaker.Open},
		{breaker.Open, breaker.Closed},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d transitions, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		tr := got[i]
		if tr.From != w.from || tr.To != w.to || tr.Name != "api" || tr.Snapshot.State != w.to || tr.Snapshot.Name != "api" {
			t.Errorf("transition %d = %v → %v (snapshot %v), want %v → %v", i, tr.From, tr.To, tr.Snapshot.State, w.from, w.to)
		}
	}
	if at := got[0].At; !at.Equal(t0) {
		t.Errorf("first transition at %v, want %v", at, t0)
	}
	if at := got[len(got)-1].At; !at.Equal(clk.Now()) {
		t.Errorf("last transition at %v, want %v", at, clk.Now())
	}
	if c := got[0].Snapshot.Counts; c.Failures != 2 || c.ConsecutiveFailures != 2 {
		t.Errorf("snapshot of the first opening: %+v", c)
	}
	if s := inside[len(inside)-1]; s.State != breaker.Closed {
		t.Errorf("Snapshot inside the last callback: %v", s.State)
	}
}

func TestTripAndReset(t *testing.T) {
	b, clk := newBreaker(t, breaker.Config{OpenDelay: time.Minute})
	run(t, b, clk, script(fails(3)))
	b.Trip()
	s := b.Snapshot()
	if s.State != breaker.Open || s.Counts.Failures != 3 || !s.OpenedAt.Equal(t0) || !s.NextProbeAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after Trip: %+v", s)
	}
	b.Do(context.Background(), ok)
	b.Do(context.Background(), ok)
	if got := b.Snapshot().Counts.Rejected; got != 2 {
		t.Errorf("Rejected = %d, want 2", got)
	}

	clk.Advance(30 * time.Second)
	b.Trip() // restarts the delay
	if got := b.Snapshot().NextProbeAt; !got.Equal(t0.Add(90 * time.Second)) {
		t.Errorf("NextProbeAt after a second Trip = %v", got)
	}

	b.Reset()
	s = b.Snapshot()
	if s.State != breaker.Closed || s.Counts != (breaker.Counts{}) || !s.OpenedAt.IsZero() || !s.NextProbeAt.IsZero() {
		t.Fatalf("after Reset: %+v", s)
	}
	run(t, b, clk, script(fails(4)))
	if got := b.State(); got != breaker.Closed {
		t.Errorf("4 failures after Reset: %v, want closed (counts were cleared)", got)
	}

	clk.Advance(time.Hour)
	b.Trip()
	clk.Advance(time.Minute)
	if got := b.State(); got != breaker.HalfOpen {
		t.Fatalf("state = %v", got)
	}
	b.Trip()
	if got := b.State(); got != breaker.Open {
		t.Errorf("Trip from half-open: %v", got)
	}
}

func TestStaleOutcomesAreDropped(t *testing.T) {
	t.Run("closed call ends in half-open", func(t *testing.T) {
		b, clk := newBreaker(t, breaker.Config{Strategy: breaker.Consecutive(1)})
		slow, _ := b.Allow()
		run(t, b, clk, script(fails(1)))
		clk.Advance(breaker.DefaultOpenDelay)
		probe, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		b.Done(slow, breaker.Failure)
		b.Done(slow, breaker.Success)
		if s := b.Snapshot(); s.State != breaker.HalfOpen || s.Counts.Failures != 0 || s.Counts.Successes != 0 {
			t.Fatalf("after a stale outcome: %+v", s)
		}
		b.Done(probe, breaker.Success)
		if got := b.State(); got != breaker.Closed {
			t.Fatalf("state = %v", got)
		}
	})
	t.Run("closed call ends in a later closed period", func(t *testing.T) {
		b, clk := newBreaker(t, breaker.Config{Strategy: breaker.Consecutive(1)})
		slow, _ := b.Allow()
		run(t, b, clk, script(fails(1)))
		clk.Advance(breaker.DefaultOpenDelay)
		run(t, b, clk, script(oks(1)))
		b.Done(slow, breaker.Failure)
		if got := b.State(); got != breaker.Closed {
			t.Fatalf("a stale failure reopened the breaker: %v", got)
		}
	})
	t.Run("probe ends in a later half-open period", func(t *testing.T) {
		b, clk := newBreaker(t, breaker.Config{HalfOpenProbes: 2})
		openAndWait(t, b, clk)
		slow, _ := b.Allow()
		other, _ := b.Allow()
		b.Done(other, breaker.Failure)
		clk.Advance(breaker.DefaultOpenDelay)
		b.Done(slow, breaker.Ignored) // must not free a slot of the new period
		a, errA := b.Allow()
		_, errB := b.Allow()
		_, errC := b.Allow()
		if errA != nil || errB != nil || !errors.Is(errC, breaker.ErrOpen) {
			t.Fatalf("probes of the new period: %v, %v, %v", errA, errB, errC)
		}
		b.Done(slow, breaker.Success)
		if got := b.Snapshot().Counts.Successes; got != 0 {
			t.Fatalf("a stale success counted: %d", got)
		}
		b.Done(a, breaker.Success)
	})
	t.Run("Reset", func(t *testing.T) {
		b, _ := newBreaker(t, breaker.Config{Strategy: breaker.Consecutive(1)})
		slow, _ := b.Allow()
		b.Reset()
		b.Done(slow, breaker.Failure)
		if got := b.State(); got != breaker.Closed {
			t.Fatalf("state = %v", got)
		}
	})
	t.Run("zero ticket", func(t *testing.T) {
		b, _ := newBreaker(t, breaker.Config{Strategy: breaker.Consecutive(1)})
		b.Done(breaker.Ticket{}, breaker.Failure)
		if got := b.State(); got != breaker.Closed {
			t.Fatalf("state = %v", got)
		}
	})
}

func TestSnapshotCounts(t *testing.T) {
	t.Run("count in window", func(t *testing.T) {
		b, clk := newBreaker(t, breaker.Config{})
		run(t, b, clk, script(fails(3)))
		check(t, b, breaker.Counts{Failures: 3, ConsecutiveFailures: 3})
		run(t, b, clk, script(oks(2)))
		check(t, b, breaker.Counts{Failures: 3})
		run(t, b, clk, script(wait(20*time.Second), fails(1)))
		check(t, b, breaker.Counts{Failures: 4, ConsecutiveFailures: 1})
		clk.Advance(10 * time.Second)
		check(t, b, breaker.Counts{Failures: 1, ConsecutiveFailures: 1})
	})
	t.Run("failure rate", func(t *testing.T) {
		b, clk := newBreaker(t, breaker.FailureRateConfig("llm"))
		run(t, b, clk, script(oks(7), fails(2)))
		check(t, b, breaker.Counts{Successes: 7, Failures: 2, ConsecutiveFailures: 2})
		clk.Advance(30 * time.Second)
		check(t, b, breaker.Counts{ConsecutiveFailures: 2})
	})
	t.Run("consecutive", func(t *testing.T) {
		b, clk := newBreaker(t, breaker.Config{Strategy: breaker.Consecutive(5)})
		run(t, b, clk, script(fails(3), oks(1), fails(2)))
		check(t, b, breaker.Counts{Failures: 2, ConsecutiveFailures: 2})
	})
	t.Run("open and half-open", func(t *testing.T) {
		b, clk := newBreaker(t, breaker.Config{Strategy: breaker.Consecutive(2), HalfOpenProbes: 2})
		run(t, b, clk, script(fails(2)))
		b.Allow()
		check(t, b, breaker.Counts{Failures: 2, ConsecutiveFailures: 2, Rejected: 1})
		clk.Advance(breaker.DefaultOpenDelay)
		p, _ := b.Allow()
		b.Allow()
		b.Allow()
		b.Done(p, breaker.Success)
		s := b.Snapshot()
		if s.State != breaker.HalfOpen || !s.OpenedAt.Equal(t0) || !s.NextProbeAt.IsZero() {
			t.Errorf("half-open snapshot: %+v", s)
		}
		check(t, b, breaker.Counts{Successes: 1, Rejected: 1})
	})
}

func check(t *testing.T, b *breaker.Breaker, want breaker.Counts) {
	t.Helper()
	if got := b.Snapshot().Counts; got != want {
		t.Errorf("Counts = %+v, want %+v", got, want)
	}
}

func TestDoPassesErrorsThrough(t *testing.T) {
	b, _ := newBreaker(t, breaker.Config{})
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "v")
	var gotCtx context.Context
	err := b.Do(ctx, func(ctx context.Context) error { gotCtx = ctx; return errBoom })
	if err != errBoom {
		t.Errorf("Do = %v, want fn's error itself", err)
	}
	if gotCtx != ctx {
		t.Error("fn did not get the caller's context")
	}
}

func TestPanicCountsAsFailure(t *testing.T) {
	b, _ := newBreaker(t, breaker.Config{Strategy: breaker.Consecutive(1)})
	func() {
		defer func() {
			if r := recover(); r != "kaboom" {
				t.Errorf("recovered %v, want the panic to go on", r)
			}
		}()
		b.Do(context.Background(), func(context.Context) error { panic("kaboom") })
	}()
	if got := b.State(); got != breaker.Open {
		t.Errorf("state after a panic = %v, want open", got)
	}
}

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name  string
		cfg   breaker.Config
		field string
	}{
		{"count zero", breaker.Config{Strategy: breaker.CountInWindow(0, time.Second)}, "CountInWindow failures"},
		{"count too many", breaker.Config{Strategy: breaker.CountInWindow(breaker.MaxFailures+1, time.Second)}, "CountInWindow failures"},
		{"count window", breaker.Config{Strategy: breaker.CountInWindow(3, 0)}, "CountInWindow window"},
		{"rate negative", breaker.Config{Strategy: breaker.FailureRate(-0.1, 10, time.Second)}, "FailureRate rate"},
		{"rate one", breaker.Config{Strategy: breaker.FailureRate(1, 10, time.Second)}, "FailureRate rate"},
		{"rate NaN", breaker.Config{Strategy: breaker.FailureRate(nan(), 10, time.Second)}, "FailureRate rate"},
		{"rate minCalls", breaker.Config{Strategy: breaker.FailureRate(0.5, 0, time.Second)}, "FailureRate minCalls"},
		{"rate window", breaker.Config{Strategy: breaker.FailureRate(0.5, 10, 9)}, "FailureRate window"},
		{"consecutive zero", breaker.Config{Strategy: breaker.Consecutive(0)}, "Consecutive failures"},
		{"consecutive negative", breaker.Config{Strategy: breaker.Consecutive(-1)}, "Consecutive failures"},
		{"open delay", breaker.Config{OpenDelay: -time.Second}, "OpenDelay"},
		{"jitter negative", breaker.Config{OpenJitter: -0.1}, "OpenJitter"},
		{"jitter one", breaker.Config{OpenJitter: 1}, "OpenJitter"},
		{"jitter NaN", breaker.Config{OpenJitter: nan()}, "OpenJitter"},
		{"probes", breaker.Config{HalfOpenProbes: -1}, "HalfOpenProbes"},
		{"probes too many", breaker.Config{HalfOpenProbes: breaker.MaxHalfOpenProbes + 1}, "HalfOpenProbes"},
		{"ratio negative", breaker.Config{HalfOpenSuccessRatio: -0.5}, "HalfOpenSuccessRatio"},
		{"ratio one", breaker.Config{HalfOpenSuccessRatio: 1}, "HalfOpenSuccessRatio"},
		{"ratio NaN", breaker.Config{HalfOpenSuccessRatio: nan()}, "HalfOpenSuccessRatio"},
	}
	for _, tt := range tests {
		tt.cfg.Name = "x"
		b, err := breaker.New(tt.cfg)
		if b != nil || !errors.Is(err, breaker.ErrInvalidConfig) {
			t.Errorf("%s: New = %v, %v; want ErrInvalidConfig", tt.name, b, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, tt.field) || !strings.HasPrefix(msg, `new breaker "x": `) {
			t.Errorf("%s: error %q does not name %s", tt.name, msg, tt.field)
		}
	}
}

func nan() float64 {
	zero := 0.0
	return zero / zero
}

func TestZeroConfigWorks(t *testing.T) {
	b, err := breaker.New(breaker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Do(context.Background(), ok); err != nil {
		t.Fatal(err)
	}
	if b.State() != breaker.Closed || b.Name() != "" {
		t.Fatalf("state %v, name %q", b.State(), b.Name())
	}
	cfg := breaker.FailureRateConfig("llm")
	if cfg.OpenDelay != 30*time.Second || cfg.Strategy.String() != "failure rate above 0.5 of at least 10 calls in 30s" {
		t.Errorf("FailureRateConfig = %+v", cfg)
	}
	if b, err := breaker.New(cfg); err != nil || b.Name() != "llm" {
		t.Errorf("New(FailureRateConfig) = %v, %v", b, err)
	}
}

func TestStrings(t *testing.T) {
	tests := []struct{ got, want string }{
		{breaker.Closed.String(), "closed"},
		{breaker.Open.String(), "open"},
		{breaker.HalfOpen.String(), "half-open"},
		{breaker.State(9).String(), "State(9)"},
		{breaker.Success.String(), "success"},
		{breaker.Failure.String(), "failure"},
		{breaker.Ignored.String(), "ignored"},
		{breaker.Outcome(9).String(), "Outcome(9)"},
		{breaker.CountInWindow(5, 30*time.Second).String(), "5 failures in 30s"},
		{breaker.Consecutive(3).String(), "3 consecutive failures"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestIgnoreMarks(t *testing.T) {
	if breaker.Ignore(nil) != nil {
		t.Error("Ignore(nil) is not nil")
	}
	err := fmt.Errorf("put: %w", breaker.Ignore(errBoom))
	if !breaker.IsIgnored(err) || !errors.Is(err, errBoom) || err.Error() != "put: boom" {
		t.Errorf("wrapped mark: %v", err)
	}
	if breaker.IsIgnored(errBoom) || breaker.IsIgnored(nil) {
		t.Error("an unmarked error is ignored")
	}
}

func TestUnknownOutcomeCountsAsFailure(t *testing.T) {
	b, _ := newBreaker(t, breaker.Config{Strategy: breaker.Consecutive(1)})
	tk, _ := b.Allow()
	b.Done(tk, breaker.Outcome(42))
	if got := b.State(); got != breaker.Open {
		t.Errorf("state = %v, want open", got)
	}
}

func TestClockGoingBack(t *testing.T) {
	for _, s := range []breaker.Strategy{
		breaker.CountInWindow(3, time.Second),
		breaker.FailureRate(0.5, 4, time.Second),
		breaker.Consecutive(3),
	} {
		b, clk := newBreaker(t, breaker.Config{Strategy: s, OpenDelay: time.Second})
		run(t, b, clk, script(fails(1), oks(1)))
		clk.Set(t0.Add(-time.Hour))
		for range 3 {
			if tk, err := b.Allow(); err == nil {
				b.Done(tk, breaker.Failure)
			}
		}
		if got := b.State(); got != breaker.Open {
			t.Errorf("%v: state = %v, want open", s, got)
		}
		if got := b.Snapshot().NextProbeAt; !got.Equal(clk.Now().Add(time.Second)) {
			t.Errorf("%v: NextProbeAt = %v, want %v", s, got, clk.Now().Add(time.Second))
		}
	}
}

func TestClosedCallsDoNotAllocate(t *testing.T) {
	ctx := context.Background()
	for _, s := range []breaker.Strategy{
		breaker.CountInWindow(breaker.MaxFailures, time.Second),
		breaker.FailureRate(0.5, 10, time.Second),
		breaker.Consecutive(3),
	} {
		b, _ := newBreaker(t, breaker.Config{Strategy: s})
		if n := testing.AllocsPerRun(1000, func() { b.Do(ctx, ok) }); n != 0 {
			t.Errorf("%v: %v allocs per successful Do", s, n)
		}
		// Neither strategy trips on this: half the calls fail, none twice
		// in a row, and the count is far off.
		if n := testing.AllocsPerRun(1000, func() { b.Do(ctx, fail); b.Do(ctx, ok) }); n != 0 {
			t.Errorf("%v: %v allocs per failed and successful Do", s, n)
		}
		if got := b.State(); got != breaker.Closed {
			t.Errorf("%v: state = %v", s, got)
		}
	}
}

func BenchmarkDo(b *testing.B) {
	ctx := context.Background()
	for _, s := range []breaker.Strategy{
		breaker.CountInWindow(5, time.Second),
		breaker.FailureRate(0.5, 10, time.Second),
		breaker.Consecutive(3),
	} {
		br, err := breaker.New(breaker.Config{Strategy: s})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(s.String(), func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					br.Do(ctx, ok)
				}
			})
		})
	}
}

func TestPanickingCallbackDoesNotWedgeTheBreaker(t *testing.T) {
	var seen []breaker.State
	b, _ := newBreaker(t, breaker.Config{
		Strategy: breaker.Consecutive(1),
		OnStateChange: func(tr breaker.Transition) {
			seen = append(seen, tr.To)
			if len(seen) == 1 {
				panic("callback")
			}
		},
	})
	func() {
		defer func() {
			if r := recover(); r != "callback" {
				t.Errorf("recovered %v", r)
			}
		}()
		b.Do(context.Background(), fail)
	}()
	b.Reset()
	b.Trip()
	want := []breaker.State{breaker.Open, breaker.Closed, breaker.Open}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("transitions to %v, want %v", seen, want)
	}
}
