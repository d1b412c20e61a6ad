package resilience_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/resilience"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/resilience/timeout"
)

var errDown = errors.New("dependency down")

// tracer is a policy that records when it is entered and left.
func tracer(name string, log *[]string) resilience.Policy {
	return resilience.PolicyFunc(func(ctx context.Context, fn func(context.Context) error) error {
		*log = append(*log, name+">")
		err := fn(ctx)
		*log = append(*log, "<"+name)
		return err
	})
}

func TestComposeFirstIsOutermost(t *testing.T) {
	var log []string
	p := resilience.Compose(tracer("a", &log), nil, tracer("b", &log), tracer("c", &log))
	if p.Len() != 3 {
		t.Fatalf("Len() = %d, want the nil policy skipped", p.Len())
	}
	err := p.Do(context.Background(), func(context.Context) error {
		log = append(log, "fn")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(log, " "), "a> b> c> fn <c <b <a"; got != want {
		t.Fatalf("order %q, want %q", got, want)
	}
}

func TestZeroPipelineRunsFunction(t *testing.T) {
	called := false
	var p resilience.Pipeline
	if err := p.Do(context.Background(), func(context.Context) error { called = true; return nil }); err != nil || !called {
		t.Fatalf("err=%v called=%v", err, called)
	}
}

func TestTypedNilPoliciesAreSkipped(t *testing.T) {
	var (
		r *retry.Policy
		b *breaker.Breaker
		o *timeout.Policy
	)
	if n := resilience.Compose(r, b, o).Len(); n != 0 {
		t.Fatalf("Len() = %d, want 0", n)
	}
}

func newBreaker(t *testing.T, clk clock.Clock) *breaker.Breaker {
	t.Helper()
	b, err := breaker.New(breaker.Config{Name: "dep", Strategy: breaker.Consecutive(3), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// doDown runs, through policies, a call to a dependency that is down, and
// returns how many times the call reached it and Do's error.
func doDown(policies ...resilience.Policy) (calls int, err error) {
	err = resilience.Do(context.Background(), func(context.Context) error {
		calls++
		return errDown
	}, policies...)
	return calls, err
}

// With the retry policy outside the breaker, the breaker sees every
// attempt, and the open circuit ends the retries at once.
func TestRetryOutsideBreakerCountsEveryAttempt(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	br := newBreaker(t, clk)
	rp := retry.MustNew(retry.Config{MaxAttempts: 10, Backoff: backoff.Constant(0), Clock: clk})
	calls, err := doDown(rp, br)
	if calls != 3 {
		t.Fatalf("%d calls reached the dependency, want 3 (the breaker opens on the third)", calls)
	}
	var re *retry.Error
	if !errors.As(err, &re) || re.Reason != retry.ReasonNonRetryable || re.Attempts != 4 {
		t.Fatalf("got %v, want non_retryable after the 4th attempt met the open breaker", err)
	}
	if !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("%v does not match breaker.ErrOpen", err)
	}
}

// With the breaker outside the retry policy, a whole retried call is one
// outcome.
func TestBreakerOutsideRetryCountsOneOutcomePerCall(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	br := newBreaker(t, clk)
	rp := retry.MustNew(retry.Config{MaxAttempts: 5, Backoff: backoff.Constant(0), Clock: clk})
	calls, err := doDown(br, rp)
	if calls != 5 || !errors.Is(err, errDown) {
		t.Fatalf("calls=%d err=%v, want all 5 attempts", calls, err)
	}
	if s := br.Snapshot(); s.State != breaker.Closed || s.Counts.ConsecutiveFailures != 1 {
		t.Fatalf("breaker %+v, want closed with one failure counted", s)
	}
}

// A per-attempt timeout inside the retry policy bounds each attempt, and
// the timed-out attempt is retried.
func TestTimeoutInsideRetryIsPerAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		to, err := timeout.New(5 * time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		rp := retry.MustNew(retry.Config{MaxAttempts: 3, Backoff: backoff.Constant(0)})
		calls := 0
		err = resilience.Do(context.Background(), func(ctx context.Context) error {
			calls++
			if calls == 1 {
				<-ctx.Done() // the first attempt hangs until its timeout
				return ctx.Err()
			}
			return nil
		}, rp, to)
		if err != nil || calls != 2 {
			t.Fatalf("err=%v calls=%d, want success on the second attempt", err, calls)
		}
	})
}

func TestDoValue(t *testing.T) {
	rp := retry.MustNew(retry.Config{Backoff: backoff.Constant(0)})
	n := 0
	v, err := resilience.DoValue(context.Background(), resilience.Compose(rp), func(context.Context) (int, error) {
		n++
		if n < 3 {
			return 0, errDown
		}
		return 42, nil
	})
	if v != 42 || err != nil {
		t.Fatalf("got %d, %v", v, err)
	}
}
