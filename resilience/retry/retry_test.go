package retry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/budget"
	"github.com/weirhq/weir/resilience/retry"
)

var t0 = time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)

var errBoom = errors.New("boom")

// tb is what the helpers need of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
}

// run calls p.Do on its own goroutine and, each time the policy starts to
// wait, moves the fake clock to the end of that wait. It returns Do's error
// and the waits in order. Nothing sleeps.
func run(t tb, clk *clock.Fake, p *retry.Policy, fn func(context.Context) error) ([]time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		errc <- p.Do(ctx, fn)
		stop()
	}()
	var waits []time.Duration
	for clk.WaitForTimers(done, 1) == nil {
		waits = append(waits, clk.AdvanceToNextTimer())
	}
	if ctx.Err() != nil {
		t.Fatal("policy did not finish within 30s of real time")
	}
	return waits, <-errc
}

func newPolicy(t tb, clk clock.Clock, cfg retry.Config) *retry.Policy {
	t.Helper()
	cfg.Clock = clk
	p, err := retry.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func failing(calls *int, err error) func(context.Context) error {
	return func(context.Context) error {
		*calls++
		return err
	}
}

func gaveUp(t *testing.T, err error) *retry.Error {
	t.Helper()
	var re *retry.Error
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T) is not a *retry.Error", err, err)
	}
	if !errors.Is(err, retry.ErrGaveUp) {
		t.Fatalf("error %v does not match ErrGaveUp", err)
	}
	return re
}

func TestSucceedsFirstTime(t *testing.T) {
	clk := clock.NewFake(t0)
	p := newPolicy(t, clk, retry.Config{})
	calls := 0
	waits, err := run(t, clk, p, failing(&calls, nil))
	if err != nil || calls != 1 || len(waits) != 0 {
		t.Fatalf("err=%v calls=%d waits=%v, want nil, 1, none", err, calls, waits)
	}
}

func TestSucceedsAfterFailures(t *testing.T) {
	clk := clock.NewFake(t0)
	p := newPolicy(t, clk, retry.Config{Backoff: backoff.Exponential(time.Second, 2, time.Minute).WithJitter(backoff.JitterNone)})
	calls := 0
	waits, err := run(t, clk, p, func(context.Context) error {
		calls++
		if calls < 4 {
			return errBoom
		}
		return nil
	})
	if err != nil || calls != 4 {
		t.Fatalf("err=%v calls=%d, want nil after 4", err, calls)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}
	if fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
}

func TestMaxAttemptsExceeded(t *testing.T) {
	clk := clock.NewFake(t0)
	p := newPolicy(t, clk, retry.Config{Backoff: backoff.Backoff{Jitter: backoff.JitterNone}})
	calls := 0
	waits, err := run(t, clk, p, failing(&calls, errBoom))
	re := gaveUp(t, err)
	if re.Reason != retry.ReasonMaxAttempts || re.Attempts != 6 || calls != 6 {
		t.Fatalf("reason=%s attempts=%d calls=%d, want max_attempts_exceeded after the default 6", re.Reason, re.Attempts, calls)
	}
	if !errors.Is(err, errBoom) || errors.Unwrap(err) != errBoom {
		t.Fatalf("error does not unwrap to the last error: %v", err)
	}
	// Spec 01 defaults: 1 s base doubling, five retries.
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}
	if fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
	if re.Elapsed != 31*time.Second {
		t.Fatalf("elapsed %v, want 31s", re.Elapsed)
	}
	for _, s := range []string{"6 attempts", "31s", "max_attempts_exceeded", "boom"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message %q lacks %q", err, s)
		}
	}
}

func TestPermanentStopsAtOnce(t *testing.T) {
	clk := clock.NewFake(t0)
	p := newPolicy(t, clk, retry.Config{})
	calls := 0
	waits, err := run(t, clk, p, failing(&calls, fmt.Errorf("validate: %w", retry.Permanent(errBoom))))
	re := gaveUp(t, err)
	if re.Reason != retry.ReasonNonRetryable || calls != 1 || len(waits) != 0 {
		t.Fatalf("reason=%s calls=%d waits=%v", re.Reason, calls, waits)
	}
	if !errors.Is(err, errBoom) || !retry.IsPermanent(err) {
		t.Fatal("the permanent error is lost in the chain")
	}
	if retry.Permanent(nil) != nil {
		t.Fatal("Permanent(nil) is not nil")
	}
}

