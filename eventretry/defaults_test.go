package eventretry_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/eventretry"
	"github.com/weirhq/weir/internal/envconfig"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/retry"
)

// handleNeverQueryable runs an event whose document never becomes
// queryable and returns its dead letter and the waits before each retry.
func handleNeverQueryable(t *testing.T, policy retry.Config) (eventretry.DeadLetter, []time.Duration) {
	t.Helper()
	var delays []time.Duration
	prev := policy.OnRetry
	policy.OnRetry = func(e retry.Event) {
		delays = append(delays, e.Delay)
		if prev != nil {
			prev(e)
		}
	}
	if policy.Rand == nil {
		policy.Rand = func() float64 { return 0.999 } // the longest wait the jitter allows
	}
	f := newFixture(t, policy)
	err := f.r.Handle(context.Background(), event, "k", func(context.Context) error {
		return eventretry.NotQueryable(&docNotFound{"m1"})
	})
	if err != nil || len(f.dls) != 1 {
		t.Fatalf("Handle: %v, dead letters %v", err, f.dls)
	}
	return f.dls[0], delays
}

// A Config that sets one field of its policy keeps the documented
// defaults for the others: 8 attempts, 250 ms doubling to 60 s with full
// jitter, a 30 minute TTL.
func TestPolicyFieldsLeftZeroTakeTheEventDefaults(t *testing.T) {
	t.Run("a hook", func(t *testing.T) {
		hooked := 0
		dl, delays := handleNeverQueryable(t, retry.Config{OnRetry: func(retry.Event) { hooked++ }})
		if dl.AttemptCount != 8 || dl.AbandonedReason != "max_attempts_exceeded" || hooked != 7 {
			t.Fatalf("dead letter after %d attempts (%s), hook called %d times; want 8, max_attempts_exceeded, 7",
				dl.AttemptCount, dl.AbandonedReason, hooked)
		}
		for i, d := range delays {
			// Full jitter waits at most the scheduled delay: 250 ms, 500 ms, ...
			if scheduled := 250 * time.Millisecond << i; d > scheduled || d < scheduled*99/100 {
				t.Fatalf("wait %d is %v, want just under the scheduled %v (full jitter, u=0.999)", i+1, d, scheduled)
			}
		}
	})
	t.Run("attempts", func(t *testing.T) {
		dl, delays := handleNeverQueryable(t, retry.Config{MaxAttempts: 100})
		var total time.Duration
		for _, d := range delays {
			total += d
		}
		if dl.AbandonedReason != "ttl_exceeded" || total > 30*time.Minute || total < 29*time.Minute {
			t.Fatalf("dead letter %s after %d attempts and %v of waits, want ttl_exceeded near 30m", dl.AbandonedReason, dl.AttemptCount, total)
		}
		if m := slicesMax(delays); m > time.Minute {
			t.Fatalf("a wait of %v, past the 60s cap", m)
		}
	})
	t.Run("a partial backoff", func(t *testing.T) {
		_, delays := handleNeverQueryable(t, retry.Config{Backoff: backoff.Backoff{Base: 100 * time.Millisecond}})
		if len(delays) != 7 {
			t.Fatalf("%d retries, want 7", len(delays))
		}
		for i, d := range delays {
			if scheduled := 100 * time.Millisecond << i; d > scheduled || d < scheduled*99/100 {
				t.Fatalf("wait %d is %v, want just under %v: base 100ms, ×2, full jitter", i+1, d, scheduled)
			}
		}
	})
	t.Run("a constructed backoff stands as given", func(t *testing.T) {
		dl, delays := handleNeverQueryable(t, retry.Config{Backoff: backoff.Constant(time.Second)})
		if dl.AttemptCount != 8 || len(delays) != 7 || slicesMax(delays) != time.Second || delays[0] != time.Second {
			t.Fatalf("%d attempts, waits %v; want 8 attempts 1s apart", dl.AttemptCount, delays)
		}
	})
}

func slicesMax(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// envconfig.EventRetry reads the spec's RETRY_* names as well as WEIR_RETRY_*; the
// WEIR_ name wins when both are set, and a bad value is named.
func TestFromEnvReadsTheSpecNames(t *testing.T) {
	t.Setenv("RETRY_MAX_ATTEMPTS", "5")
	t.Setenv("RETRY_TTL_MINUTES", "7")
	got, err := envconfig.EventRetry(envconfig.OS)
	if err != nil || got.MaxAttempts != 5 || got.TTL != 7*time.Minute {
		t.Fatalf("FromEnv: %d attempts, ttl %v, %v; want 5 and 7m from RETRY_*", got.MaxAttempts, got.TTL, err)
	}
	t.Setenv("WEIR_RETRY_MAX_ATTEMPTS", "3")
	if got, err := envconfig.EventRetry(envconfig.OS); err != nil || got.MaxAttempts != 3 || got.TTL != 7*time.Minute {
		t.Fatalf("FromEnv: %d attempts, ttl %v, %v; want WEIR_RETRY_MAX_ATTEMPTS's 3 and RETRY_TTL_MINUTES's 7m", got.MaxAttempts, got.TTL, err)
	}
	t.Setenv("RETRY_BACKOFF_FACTOR", "fast")
	_, err = envconfig.EventRetry(envconfig.OS)
	if err == nil || !strings.Contains(err.Error(), "RETRY_BACKOFF_FACTOR") || strings.Contains(err.Error(), "WEIR_RETRY_BACKOFF_FACTOR") {
		t.Fatalf("FromEnv with RETRY_BACKOFF_FACTOR=fast: %v, want an error naming RETRY_BACKOFF_FACTOR", err)
	}
}

// An event the caller's deadline leaves no time to retry is not
// dead-lettered: Handle returns an error matching the deadline, so the
// event is not acknowledged and comes back.
func TestCallersDeadlineDoesNotDeadLetterTheEvent(t *testing.T) {
	r, err := eventretry.New(eventretry.Config{
		Service:    "chunking",
		Policy:     retry.Config{Backoff: backoff.Constant(2 * time.Minute)},
		DeadLetter: func(context.Context, eventretry.DeadLetter) error { t.Fatal("dead-lettered"); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = r.Handle(ctx, event, "k", func(context.Context) error { return eventretry.NotQueryable(&docNotFound{"m1"}) })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Handle: %v, want an error matching context.DeadlineExceeded", err)
	}
}

// A handler's error that quotes credentials an upstream echoed reaches
// neither the dead letter nor the logs.
func TestDeadLetterAndLogsHoldNoCredentials(t *testing.T) {
	const key = "sk-live-0c4e9a7b55"
	f := newFixture(t, retry.Config{MaxAttempts: 2})
	err := f.r.Handle(context.Background(), event, "k", func(context.Context) error {
		return eventretry.NotQueryable(errors.New(`search said 404: {"headers":{"Authorization":["Bearer ` + key + `"]}}`))
	})
	if err != nil || len(f.dls) != 1 {
		t.Fatalf("Handle: %v, dead letters %v", err, f.dls)
	}
	if dl := f.dls[0]; strings.Contains(dl.LastError, key) || !strings.Contains(dl.LastError, "search said 404") {
		t.Fatalf("dead letter's last error %q: want it without the key, with the rest", dl.LastError)
	}
	if logs := f.logs.String(); strings.Contains(logs, key) || !strings.Contains(logs, "retry attempt 2/2") {
		t.Fatalf("logs hold the key or lack the retry:\n%s", logs)
	}
}
