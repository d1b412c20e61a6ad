package outbox_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/outbox"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/sqlite"
)

var t0 = time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)

// fakeBroker records what it is given and fails the messages fail says.
type fakeBroker struct {
	mu   sync.Mutex
	got  []broker.Message
	fail func(broker.Message) error
}

func (b *fakeBroker) Declare(context.Context, ...string) error { return nil }
func (b *fakeBroker) Consume(context.Context, string, broker.ConsumeOptions, broker.Handler) error {
	return errors.New("not a consumer")
}
func (b *fakeBroker) Features() broker.Features { return broker.Features{Name: "fake"} }
func (b *fakeBroker) Close() error              { return nil }
func (b *fakeBroker) Publish(_ context.Context, msgs []broker.Message) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	errs := make([]error, len(msgs))
	failed := false
	for i, m := range msgs {
		if b.fail != nil {
			errs[i] = b.fail(m)
		}
		if errs[i] != nil {
			failed = true
			continue
		}
		b.got = append(b.got, m)
	}
	if failed {
		return &broker.PublishError{Errs: errs}
	}
	return nil
}

func (b *fakeBroker) ids() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, m := range b.got {
		out = append(out, m.ID)
	}
	return out
}

func newRelay(t *testing.T, b broker.Broker, mod func(*outbox.Config)) (*outbox.Relay, *sqlite.Store, *clock.Fake) {
	t.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "weir.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	fc := clock.NewFake(t0)
	cfg := outbox.Config{Store: s, Broker: b, ID: "relay-1", Clock: fc, Logger: slog.New(slog.DiscardHandler),
		Backoff: backoff.Constant(10 * time.Second).WithJitter(backoff.JitterNone)}
	if mod != nil {
		mod(&cfg)
	}
	r, err := outbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r, s, fc
}