type permanentByMethod struct{}

func (permanentByMethod) Error() string   { return "bad request" }
func (permanentByMethod) Permanent() bool { return true }

func TestCustomClassifier(t *testing.T) {
	clk := clock.NewFake(t0)
	errNotYet := errors.New("not found yet")
	p := newPolicy(t, clk, retry.Config{
		Retryable: func(err error) bool { return errors.Is(err, errNotYet) },
	})
	calls := 0
	_, err := run(t, clk, p, failing(&calls, errBoom))
	if re := gaveUp(t, err); re.Reason != retry.ReasonNonRetryable || calls != 1 {
		t.Fatalf("reason %s after %d calls", re.Reason, calls)
	}
	if !retry.IsPermanent(permanentByMethod{}) {
		t.Fatal("an error with Permanent() true is not permanent")
	}
}

func TestTTLNeverSleepsPastIt(t *testing.T) {
	clk := clock.NewFake(t0)
	p := newPolicy(t, clk, retry.Config{MaxAttempts: 100, TTL: 25 * time.Second, Backoff: backoff.Constant(10 * time.Second)})
	calls := 0
	waits, err := run(t, clk, p, failing(&calls, errBoom))
	re := gaveUp(t, err)
	// Attempts at 0 s, 10 s and 20 s; the next wait would end at 30 s.
	if re.Reason != retry.ReasonTTL || calls != 3 || len(waits) != 2 {
		t.Fatalf("reason=%s calls=%d waits=%v", re.Reason, calls, waits)
	}
	if re.Elapsed != 20*time.Second || clk.Now().Sub(t0) != 20*time.Second {
		t.Fatalf("elapsed %v, clock moved %v; want 20s", re.Elapsed, clk.Now().Sub(t0))
	}
	if !strings.Contains(re.Detail, "5s left") {
		t.Fatalf("detail %q does not say how much was left", re.Detail)
	}
}

func TestTTLBoundaryWaitEndingExactlyAtTTLIsAllowed(t *testing.T) {
	clk := clock.NewFake(t0)
	p := newPolicy(t, clk, retry.Config{MaxAttempts: 100, TTL: 20 * time.Second, Backoff: backoff.Constant(10 * time.Second)})
	calls := 0
	waits, err := run(t, clk, p, failing(&calls, errBoom))
	if re := gaveUp(t, err); re.Reason != retry.ReasonTTL || calls != 3 || len(waits) != 2 {
		t.Fatalf("reason=%s calls=%d waits=%v, want the attempt at exactly 20s", re.Reason, calls, waits)
	}
}

func TestTTLCountsTimeSpentInAttempts(t *testing.T) {
	clk := clock.NewFake(t0)
	p := newPolicy(t, clk, retry.Config{TTL: time.Minute, Backoff: backoff.Constant(time.Second)})
	calls := 0
	_, err := run(t, clk, p, func(context.Context) error {
		calls++
		clk.Advance(40 * time.Second) // a slow attempt
		return errBoom
	})
	if re := gaveUp(t, err); re.Reason != retry.ReasonTTL || calls != 2 {
		t.Fatalf("reason=%s calls=%d", re.Reason, calls)
	}
}

func TestRetryAfterIsAFloorJitterNeverUndercuts(t *testing.T) {
	clk := clock.NewFake(t0)
	p := newPolicy(t, clk, retry.Config{
		MaxAttempts: 2,
		Backoff:     backoff.Exponential(time.Second, 2, time.Minute).WithJitter(backoff.JitterFull),
		Rand:        func() float64 { return 0 }, // the jitter draws the shortest wait
	})
	calls := 0
	waits, _ := run(t, clk, p, failing(&calls, retry.After(errBoom, 7*time.Second)))
	if len(waits) != 1 || waits[0] != 7*time.Second {
		t.Fatalf("waits %v, want [7s]", waits)
	}
}

