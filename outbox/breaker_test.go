package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/internal/eventually"
	"github.com/weirhq/weir/outbox"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/store"
)

// logRecorder is a slog.Handler that keeps the records it is given.
type logRecorder struct {
	mu   *sync.Mutex
	recs *[]slog.Record
}

func newLogRecorder() (*slog.Logger, logRecorder) {
	h := logRecorder{mu: &sync.Mutex{}, recs: &[]slog.Record{}}
	return slog.New(h), h
}

func (h logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.recs = append(*h.recs, r.Clone())
	return nil
}
func (h logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h logRecorder) WithGroup(string) slog.Handler      { return h }

// find returns the records at level whose message contains msg.
func (h logRecorder) find(level slog.Level, msg string) []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []slog.Record
	for _, r := range *h.recs {
		if r.Level == level && strings.Contains(r.Message, msg) {
			out = append(out, r)
		}
	}
	return out
}

// attr returns the value of r's attribute key, as a string, or "".
func attr(r slog.Record, key string) string {
	v := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}

// The messages of a publish that failed are recorded to be tried again,
// and RelayOnce says so: its error counts them and wraps the broker's.
func TestRelayOnceReportsAFailedPublish(t *testing.T) {
	refused := errors.New("connection refused")
	b := &fakeBroker{fail: func(m broker.Message) error { return refused }}
	r, s, _ := newRelay(t, b, nil)
	addInTx(t, s, t0, true, store.OutboxMessage{Topic: "t"}, store.OutboxMessage{Topic: "t"})
	n, err := r.RelayOnce(context.Background())
	var pe *outbox.PublishError
	if n != 2 || !errors.As(err, &pe) || pe.Failed != 2 || pe.Claimed != 2 || !errors.Is(err, refused) {
		t.Fatalf("RelayOnce with the broker refusing: %d, %v; want a PublishError for 2 of 2 messages wrapping %q", n, err, refused)
	}
	if !strings.Contains(err.Error(), "2 of 2") {
		t.Fatalf("error %q does not say how many messages failed", err)
	}
	// The retry was recorded.
	msgs, cerr := s.Executor().ClaimOutbox(context.Background(), store.OutboxClaimParams{Now: t0.Add(time.Hour), Limit: 10, Owner: "relay-1", LeaseFor: time.Minute})
	if cerr != nil || len(msgs) != 2 || msgs[0].Attempts != 1 || msgs[0].LastError != refused.Error() || !msgs[0].NextAttemptAt.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("the messages after the failed publish: %+v, %v; want one attempt, its error, due after the backoff", msgs, cerr)
	}
}

// connBroker is a fakeBroker that reports its connection: while down, it
// fails every publish with broker.ErrNotConnected.
type connBroker struct {
	fakeBroker
	cmu      sync.Mutex
	up       bool
	connects uint64
	declares int
	// declareFails is how many Declare calls fail before one succeeds.
	declareFails int
}

func newConnBroker() *connBroker {
	b := &connBroker{}
	b.fail = func(broker.Message) error {
		b.cmu.Lock()
		defer b.cmu.Unlock()
		if !b.up {
			return fmt.Errorf("fake: %w", broker.ErrNotConnected)
		}
		return nil
	}
	return b
}

func (b *connBroker) Connected() (bool, uint64) {
	b.cmu.Lock()
	defer b.cmu.Unlock()
	return b.up, b.connects
}

func (b *connBroker) setUp(up bool) {
	b.cmu.Lock()
	defer b.cmu.Unlock()
	if up && !b.up {
		b.connects++
	}
	b.up = up
}

func (b *connBroker) Declare(context.Context, ...string) error {
	b.cmu.Lock()
	defer b.cmu.Unlock()
	b.declares++
	if b.declares <= b.declareFails || !b.up {
		return fmt.Errorf("fake: declare: %w", broker.ErrNotConnected)
	}
	return nil
}

var _ broker.Connectivity = (*connBroker)(nil)

