package eventretry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/eventretry"
	"github.com/weirhq/weir/internal/envconfig"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/retry"
)

var t0 = time.Date(2026, 1, 17, 5, 0, 0, 0, time.UTC)

type docNotFound struct{ id string }

func (e *docNotFound) Error() string { return "no document " + e.id + " yet" }

// fixture is a Retrier on a fake clock that moves itself whenever the
// retrier waits, with its dead letters, logs and metrics kept.
type fixture struct {
	r     *eventretry.Retrier
	fc    *clock.Fake
	reg   *prometheus.Registry
	logs  *bytes.Buffer
	mu    sync.Mutex
	dls   []eventretry.DeadLetter
	dlErr error
}

func newFixture(t *testing.T, policy retry.Config) *fixture {
	t.Helper()
	f := &fixture{fc: clock.NewFake(t0), reg: prometheus.NewPedanticRegistry(), logs: &bytes.Buffer{}}
	m, err := eventretry.NewMetrics(f.reg)
	if err != nil {
		t.Fatal(err)
	}
	var logMu sync.Mutex
	f.r, err = eventretry.New(eventretry.Config{
		Service: "chunking", Policy: policy, Metrics: m, Clock: f.fc,
		Logger: slog.New(slog.NewTextHandler(lockedWriter{&logMu, f.logs}, nil)),
		DeadLetter: func(_ context.Context, dl eventretry.DeadLetter) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.dlErr != nil {
				return f.dlErr
			}
			f.dls = append(f.dls, dl)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			if f.fc.WaitForTimers(ctx, 1) == nil {
				f.fc.AdvanceToNextTimer()
			}
		}
	}()
	return f
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

var event = json.RawMessage(`{"message_ids":["m1","m2"]}`)

// An event whose document becomes queryable on the third attempt
// succeeds, with each retry logged and counted by its attempt.
func TestNotQueryableIsRetriedUntilItSucceeds(t *testing.T) {
	f := newFixture(t, retry.Config{})
	calls := 0
	err := f.r.Handle(context.Background(), event, "chunking-m1-m2", func(context.Context) error {
		calls++
		if calls < 3 {
			return eventretry.NotQueryable(&docNotFound{"m1"})
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("Handle: %v after %d calls, want success at the third", err, calls)
	}
	if got := counter(t, f.reg, "event_retry_success_total", map[string]string{"service": "chunking", "attempt": "3"}); got != 1 {
		t.Fatalf("event_retry_success_total{attempt=3} = %v, want 1", got)
	}
	logs := f.logs.String()
	for _, want := range []string{"retry attempt 2/8", "retry attempt 3/8", "event processed successfully after 3 attempts", "idempotency_key=chunking-m1-m2"} {
		if !strings.Contains(logs, want) {
			t.Fatalf("logs lack %q:\n%s", want, logs)
		}
	}
	if len(f.dls) != 0 {
		t.Fatalf("dead letters %v", f.dls)
	}
}

// Any error not marked NotQueryable goes to the dead-letter function at
// once, with the spec's payload.
func TestOtherErrorsAreDeadLetteredAtOnce(t *testing.T) {
	f := newFixture(t, retry.Config{})
	calls := 0
	err := f.r.Handle(context.Background(), event, "chunking-m1-m2", func(context.Context) error {
		calls++
		return errors.New("validation: message_ids is empty")
	})
	if err != nil || calls != 1 {
		t.Fatalf("Handle: %v after %d calls, want nil after one", err, calls)
	}
	if len(f.dls) != 1 {
		t.Fatalf("dead letters %v, want one", f.dls)
	}
	got, err := json.Marshal(f.dls[0])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"original_event":{"message_ids":["m1","m2"]},"idempotency_key":"chunking-m1-m2","attempt_count":1,` +
		`"last_error":"validation: message_ids is empty","error_type":"*errors.errorString","abandoned_reason":"non_retryable",` +
		`"service_name":"chunking","timestamp":"2026-01-17T05:00:00Z"}`
	if string(got) != want {
		t.Fatalf("dead letter\n%s\nwant\n%s", got, want)
	}
	if !strings.Contains(f.logs.String(), "level=ERROR") {
		t.Fatalf("no ERROR line for the dead letter:\n%s", f.logs.String())
	}
	if got := counter(t, f.reg, "event_retry_dlq_total", map[string]string{"service": "chunking", "reason": "non_retryable"}); got != 1 {
		t.Fatalf("event_retry_dlq_total{reason=non_retryable} = %v, want 1", got)
	}
}

// A document that never becomes queryable is dead-lettered when the
// attempts run out, or when the TTL would pass, whichever comes first.
func TestGivingUpOnAttemptsAndTTL(t *testing.T) {
	for _, c := range []struct {
		name     string
		policy   retry.Config
		attempts int
		reason   string
	}{
		{"attempts", retry.Config{MaxAttempts: 3, Backoff: backoff.Constant(time.Second)}, 3, "max_attempts_exceeded"},
		{"ttl", retry.Config{MaxAttempts: 10, TTL: 2500 * time.Millisecond, Backoff: backoff.Constant(time.Second).WithJitter(backoff.JitterNone)}, 3, "ttl_exceeded"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, c.policy)
			err := f.r.Handle(context.Background(), event, "k", func(context.Context) error {
				return eventretry.NotQueryable(&docNotFound{"m1"})
			})
			if err != nil || len(f.dls) != 1 {
				t.Fatalf("Handle: %v, dead letters %v", err, f.dls)
			}
			dl := f.dls[0]
			if dl.AttemptCount != c.attempts || dl.AbandonedReason != c.reason || dl.ErrorType != "*eventretry_test.docNotFound" || dl.LastError != "no document m1 yet" {
				t.Fatalf("dead letter %+v, want %d attempts, reason %s, the document's error", dl, c.attempts, c.reason)
			}
		})
	}
}

// When the dead-letter function fails the event is not acknowledged:
// Handle returns the error.
func TestAFailedDeadLetterIsReported(t *testing.T) {
	f := newFixture(t, retry.Config{})
	f.dlErr = errors.New("dead-letter store unreachable")
	err := f.r.Handle(context.Background(), event, "k", func(context.Context) error { return errors.New("bad") })
	if err == nil || !strings.Contains(err.Error(), "dead-letter store unreachable") {
		t.Fatalf("Handle: %v, want the dead-letter function's error", err)
	}
}

func TestDefaultsAndEnvironment(t *testing.T) {
	d := eventretry.Defaults()
	if d.MaxAttempts != 8 || d.TTL != 30*time.Minute || d.Backoff.Base != 250*time.Millisecond || d.Backoff.Factor != 2 ||
		d.Backoff.Cap != time.Minute || d.Backoff.Jitter != backoff.JitterFull {
		t.Fatalf("defaults %+v", d)
	}
	t.Setenv("WEIR_RETRY_MAX_ATTEMPTS", "4")
	got, err := envconfig.EventRetry(envconfig.OS)
	if err != nil || got.MaxAttempts != 4 {
		t.Fatalf("FromEnv: %+v, %v", got, err)
	}
	t.Setenv("WEIR_RETRY_MAX_ATTEMPTS", "many")
	if _, err := envconfig.EventRetry(envconfig.OS); err == nil || !strings.Contains(err.Error(), "WEIR_RETRY_MAX_ATTEMPTS") {
		t.Fatalf("FromEnv with a bad value: %v, want an error naming the variable", err)
	}
	for _, cfg := range []eventretry.Config{{DeadLetter: func(context.Context, eventretry.DeadLetter) error { return nil }}, {Service: "s"}} {
		if _, err := eventretry.New(cfg); err == nil {
			t.Fatalf("New(%+v) succeeded, want an error naming the missing field", cfg)
		}
	}
}

// counter returns the value of the counter name with the labels.
func counter(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := len(m.GetLabel()) == len(labels)
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					match = false
				}
			}
			if match {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return 0
}
