package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/internal/eventually"
	"github.com/weirhq/weir/internal/leakcheck"
	"github.com/weirhq/weir/outbox"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/sqlite"
	"github.com/weirhq/weir/store/storetest"
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
	s := openSQLite(t, "weir.db")
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
	// The outbox role alone: no more than Add needs.
	ids, err := outbox.Add(context.Background(), struct{ store.Outbox }{s.Tx(tx)}, at, msgs...)
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
	ident, err := s.Executor().OutboxIdentity(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != brokerID(t, r, ids[0]) || m.ID != "weir-"+ident.StoreID+"-"+strconv.FormatInt(ids[0], 10) || m.Topic != "grading.request" || m.Key != "sub-1" || string(m.Body) != `{"n":1}` || m.Headers["type"] != "grading.request" {
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
	a1, a2, b1, a3, free := brokerID(t, r, ids[0]), brokerID(t, r, ids[1]), brokerID(t, r, ids[2]), brokerID(t, r, ids[3]), brokerID(t, r, ids[4])
	b.fail = func(m broker.Message) error {
		if m.ID == a1 && !failOnce[a1] {
			failOnce[a1] = true
			return errors.New("nack")
		}
		return nil
	}
	// a1 failed, and A's later ones are held behind it.
	var pe *outbox.PublishError
	if _, err := r.RelayOnce(context.Background()); !errors.As(err, &pe) || pe.Failed != 3 || pe.Claimed != 5 {
		t.Fatalf("first RelayOnce: %v; want a PublishError for 3 of 5 messages", err)
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
		var pe *outbox.PublishError
		if _, err := r.RelayOnce(context.Background()); !errors.As(err, &pe) {
			t.Fatalf("RelayOnce with the broker failing: %v, want a PublishError", err)
		}
		fc.Advance(time.Second)
	}
	_, err := r.RelayOnce(context.Background())
	var open *breaker.OpenError
	if !errors.As(err, &open) {
		t.Fatalf("RelayOnce after 3 failures: %v, want the open breaker's error", err)
	}
	msgs, err := s.Executor().ClaimOutbox(context.Background(), store.OutboxClaimParams{Now: fc.Now(), Limit: 10, Owner: "relay-1", LeaseFor: time.Minute})
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

// On SQLite one relay at a time holds the outbox: a second one waits, and
// takes over as soon as the first stops and gives the outbox back, not a
// lease later.
func TestRelayHandsOverWhenItStops(t *testing.T) {
	s := openSQLite(t, "weir.db")
	brokers := []*fakeBroker{{}, {}}
	stops := make([]context.CancelFunc, 2)
	done := make([]chan error, 2)
	for i, b := range brokers {
		r, err := outbox.New(outbox.Config{Store: s, Broker: b, ID: fmt.Sprint("relay-", i), PollEvery: 5 * time.Millisecond,
			LeaseFor: time.Hour, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		stops[i], done[i] = stop, make(chan error, 1)
		go func() { done[i] <- r.Run(ctx) }()
		t.Cleanup(func() {
			stop()
			<-done[i]
		})
	}
	published := func() int { return len(brokers[0].ids()) + len(brokers[1].ids()) }
	waitFor := func(want int) {
		t.Helper()
		eventually.True(t, fmt.Sprintf("%d messages published", want), 20*time.Second, func() (bool, string) {
			return published() >= want, fmt.Sprintf("relay-0 %d, relay-1 %d", len(brokers[0].ids()), len(brokers[1].ids()))
		})
	}
	msgs := func(n int) []store.OutboxMessage {
		out := make([]store.OutboxMessage, n)
		for i := range out {
			out[i] = store.OutboxMessage{Topic: "t", Key: fmt.Sprint("k", i%3)}
		}
		return out
	}
	addInTx(t, s, time.Now(), true, msgs(150)...)
	waitFor(150)
	holder := 0
	if len(brokers[1].ids()) > 0 {
		holder = 1
	}
	if other := len(brokers[1-holder].ids()); other != 0 {
		t.Fatalf("both relays published: relay-0 %d, relay-1 %d", len(brokers[0].ids()), len(brokers[1].ids()))
	}
	stops[holder]()
	if err := <-done[holder]; !errors.Is(err, context.Canceled) {
		t.Fatalf("relay-%d Run: %v", holder, err)
	}
	done[holder] <- nil // for the cleanup
	addInTx(t, s, time.Now(), true, msgs(150)...)
	waitFor(300)
	if got := len(brokers[1-holder].ids()); got != 150 {
		t.Fatalf("relay-%d published %d after relay-%d stopped, want 150", 1-holder, got, holder)
	}
	seen := map[string]bool{}
	for _, b := range brokers {
		for _, id := range b.ids() {
			if seen[id] {
				t.Fatalf("message %s published twice", id)
			}
			seen[id] = true
		}
	}
}

// Run keeps each key's order while batches overlap and publishes fail at
// random: a key's messages reach the broker, counting each message's
// first confirmed publish, in commit order.
func TestRunKeepsKeyOrderThroughFailures(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	var mu sync.Mutex
	b := &fakeBroker{fail: func(broker.Message) error {
		mu.Lock()
		defer mu.Unlock()
		if rng.IntN(5) == 0 {
			return errors.New("nack")
		}
		return nil
	}}
	r, s, _ := newRelay(t, b, func(c *outbox.Config) {
		c.Clock = nil
		c.Batch = 7
		c.PollEvery = time.Millisecond
		c.Backoff = backoff.Constant(time.Millisecond).WithJitter(backoff.JitterNone)
		br, err := breaker.New(breaker.Config{Name: "never opens", Strategy: breaker.Consecutive(1 << 20)})
		if err != nil {
			t.Fatal(err)
		}
		c.Breaker = br
	})
	const n = 400
	msgs := storetest.KeyedMessages(n, 6, 5)
	ids := addInTx(t, s, time.Now(), true, msgs...)
	runUntilCleanup(t, r)
	eventually.True(t, fmt.Sprintf("all %d messages published", n), 30*time.Second, func() (bool, string) {
		seen := map[string]bool{}
		for _, id := range b.ids() {
			seen[id] = true
		}
		return len(seen) == n, fmt.Sprintf("%d published", len(seen))
	})
	keyOf := map[string]string{}
	for i, id := range ids {
		keyOf[brokerID(t, r, id)] = msgs[i].Key
	}
	last := map[string]string{} // key → the last message id seen
	first := map[string]bool{}
	b.mu.Lock()
	got := slices.Clone(b.got)
	b.mu.Unlock()
	for _, m := range got {
		if first[m.ID] {
			continue // a republish
		}
		first[m.ID] = true
		k := keyOf[m.ID]
		if k == "" {
			continue
		}
		if prev, ok := last[k]; ok && idNumber(t, prev) > idNumber(t, m.ID) {
			t.Fatalf("key %s: %s published after %s", k, m.ID, prev)
		}
		last[k] = m.ID
	}
}

// brokerID is the relay's broker id for outbox message id.
func brokerID(t *testing.T, r *outbox.Relay, id int64) string {
	t.Helper()
	bid, err := r.BrokerID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return bid
}

// idNumber is the outbox id in a broker id "weir-<store id>-<id>".
func idNumber(t *testing.T, brokerID string) int {
	t.Helper()
	n, err := strconv.Atoi(brokerID[strings.LastIndexByte(brokerID, '-')+1:])
	if err != nil {
		t.Fatalf("broker id %q: %v", brokerID, err)
	}
	return n
}

// failingMarks is a store whose first fails MarkPublished calls fail.
type failingMarks struct {
	store.Store
	mu    sync.Mutex
	fails int
	calls int
}

func (f *failingMarks) Executor() store.Executor { return failingMarksExecutor{f.Store.Executor(), f} }

type failingMarksExecutor struct {
	store.Executor
	f *failingMarks
}

func (e failingMarksExecutor) MarkPublished(ctx context.Context, now time.Time, owner string, ids []int64) (int, error) {
	e.f.mu.Lock()
	e.f.calls++
	fail := e.f.fails > 0
	if fail {
		e.f.fails--
	}
	e.f.mu.Unlock()
	if fail {
		return 0, errors.New("disk I/O error")
	}
	return e.Executor.MarkPublished(ctx, now, owner, ids)
}

// When recording a publish fails, Run keeps the batch held and records it
// again after a backoff; it does not publish it again meanwhile.
func TestRunRetriesARecordWithoutPublishingAgain(t *testing.T) {
	s := openSQLite(t, "weir.db")
	fs := &failingMarks{Store: s, fails: 3}
	b := &fakeBroker{}
	r, err := outbox.New(outbox.Config{Store: fs, Broker: b, ID: "relay-1", PollEvery: time.Millisecond,
		Backoff: backoff.Constant(5 * time.Millisecond).WithJitter(backoff.JitterNone), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	addInTx(t, s, time.Now(), true, store.OutboxMessage{Topic: "t"}, store.OutboxMessage{Topic: "t"}, store.OutboxMessage{Topic: "t"})
	runUntilCleanup(t, r)
	eventually.True(t, "no message pending", 20*time.Second, func() (bool, string) {
		var pending int
		if err := s.DB().QueryRow(`SELECT count(*) FROM weir_outbox_pending`).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		return pending == 0, fmt.Sprintf("%d pending", pending)
	})
	if got := b.ids(); len(got) != 3 {
		t.Fatalf("the broker got %v: each message once, while the marks failed and were tried again", got)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.calls != 4 {
		t.Fatalf("%d MarkPublished calls, want 3 failed and 1 that worked", fs.calls)
	}
}

// runUntilCleanup runs r until the test ends.
func runUntilCleanup(t *testing.T, r *outbox.Relay) {
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		<-done
	})
}

// Run, stopped by its context, ends every goroutine it started: the
// publishing and recording stages of its pipeline included. (Not
// parallel: the goroutines of other tests would count.)
func TestRunLeavesNoGoroutinesWhenItStops(t *testing.T) {
	b := &fakeBroker{}
	r, s, _ := newRelay(t, b, func(c *outbox.Config) {
		c.Clock = nil
		c.PollEvery = time.Millisecond
	})
	before := leakcheck.Take()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	msgs := storetest.KeyedMessages(50, 4, 0)
	addInTx(t, s, time.Now(), true, msgs...)
	eventually.True(t, "all 50 messages published", 20*time.Second, func() (bool, string) {
		n := len(b.ids())
		return n == len(msgs), fmt.Sprintf("%d published", n)
	})
	stop()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return within 20 s of its context ending")
	}
	before.Check(t, 10*time.Second)
}

// New names the field that is out of range.
func TestNewNamesTheBadField(t *testing.T) {
	s := openSQLite(t, "weir.db")
	b := &fakeBroker{}
	for name, cfg := range map[string]outbox.Config{
		"Store":        {Broker: b},
		"Broker":       {Store: s},
		"Batch":        {Store: s, Broker: b, Batch: -1},
		"PollEvery":    {Store: s, Broker: b, PollEvery: -time.Second},
		"LeaseFor":     {Store: s, Broker: b, LeaseFor: -time.Second},
		"Retention":    {Store: s, Broker: b, Retention: -time.Second},
		"CleanupEvery": {Store: s, Broker: b, CleanupEvery: -time.Second},
		"Topics[1]":    {Store: s, Broker: b, Topics: []string{"t", ""}},
	} {
		if _, err := outbox.New(cfg); err == nil || !strings.Contains(err.Error(), "outbox: Config."+name) {
			t.Errorf("%s: %v, want an error naming Config.%s", name, err, name)
		}
	}
}