// The relay's breaker opens for 2 s first, then, each time a probe
// fails, for twice as long, up to 60 s; it closes on a probe that
// works. Each change is logged: opened (with the error), half-open,
// closed.
func TestRelayProbesSoonThenLessOften(t *testing.T) {
	refused := errors.New("connection refused")
	var mu sync.Mutex
	failing := true
	b := &fakeBroker{fail: func(broker.Message) error {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			return refused
		}
		return nil
	}}
	logger, logs := newLogRecorder()
	r, s, fc := newRelay(t, b, func(c *outbox.Config) {
		c.Backoff = backoff.Constant(time.Second).WithJitter(backoff.JitterNone)
		c.Logger = logger
	})
	ctx := context.Background()
	addInTx(t, s, t0, true, store.OutboxMessage{Topic: "t"})
	// The default breaker opens on the 5th failure in 30 s.
	for i := range 5 {
		if i > 0 {
			fc.Advance(time.Second)
		}
		if _, err := r.RelayOnce(ctx); !errors.Is(err, refused) {
			t.Fatalf("publish %d: %v, want the broker's error", i+1, err)
		}
	}
	holds := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute}
	for i, hold := range holds {
		_, err := r.RelayOnce(ctx)
		var open *breaker.OpenError
		if !errors.As(err, &open) || open.RetryIn != hold {
			t.Fatalf("open %d: RelayOnce %v; want the breaker open for %v", i+1, err, hold)
		}
		fc.Advance(hold - time.Millisecond)
		if _, err := r.RelayOnce(ctx); !errors.As(err, &open) || open.RetryIn != time.Millisecond {
			t.Fatalf("open %d, 1 ms before the probe: %v; want the breaker still open", i+1, err)
		}
		fc.Advance(time.Millisecond)
		if _, err := r.RelayOnce(ctx); !errors.Is(err, refused) {
			t.Fatalf("probe %d: %v; want it let through, and the broker's error", i+1, err)
		}
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	fc.Advance(time.Minute)
	if n, err := r.RelayOnce(ctx); n != 1 || err != nil {
		t.Fatalf("probe once the broker is back: %d, %v; want the message published", n, err)
	}
	if n, err := r.RelayOnce(ctx); n != 0 || err != nil {
		t.Fatalf("RelayOnce after the breaker closed: %d, %v; want nothing left and no error", n, err)
	}

	opened := logs.find(slog.LevelWarn, "breaker opened")
	if len(opened) != 1+len(holds) {
		t.Fatalf("%d 'opened' warnings, want %d", len(opened), 1+len(holds))
	}
	for i, rec := range opened {
		if got := attr(rec, "err"); got != refused.Error() {
			t.Fatalf("'opened' warning %d has err %q, want the cause %q", i+1, got, refused)
		}
	}
	if got := attr(opened[0], "probe_in"); got != "2s" {
		t.Fatalf("the first 'opened' warning says probe_in %s, want 2s", got)
	}
	if n := len(logs.find(slog.LevelInfo, "half-open")); n != 1+len(holds) {
		t.Fatalf("%d 'half-open' records, want %d", n, 1+len(holds))
	}
	if n := len(logs.find(slog.LevelInfo, "breaker closed")); n != 1 {
		t.Fatalf("%d 'closed' records, want 1", n)
	}
}

// A broker that reports its connection is probed as soon as it has
// reconnected, not a long hold later; and the messages it failed while
// not connected are due again at once, not after their backoff.
func TestRelayProbesAtOnceWhenTheBrokerReconnects(t *testing.T) {
	b := newConnBroker()
	logger, logs := newLogRecorder()
	r, s, fc := newRelay(t, b, func(c *outbox.Config) { c.Logger = logger })
	ctx := context.Background()
	addInTx(t, s, t0, true, store.OutboxMessage{Topic: "t", Key: "k"}, store.OutboxMessage{Topic: "t", Key: "k"}, store.OutboxMessage{Topic: "t"})
	for i := range 5 {
		n, err := r.RelayOnce(ctx)
		if n != 3 || !errors.Is(err, broker.ErrNotConnected) {
			t.Fatalf("publish %d while not connected: %d, %v; want the 3 messages claimed again at once, and ErrNotConnected", i+1, n, err)
		}
	}
	// Two probes fail: the next is 8 s away.
	for _, hold := range []time.Duration{2 * time.Second, 4 * time.Second} {
		fc.Advance(hold)
		if _, err := r.RelayOnce(ctx); !errors.Is(err, broker.ErrNotConnected) {
			t.Fatalf("probe after %v: %v", hold, err)
		}
	}
	fc.Advance(2 * time.Second) // the breaker's own open delay
	var open *breaker.OpenError
	if _, err := r.RelayOnce(ctx); !errors.As(err, &open) || open.RetryIn != 6*time.Second {
		t.Fatalf("before the reconnect: %v; want the probe 6 s away", err)
	}
	b.setUp(true)
	if n, err := r.RelayOnce(ctx); n != 3 || err != nil {
		t.Fatalf("once the broker reconnected: %d, %v; want the 3 messages published at once", n, err)
	}
	if len(logs.find(slog.LevelInfo, "reconnected; probing")) != 1 {
		t.Fatal("the early probe was not logged")
	}
	if got := b.ids(); len(got) != 3 {
		t.Fatalf("the broker got %v, want the 3 messages", got)
	}
}

// Run declares Config.Topics before it publishes, trying again while the
// broker is not connected.
func TestRunDeclaresTheTopicsOnceTheBrokerIsBack(t *testing.T) {
	b := newConnBroker()
	b.declareFails = 3
	b.setUp(true)
	r, s, _ := newRelay(t, b, func(c *outbox.Config) {
		c.Clock = nil
		c.PollEvery = time.Millisecond
		c.Topics = []string{"t", "u"}
	})
	addInTx(t, s, time.Now(), true, store.OutboxMessage{Topic: "t"})
	runUntilCleanup(t, r)
	eventually.True(t, "a message published after Run started", 10*time.Second, func() (bool, string) {
		return len(b.ids()) > 0, "nothing published"
	})
	b.cmu.Lock()
	defer b.cmu.Unlock()
	if b.declares != 4 {
		t.Fatalf("%d Declare calls, want 3 that failed and 1 that worked", b.declares)
	}
	if _, err := outbox.New(outbox.Config{Store: s, Broker: b, Topics: []string{"t", ""}}); err == nil || !strings.Contains(err.Error(), "Topics[1]") {
		t.Fatalf("an empty topic: %v, want an error naming Topics[1]", err)
	}
}