func addInTx(t *testing.T, s *sqlite.Store, at time.Time, commit bool, msgs ...store.OutboxMessage) []int64 {
	t.Helper()
	tx, err := s.DB().BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	ids, err := outbox.Add(context.Background(), s.Tx(tx), at, msgs...)
	if err != nil {
		t.Fatal(err)
	}
	if commit {
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// A message added in a committed transaction is published with its id,
// topic, key, body and headers, and marked published; one whose
// transaction rolled back never is.
func TestRelayPublishesWhatCommitted(t *testing.T) {
	b := &fakeBroker{}
	r, s, _ := newRelay(t, b, nil)
	addInTx(t, s, t0, false, store.OutboxMessage{Topic: "grading.request", Payload: []byte("rolled back")})
	ids := addInTx(t, s, t0, true, store.OutboxMessage{Topic: "grading.request", Key: "sub-1", Payload: []byte(`{"n":1}`), Headers: map[string]string{"type": "grading.request"}})
	n, err := r.RelayOnce(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("RelayOnce: %d, %v; want the one committed message", n, err)
	}
	if len(b.got) != 1 {
		t.Fatalf("broker got %+v", b.got)
	}
	m := b.got[0]
	if m.ID != r.BrokerID(ids[0]) || m.ID != "weir-"+strconv.FormatInt(ids[0], 10) || m.Topic != "grading.request" || m.Key != "sub-1" || string(m.Body) != `{"n":1}` || m.Headers["type"] != "grading.request" {
		t.Fatalf("published %+v", m)
	}
	if n, err := r.RelayOnce(context.Background()); err != nil || n != 0 {
		t.Fatalf("second RelayOnce: %d, %v; want nothing left", n, err)
	}
}

// A failed message holds back the later messages of its key, which go out
// after it, in order, once its backoff passed; other keys go on.
func TestRelayKeepsKeyOrderAcrossAFailure(t *testing.T) {
	failOnce := map[string]bool{}
	b := &fakeBroker{}
	r, s, fc := newRelay(t, b, nil)
	ids := addInTx(t, s, t0, true,
		store.OutboxMessage{Topic: "t", Key: "A"}, store.OutboxMessage{Topic: "t", Key: "A"}, store.OutboxMessage{Topic: "t", Key: "B"},
		store.OutboxMessage{Topic: "t", Key: "A"}, store.OutboxMessage{Topic: "t"})
	a1, a2, b1, a3, free := r.BrokerID(ids[0]), r.BrokerID(ids[1]), r.BrokerID(ids[2]), r.BrokerID(ids[3]), r.BrokerID(ids[4])
	b.fail = func(m broker.Message) error {
		if m.ID == a1 && !failOnce[a1] {
			failOnce[a1] = true
			return errors.New("nack")
		}
		return nil
	}
	if _, err := r.RelayOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := b.ids(); !slices.Equal(got, []string{b1, free}) {
		t.Fatalf("first round published %v, want B's and the unkeyed one [%s %s], A's held behind the failed %s", got, b1, free, a1)
	}
	if n, err := r.RelayOnce(context.Background()); err != nil || n != 0 {
		t.Fatalf("RelayOnce before the backoff passed: %d, %v; want nothing", n, err)
	}
	fc.Advance(10 * time.Second)
	if _, err := r.RelayOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := b.ids(); !slices.Equal(got, []string{b1, free, a1, a2, a3}) {
		t.Fatalf("published %v, want A's in order after the retry", got)
	}
}

// While the broker keeps failing the breaker opens, and the relay stops
// claiming until its next probe.
func TestRelayBreakerOpens(t *testing.T) {
	b := &fakeBroker{fail: func(broker.Message) error { return errors.New("connection refused") }}
	var br *breaker.Breaker
	r, s, fc := newRelay(t, b, func(c *outbox.Config) {
		var err error
		br, err = breaker.New(breaker.Config{Name: "broker", Strategy: breaker.Consecutive(3), OpenDelay: time.Minute, Clock: c.Clock})
		if err != nil {
			t.Fatal(err)
		}
		c.Breaker = br
		c.Backoff = backoff.Constant(time.Second).WithJitter(backoff.JitterNone)
	})
	addInTx(t, s, t0, true, store.OutboxMessage{Topic: "t"})
	for range 3 {
		if _, err := r.RelayOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		fc.Advance(time.Second)
	}
	_, err := r.RelayOnce(context.Background())
	var open *breaker.OpenError
	if !errors.As(err, &open) {
		t.Fatalf("RelayOnce after 3 failures: %v, want the open breaker's error", err)
	}
	msgs, err := s.Executor().ClaimOutbox(context.Background(), store.OutboxClaimParams{Now: fc.Now(), Limit: 10, Owner: "check", LeaseFor: time.Minute})
	if err != nil || len(msgs) != 1 || msgs[0].Attempts != 3 || msgs[0].LastError != "connection refused" {
		t.Fatalf("the message after the breaker opened: %+v, %v; want 3 attempts recorded and no more", msgs, err)
	}
}

// Published messages are deleted once past the retention; pending ones
// never are.
func TestRelayCleanup(t *testing.T) {
	b := &fakeBroker{}
	r, s, fc := newRelay(t, b, func(c *outbox.Config) { c.Retention = time.Hour })
	addInTx(t, s, t0, true, store.OutboxMessage{Topic: "t"}, store.OutboxMessage{Topic: "t"})
	if _, err := r.RelayOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	addInTx(t, s, t0, true, store.OutboxMessage{Topic: "t"})
	if n, err := r.Cleanup(context.Background()); err != nil || n != 0 {
		t.Fatalf("cleanup within the retention: %d, %v", n, err)
	}
	fc.Advance(time.Hour + time.Second)
	if n, err := r.Cleanup(context.Background()); err != nil || n != 2 {
		t.Fatalf("cleanup past the retention: %d, %v; want the 2 published", n, err)
	}
	if n, err := r.RelayOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("the pending message after cleanup: %d, %v", n, err)
	}
}
