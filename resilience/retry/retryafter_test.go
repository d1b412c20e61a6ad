package retry_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/retry"
)

// A server's Retry-After longer than the backoff's cap is waited in full:
// calling again sooner is calling before the server allows.
func TestRetryAfterLongerThanTheCapIsWaitedInFull(t *testing.T) {
	clk := clock.NewFake(t0)
	p := newPolicy(t, clk, retry.Config{MaxAttempts: 2, Backoff: backoff.Exponential(time.Second, 2, 30*time.Second)})
	calls := 0
	waits, _ := run(t, clk, p, failing(&calls, retry.After(errBoom, 5*time.Minute)))
	if len(waits) != 1 || waits[0] != 5*time.Minute || calls != 2 {
		t.Fatalf("waits %v after %d calls, want one wait of the whole 5m hint", waits, calls)
	}
}

// A hint past the limit (10 minutes by default) ends the policy at once,
// with its own reason, and the error tells the hint and the limit.
func TestRetryAfterPastTheLimitGivesUpAtOnce(t *testing.T) {
	clk := clock.NewFake(t0)
	p := newPolicy(t, clk, retry.Config{})
	calls := 0
	waits, err := run(t, clk, p, failing(&calls, retry.After(errBoom, time.Hour)))
	re := gaveUp(t, err)
	if string(re.Reason) != "retry_after_exceeds_limit" || calls != 1 || len(waits) != 0 {
		t.Fatalf("reason=%s calls=%d waits=%v, want retry_after_exceeds_limit before any wait", re.Reason, calls, waits)
	}
	for _, s := range []string{"retry_after_exceeds_limit", "1h0m0s", "10m0s"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message %q lacks %q", err, s)
		}
	}
	if !errors.Is(err, errBoom) {
		t.Fatal("the error does not unwrap to the last error")
	}
}

func TestRetryAfterLimitIsConfigurable(t *testing.T) {
	clk := clock.NewFake(t0)
	p := newPolicy(t, clk, retry.Config{MaxAttempts: 2, MaxRetryAfter: 2 * time.Hour})
	calls := 0
	waits, _ := run(t, clk, p, failing(&calls, retry.After(errBoom, time.Hour)))
	if len(waits) != 1 || waits[0] != time.Hour {
		t.Fatalf("waits %v, want the whole hour under a 2h limit", waits)
	}

	p = newPolicy(t, clk, retry.Config{MaxRetryAfter: 30 * time.Second})
	calls = 0
	_, err := run(t, clk, p, failing(&calls, retry.After(errBoom, 31*time.Second)))
	re := gaveUp(t, err)
	if re.Reason != retry.ReasonRetryAfterExceedsLimit || re.RetryAfter != 31*time.Second || re.MaxRetryAfter != 30*time.Second || calls != 1 {
		t.Fatalf("got %+v after %d calls, want the hint and the limit told", re, calls)
	}
	if p.Config().MaxRetryAfter != 30*time.Second || retry.MustNew(retry.Config{}).Config().MaxRetryAfter != retry.DefaultMaxRetryAfter {
		t.Fatal("MaxRetryAfter or its default is not kept in Config()")
	}
	if _, err := retry.New(retry.Config{MaxRetryAfter: -time.Second}); err == nil || !strings.Contains(err.Error(), "MaxRetryAfter") {
		t.Fatalf("a negative MaxRetryAfter: %v, want an error naming it", err)
	}
}

// A wait that would end after the caller's context deadline ends the
// policy at once: waiting to fail helps nobody. The error matches
// context.DeadlineExceeded, as the wait's end would have.
func TestRetryAfterPastTheContextDeadlineGivesUpAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := retry.MustNew(retry.Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		calls := 0
		err := p.Do(ctx, failing(&calls, retry.After(errBoom, 30*time.Second)))
		var re *retry.Error
		if !errors.As(err, &re) || string(re.Reason) != "deadline_exceeded" || calls != 1 {
			t.Fatalf("got %v after %d calls, want deadline_exceeded after one", err, calls)
		}
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("the policy waited %v before giving up", waited)
		}
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errBoom) {
			t.Fatalf("%v does not match context.DeadlineExceeded and the last error", err)
		}
		if !strings.Contains(re.Detail, "retry-after 30s") || !strings.Contains(re.Detail, "deadline") {
			t.Fatalf("detail %q does not name the retry-after and the deadline", re.Detail)
		}
	})
}

