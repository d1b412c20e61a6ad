package retry_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/budget"
	"github.com/weirhq/weir/resilience/retry"
)

// cancellingClock's timers fire at once, and cancel the caller's context as
// they are made: the wait ends with both of its channels ready.
type cancellingClock struct {
	*clock.Fake
	cancel context.CancelFunc
}

func (c cancellingClock) NewTimer(time.Duration) clock.Timer {
	c.cancel()
	return c.Fake.NewTimer(0)
}

func TestBudgetSlotReleasedWhenCancelledAsTheWaitEnds(t *testing.T) {
	b, _ := budget.New(budget.Config{})
	for range 200 {
		ctx, cancel := context.WithCancel(context.Background())
		p := newPolicy(t, cancellingClock{clock.NewFake(t0), cancel}, retry.Config{Budget: b})
		err := p.Do(ctx, func(context.Context) error { return errBoom })
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want cancelled", err)
		}
		if s := b.Snapshot(); s.Retries != 0 || s.Calls != 0 {
			t.Fatalf("budget left at %+v: a retry slot leaked", s)
		}
	}
}

func TestBudgetSlotReleasedWhenRetryPanics(t *testing.T) {
	b, _ := budget.New(budget.Config{})
	p := newPolicy(t, clock.NewFake(t0), retry.Config{Budget: b, Backoff: backoff.Constant(0)})
	calls := 0
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic did not propagate")
			}
		}()
		_ = p.Do(context.Background(), func(context.Context) error {
			calls++
			if calls == 2 {
				panic("handler bug")
			}
			return errBoom
		})
	}()
	if s := b.Snapshot(); s.Retries != 0 || s.Calls != 0 {
		t.Fatalf("budget left at %+v after a panic", s)
	}
}

func TestCancelledContextWinsOverTheErrorKind(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	retried := false
	p := newPolicy(t, clock.NewFake(t0), retry.Config{OnRetry: func(retry.Event) { retried = true }})
	err := p.Do(ctx, func(context.Context) error {
		cancel()
		return errBoom // not a context error, yet the caller has gone
	})
	var re *retry.Error
	if !errors.As(err, &re) || re.Reason != retry.ReasonCancelled || retried {
		t.Fatalf("got %v (retried=%v), want cancelled without a retry", err, retried)
	}
}

// The real clock follows testing/synctest's fake time, so a TTL holds in a
// bubble as it does in production.
func TestTTLHoldsUnderSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := retry.MustNew(retry.Config{MaxAttempts: 100, TTL: 10 * time.Second, Backoff: backoff.Constant(3 * time.Second)})
		calls := 0
		start := time.Now()
		err := p.Do(context.Background(), func(context.Context) error { calls++; return errBoom })
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonTTL || calls != 4 {
			t.Fatalf("got %v after %d calls, want ttl_exceeded after attempts at 0, 3, 6 and 9 s", err, calls)
		}
		if re.Elapsed != 9*time.Second || time.Since(start) != 9*time.Second {
			t.Fatalf("elapsed %v, bubble time %v; want 9s", re.Elapsed, time.Since(start))
		}
	})
}

// A slow OnRetry callback uses up time the wait would have had.
func TestSlowCallbackCannotPushTheWaitPastTheTTL(t *testing.T) {
	clk := clock.NewFake(t0)
	p := newPolicy(t, clk, retry.Config{
		TTL:     10 * time.Second,
		Backoff: backoff.Constant(5 * time.Second),
		OnRetry: func(retry.Event) { clk.Advance(6 * time.Second) }, // a slow metrics sink
	})
	calls := 0
	waits, err := run(t, clk, p, failing(&calls, errBoom))
	var re *retry.Error
	if !errors.As(err, &re) || re.Reason != retry.ReasonTTL || calls != 1 || len(waits) != 0 {
		t.Fatalf("got %v, calls %d, waits %v; want ttl_exceeded before waiting", err, calls, waits)
	}
	if clk.Now().Sub(t0) > 10*time.Second {
		t.Fatalf("clock moved %v, past the TTL", clk.Now().Sub(t0))
	}
}