func TestRetryAfterBelowBackoffKeepsBackoff(t *testing.T) {
	clk := clock.NewFake(t0)
	p := newPolicy(t, clk, retry.Config{MaxAttempts: 2, Backoff: backoff.Constant(10 * time.Second)})
	calls := 0
	waits, _ := run(t, clk, p, failing(&calls, retry.After(errBoom, time.Second)))
	if len(waits) != 1 || waits[0] != 10*time.Second {
		t.Fatalf("waits %v, want [10s]", waits)
	}
}

func TestRetryAfterPastTTLStopsAndSaysSo(t *testing.T) {
	clk := clock.NewFake(t0)
	p := newPolicy(t, clk, retry.Config{TTL: 10 * time.Second})
	calls := 0
	waits, err := run(t, clk, p, failing(&calls, retry.After(errBoom, 30*time.Second)))
	re := gaveUp(t, err)
	if re.Reason != retry.ReasonTTL || calls != 1 || len(waits) != 0 {
		t.Fatalf("reason=%s calls=%d waits=%v", re.Reason, calls, waits)
	}
	if !strings.Contains(re.Detail, "retry-after 30s") {
		t.Fatalf("detail %q does not name the retry-after", re.Detail)
	}
	if d, ok := retry.AfterHint(err); !ok || d != 30*time.Second {
		t.Fatalf("the hint is lost in the chain: %v %v", d, ok)
	}
}

func TestCancelEndsWaitAtOnce(t *testing.T) {
	clk := clock.NewFake(t0)
	p := newPolicy(t, clk, retry.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- p.Do(ctx, func(context.Context) error { return errBoom }) }()
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	if err := clk.WaitForTimers(wctx, 1); err != nil {
		t.Fatal(err)
	}
	cancel() // the clock never moves: only cancellation can end the wait
	err := <-errc
	re := gaveUp(t, err)
	if re.Reason != retry.ReasonCancelled || re.Attempts != 1 {
		t.Fatalf("reason=%s attempts=%d", re.Reason, re.Attempts)
	}
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errBoom) {
		t.Fatalf("%v should match both context.Canceled and the last error", err)
	}
	if clk.Timers() != 0 {
		t.Fatal("the wait's timer was not stopped")
	}
}