// The same holds for a plain backoff wait.
func TestBackoffWaitPastTheContextDeadlineGivesUpAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := retry.MustNew(retry.Config{MaxAttempts: 10, Backoff: backoff.Constant(4 * time.Second)})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		calls := 0
		err := p.Do(ctx, failing(&calls, errBoom))
		var re *retry.Error
		if !errors.As(err, &re) || re.Reason != retry.ReasonDeadline || calls != 3 {
			t.Fatalf("got %v after %d calls, want deadline_exceeded after attempts at 0, 4 and 8 s", err, calls)
		}
		if waited := time.Since(start); waited != 8*time.Second {
			t.Fatalf("bubble time %v, want 8s: no wait that ends past the deadline", waited)
		}
	})
}

// A retry never starts before the retry-after hint of the error before it,
// whatever the schedule, the jitter, the TTL and the limit: either the next
// attempt starts at least the hint later, or the policy stops at once with
// the reason that forbids the wait.
func TestPropertyRetryNeverStartsBeforeTheHint(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		clk := clock.NewFake(t0)
		cfg := drawConfig(rt, 10, time.Hour, 10*time.Second, 2*time.Minute)
		us := rapid.SliceOfN(rapid.Float64Range(0, 0.999999), 10, 10).Draw(rt, "u")
		draws := 0
		cfg.Rand = func() float64 { draws++; return us[(draws-1)%len(us)] }
		limit := retry.DefaultMaxRetryAfter
		p := newPolicy(rt, clk, cfg)
		hints := rapid.SliceOfN(rapid.Int64Range(-1, int64(15*time.Minute)), 1, 10).Draw(rt, "hints")
		var starts []time.Time
		var given []time.Duration // the hint of each failed attempt; -1 for none
		_, err := run(rt, clk, p, func(context.Context) error {
			starts = append(starts, clk.Now())
			h := time.Duration(hints[min(len(starts), len(hints))-1])
			given = append(given, h)
			if h < 0 {
				return errBoom
			}
			return retry.After(errBoom, h)
		})
		for i := 1; i < len(starts); i++ {
			if h := given[i-1]; h >= 0 && starts[i].Sub(starts[i-1]) < h {
				rt.Fatalf("attempt %d started %v after attempt %d, whose error asked for %v", i+1, starts[i].Sub(starts[i-1]), i, h)
			}
			if h := given[i-1]; h > limit {
				rt.Fatalf("attempt %d followed a hint of %v, past the %v limit", i+1, h, limit)
			}
		}
		var re *retry.Error
		if !errors.As(err, &re) {
			rt.Fatalf("error %v (%T)", err, err)
		}
		last := given[len(given)-1]
		switch {
		case len(starts) == cfg.MaxAttempts:
			if re.Reason != retry.ReasonMaxAttempts {
				rt.Fatalf("at max attempts gave %s", re.Reason)
			}
		case last > limit:
			if string(re.Reason) != "retry_after_exceeds_limit" {
				rt.Fatalf("hint %v past the %v limit gave %s", last, limit, re.Reason)
			}
		case cfg.TTL > 0 && last >= 0 && clk.Now().Sub(t0)+last > cfg.TTL:
			if re.Reason != retry.ReasonTTL {
				rt.Fatalf("hint %v past the TTL gave %s", last, re.Reason)
			}
		default:
			if re.Reason != retry.ReasonTTL {
				rt.Fatalf("stopped early for %s", re.Reason)
			}
		}
	})
}
