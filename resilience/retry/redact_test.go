package retry_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/retry"
)

// An error that quotes what an upstream echoed back (its Authorization
// header, a URL with a password) reaches neither the policy's error
// message nor its log lines; the chain still holds the original.
func TestGivingUpShowsNoCredentials(t *testing.T) {
	const key, pw = "sk-live-8f3a9c2e71", "hunter2-db-pw"
	echoed := errors.New(`upstream 500: {"headers":{"Authorization":"Bearer ` + key + `"}} from postgres://weir:` + pw + `@db:5432/x`)
	var logs bytes.Buffer
	clk := clock.NewFake(t0)
	p := newPolicy(t, clk, retry.Config{
		MaxAttempts: 3,
		Backoff:     backoff.Constant(time.Second),
		Logger:      slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	calls := 0
	_, err := run(t, clk, p, failing(&calls, echoed))
	re := gaveUp(t, err)
	if re.Reason != retry.ReasonMaxAttempts || !errors.Is(err, echoed) {
		t.Fatalf("got %v, want max_attempts_exceeded wrapping the upstream's error", err)
	}
	for where, text := range map[string]string{"error": err.Error(), "logs": logs.String()} {
		for _, secret := range []string{key, pw} {
			if strings.Contains(text, secret) {
				t.Errorf("the %s hold %q:\n%s", where, secret, text)
			}
		}
		if !strings.Contains(text, "upstream 500") {
			t.Errorf("the %s lost the rest of the message:\n%s", where, text)
		}
	}
	if !strings.Contains(logs.String(), "retrying") || !strings.Contains(logs.String(), "retry gave up") {
		t.Fatalf("logs lack the retry and give-up lines:\n%s", logs.String())
	}
}