func TestCancelledBeforeFirstAttempt(t *testing.T) {
	p := newPolicy(t, clock.NewFake(t0), retry.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := 0
	err := p.Do(ctx, failing(&calls, nil))
	if re := gaveUp(t, err); re.Reason != retry.ReasonCancelled || re.Attempts != 0 || calls != 0 {
		t.Fatalf("reason=%s attempts=%d calls=%d", re.Reason, re.Attempts, calls)
	}
}

func TestCallerCancellationInsideAttemptIsNotRetried(t *testing.T) {
	p := newPolicy(t, clock.NewFake(t0), retry.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := p.Do(ctx, func(ctx context.Context) error {
		calls++
		cancel()
		return fmt.Errorf("query: %w", ctx.Err())
	})
	if re := gaveUp(t, err); re.Reason != retry.ReasonCancelled || calls != 1 {
		t.Fatalf("reason=%s calls=%d", re.Reason, calls)
	}
}

func TestBudgetExhausted(t *testing.T) {
	b, err := budget.New(budget.Config{Ratio: 0.5, MinRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(t0)
	p := newPolicy(t, clk, retry.Config{Budget: b})
	calls := 0
	// One call in flight: half of one is no whole retry, and there is no floor.
	_, err = run(t, clk, p, failing(&calls, errBoom))
	if re := gaveUp(t, err); re.Reason != retry.ReasonBudgetExhausted || calls != 1 {
		t.Fatalf("reason=%s calls=%d", re.Reason, calls)
	}
	if s := b.Snapshot(); s.Calls != 0 || s.Retries != 0 || s.Refused != 1 {
		t.Fatalf("budget left at %+v", s)
	}
}

func TestBudgetReleasedAfterRetries(t *testing.T) {
	b, _ := budget.New(budget.Config{})
	clk := clock.NewFake(t0)
	p := newPolicy(t, clk, retry.Config{Budget: b, MaxAttempts: 4})
	calls := 0
	_, err := run(t, clk, p, failing(&calls, errBoom))
	if re := gaveUp(t, err); re.Reason != retry.ReasonMaxAttempts {
		t.Fatalf("reason %s", re.Reason)
	}
	if s := b.Snapshot(); s.Calls != 0 || s.Retries != 0 || s.Admitted != 3 {
		t.Fatalf("budget left at %+v", s)
	}
}

func TestOnRetryEvents(t *testing.T) {
	clk := clock.NewFake(t0)
	var events []retry.Event
	p := newPolicy(t, clk, retry.Config{
		MaxAttempts: 3,
		Backoff:     backoff.Constant(time.Second),
		OnRetry:     func(e retry.Event) { events = append(events, e) },
	})
	calls := 0
	run(t, clk, p, failing(&calls, errBoom))
	if len(events) != 2 {
		t.Fatalf("%d events, want 2", len(events))
	}
	for i, e := range events {
		if e.Attempt != i+1 || e.Err != errBoom || e.Delay != time.Second || e.Elapsed != time.Duration(i)*time.Second {
			t.Errorf("event %d = %+v", i, e)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name string
		cfg  retry.Config
		want string
	}{
		{"negative attempts", retry.Config{MaxAttempts: -1}, "max attempts"},
		{"negative ttl", retry.Config{TTL: -time.Second}, "ttl"},
		{"bad backoff", retry.Config{Backoff: backoff.Backoff{Factor: 0.1}}, "factor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := retry.New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New() = %v, want an error naming %q", err, tt.want)
			}
		})
	}
}

func TestSuccessPathDoesNotAllocate(t *testing.T) {
	p := retry.MustNew(retry.Config{})
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	if n := testing.AllocsPerRun(1000, func() { _ = p.Do(ctx, fn) }); n != 0 {
		t.Fatalf("success path allocates %v times per call", n)
	}
}

// drawConfig draws a policy's configuration: up to maxAttempts attempts,
// a TTL up to maxTTL (0: none), and a backoff of any jitter whose base and
// cap are up to maxBase and maxCap.
func drawConfig(rt *rapid.T, maxAttempts int, maxTTL, maxBase, maxCap time.Duration) retry.Config {
	return retry.Config{
		MaxAttempts: rapid.IntRange(1, maxAttempts).Draw(rt, "maxAttempts"),
		TTL:         time.Duration(rapid.Int64Range(0, int64(maxTTL)).Draw(rt, "ttl")),
		Backoff: backoff.Backoff{
			Base:   time.Duration(rapid.Int64Range(1, int64(maxBase)).Draw(rt, "base")),
			Factor: rapid.Float64Range(1, 4).Draw(rt, "factor"),
			Cap:    time.Duration(rapid.Int64Range(1, int64(maxCap)).Draw(rt, "cap")),
			Jitter: backoff.JitterMode(rapid.IntRange(0, 5).Draw(rt, "jitter")),
		},
	}
}

// The policy's promises hold for any schedule, TTL and failure pattern:
// it never runs more than MaxAttempts times, never lets the clock pass the
// TTL while waiting, and gives up for the reason that matches what happened.
func TestPropertyPolicyBounds(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		clk := clock.NewFake(t0)
		cfg := drawConfig(rt, 12, 10*time.Minute, time.Minute, 5*time.Minute)
		cfg.Rand = func() float64 { return 0.999 }
		var retried []time.Duration
		cfg.OnRetry = func(e retry.Event) { retried = append(retried, e.Delay) }
		p := newPolicy(rt, clk, cfg)
		outcomes := rapid.SliceOfN(rapid.SampledFrom([]string{"fail", "hint", "permanent", "ok"}), 1, 15).Draw(rt, "outcomes")
		hint := time.Duration(rapid.Int64Range(0, int64(10*time.Minute)).Draw(rt, "hint"))
		calls := 0
		waits, err := run(rt, clk, p, func(context.Context) error {
			o := "fail"
			if calls < len(outcomes) {
				o = outcomes[calls]
			}
			calls++
			switch o {
			case "hint":
				return retry.After(errBoom, hint)
			case "permanent":
				return retry.Permanent(errBoom)
			case "ok":
				return nil
			}
			return errBoom
		})
		if calls > cfg.MaxAttempts {
			rt.Fatalf("%d calls, max %d", calls, cfg.MaxAttempts)
		}
		if len(retried) != calls-1 {
			rt.Fatalf("%d retries for %d calls", len(retried), calls)
		}
		var waited, planned time.Duration
		for _, w := range waits {
			waited += w
		}
		for _, d := range retried {
			planned += d
		}
		elapsed := clk.Now().Sub(t0)
		if waited != planned || elapsed != waited {
			rt.Fatalf("waited %v, planned %v, clock moved %v", waited, planned, elapsed)
		}
		if cfg.TTL > 0 && elapsed > cfg.TTL {
			rt.Fatalf("clock moved %v, past the %v TTL", elapsed, cfg.TTL)
		}
		// A wait passes the cap only to honour a retry-after hint.
		capd := p.Config().Backoff.Cap
		for _, w := range waits {
			if w > max(capd, hint) {
				rt.Fatalf("waited %v, more than the %v cap and the %v hint", w, capd, hint)
			}
		}
		last := outcomes[min(calls, len(outcomes))-1]
		if calls > len(outcomes) {
			last = "fail"
		}
		if err == nil {
			if last != "ok" {
				rt.Fatalf("nil error after a %q outcome", last)
			}
			return
		}
		var re *retry.Error
		if !errors.As(err, &re) {
			rt.Fatalf("error %T", err)
		}
		if re.Attempts != calls || re.Elapsed != elapsed {
			rt.Fatalf("error says %d attempts in %v; saw %d calls in %v", re.Attempts, re.Elapsed, calls, elapsed)
		}
		switch {
		case last == "permanent":
			if re.Reason != retry.ReasonNonRetryable {
				rt.Fatalf("permanent error gave %s", re.Reason)
			}
		case calls == cfg.MaxAttempts:
			if re.Reason != retry.ReasonMaxAttempts {
				rt.Fatalf("at max attempts gave %s", re.Reason)
			}
		default:
			if re.Reason != retry.ReasonTTL {
				rt.Fatalf("stopped early for %s", re.Reason)
			}
		}
	})
}

func TestConcurrentUse(t *testing.T) {
	p := retry.MustNew(retry.Config{Backoff: backoff.Constant(0), MaxAttempts: 3})
	var total atomic.Int64
	errc := make(chan error, 16)
	for range 16 {
		go func() {
			var err error
			for range 100 {
				n := 0
				err = p.Do(context.Background(), func(context.Context) error {
					total.Add(1)
					n++
					if n < 3 {
						return errBoom
					}
					return nil
				})
				if err != nil {
					break
				}
			}
			errc <- err
		}()
	}
	for range 16 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if total.Load() != 16*100*3 {
		t.Fatalf("%d calls, want %d", total.Load(), 16*100*3)
	}
}

// A retry-after hint is a floor the jitter never undercuts, even past the
// backoff's cap, whatever the jitter draws.
func TestPropertyRetryAfterIsAFloor(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		b := backoff.Backoff{
			Base:   time.Duration(rapid.Int64Range(1, int64(time.Minute)).Draw(rt, "base")),
			Cap:    time.Duration(rapid.Int64Range(1, int64(10*time.Minute)).Draw(rt, "cap")),
			Jitter: backoff.JitterMode(rapid.IntRange(0, 5).Draw(rt, "jitter")),
		}
		u := rapid.Float64Range(0, 0.999999).Draw(rt, "u")
		hint := time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(rt, "hint"))
		var delays []time.Duration
		p := newPolicy(rt, clock.NewFake(t0), retry.Config{
			MaxAttempts:   2,
			Backoff:       b,
			Rand:          func() float64 { return u },
			OnRetry:       func(e retry.Event) { delays = append(delays, e.Delay) },
			MaxRetryAfter: 2 * time.Hour,
		})
		clk := p.Config().Clock.(*clock.Fake)
		calls := 0
		run(rt, clk, p, failing(&calls, retry.After(errBoom, hint)))
		capd := p.Config().Backoff.Cap
		if len(delays) != 1 {
			rt.Fatalf("%d retries, want 1", len(delays))
		}
		if d := delays[0]; d < hint || d > max(hint, capd) {
			rt.Fatalf("delay %v for hint %v and cap %v: outside [hint, max(hint, cap)]", d, hint, capd)
		}
	})
}
