package nats

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/clock"
)

func TestSafeName(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 70)
	tests := []struct {
		in, want string
		hashed   bool // want is followed by 8 hex digits of in's hash
	}{
		{in: "orders", want: "orders"},
		{in: "Orders_v2-x", want: "Orders_v2-x"},
		{in: "orders.created", want: "orders_created_", hashed: true},
		{in: "a b/c\\d", want: "a_b_c_d_", hashed: true},
		{in: long, want: long[:maxNameLen] + "_", hashed: true},
	}
	for _, tt := range tests {
		got := safeName(tt.in)
		if !tt.hashed && got != tt.want || tt.hashed && (!strings.HasPrefix(got, tt.want) || len(got) != len(tt.want)+8) {
			t.Errorf("safeName(%q) = %q, want %q (hashed %v)", tt.in, got, tt.want, tt.hashed)
		}
	}
	if safeName("a.b") == safeName("a_b") || safeName("a.b") == safeName("a-b") {
		t.Error("distinct topics share a name")
	}
}

func TestCheckTopic(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"orders", "orders.created", "weirtest.0a1b", "a-b_c.D9"} {
		if err := checkTopic(ok); err != nil {
			t.Errorf("checkTopic(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "orders.*", "orders.>", "a b", "a\tb", ".a", "a.", "a..b", "$JS.API", "a\x7fb"} {
		if err := checkTopic(bad); err == nil {
			t.Errorf("checkTopic(%q) = nil, want an error", bad)
		}
	}
}

func TestCheckHeaders(t *testing.T) {
	t.Parallel()
	for _, ok := range []map[string]string{nil, {"source": "x", "X-Trace-ID": "a b: c", "n": ""}} {
		if err := checkHeaders(0, broker.Message{ID: "1", Headers: ok}); err != nil {
			t.Errorf("checkHeaders(%v): %v", ok, err)
		}
	}
	for _, bad := range []map[string]string{
		{"": "x"}, {"Weir-Key": "x"}, {"weir-key": "x"}, {"Nats-Msg-Id": "x"}, {"nats-expected-stream": "x"},
		{"a b": "x"}, {"a:b": "x"}, {"a": "x\r\nInjected: y"}, {"a": "x\ny"},
	} {
		if err := checkHeaders(0, broker.Message{ID: "1", Headers: bad}); err == nil {
			t.Errorf("checkHeaders(%v) = nil, want an error", bad)
		}
	}
}

func TestConfigDefaultsAndErrors(t *testing.T) {
	t.Parallel()
	c, err := Config{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.URL != DefaultURL || c.StreamPrefix != DefaultStreamPrefix || c.DedupeWindow != DefaultDedupeWindow ||
		c.PublishTimeout != DefaultPublishTimeout || c.ReconnectWait != DefaultReconnectWait || c.NakDelay != DefaultNakDelay ||
		c.Replicas != 1 || c.Logger == nil {
		t.Fatalf("defaults: %+v", c)
	}
	for name, bad := range map[string]Config{
		"DedupeWindow":   {DedupeWindow: -1},
		"MaxAge":         {MaxAge: -1},
		"Replicas":       {Replicas: -1},
		"PublishTimeout": {PublishTimeout: -1},
		"ReconnectWait":  {ReconnectWait: -1},
		"NakDelay":       {NakDelay: -1},
		"StreamPrefix":   {StreamPrefix: "WEIR."},
	} {
		if _, err := bad.withDefaults(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v, want one naming the field", name, err)
		}
	}
	if _, err := (Config{MaxAge: time.Second}).withDefaults(); err == nil {
		t.Error("MaxAge shorter than the dedupe window accepted")
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	base, limit := 50*time.Millisecond, 2*time.Second
	backoff := reconnectDelay(limit)
	prev := time.Duration(0)
	for n := 1; n <= 40; n++ {
		d := backoff(n)
		if d > limit || d < base*9/10 {
			t.Fatalf("backoff(%d) = %v, want within [%v, %v]", n, d, base*9/10, limit)
		}
		if n > 1 && d < prev/2 {
			t.Fatalf("backoff(%d) = %v after %v", n, d, prev)
		}
		prev = d
	}
	if d := backoff(1000); d < limit*9/10 {
		t.Fatalf("backoff(1000) = %v, want near the limit", d)
	}
	// A limit below the first wait bounds it.
	if d := reconnectDelay(10 * time.Millisecond)(1); d > 10*time.Millisecond || d < 9*time.Millisecond {
		t.Fatalf("reconnect delay with a 10ms limit: %v", d)
	}
}

// The outcomes a Broker remembers, to keep the advisory path from
// dead-lettering a message twice, age on Config.Clock: past recentFor
// they are dropped, and the fresh ones kept.
func TestRecentOutcomesAgeOnTheClock(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Date(2026, 1, 21, 15, 0, 0, 0, time.UTC))
	cfg, err := Config{Clock: fake}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	b := &Broker{cfg: cfg, flights: map[seqKey]*flight{}, recent: map[seqKey]outcome{}}
	old := seqKey{stream: "S", consumer: "c", seq: 1}
	b.markDeadLettered(old)
	fake.Advance(recentFor + time.Minute)
	fresh := seqKey{stream: "S", consumer: "c", seq: 2}
	b.markDeadLettered(fresh)
	// The outcomes are pruned now and then: enough more to make it run.
	for seq := uint64(3); seq < 3+256; seq++ {
		b.land(seqKey{stream: "S", consumer: "c", seq: seq}, errors.New("failed"))
	}
	if b.deadLettered(old) {
		t.Fatalf("an outcome %v old on the Broker's clock is still remembered", recentFor+time.Minute)
	}
	if !b.deadLettered(fresh) {
		t.Fatal("a fresh outcome was dropped")
	}
}

// fakeFuture is a PubAckFuture whose PubAck the test sends.
type fakeFuture struct{ ok chan *jetstream.PubAck }

func newFakeFuture() *fakeFuture                   { return &fakeFuture{ok: make(chan *jetstream.PubAck, 1)} }
func (f *fakeFuture) Ok() <-chan *jetstream.PubAck { return f.ok }
func (f *fakeFuture) Err() <-chan error            { return nil }
func (f *fakeFuture) Msg() *natsgo.Msg             { return nil }

// One timer serves a Publish call's waits, yet each message gets the
// whole timeout from its own send: a timer armed for an earlier message
// that fires early is set again, and a PubAck that never comes fails its
// message at its own end and marks the context for retirement.
func TestAckWaiterTimesEachMessageFromItsSend(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const timeout = 10 * time.Second
		w := ackWaiter{timeout: timeout}
		defer w.stop()
		t0 := time.Now()
		acked, late, lost := newFakeFuture(), newFakeFuture(), newFakeFuture()
		go func() {
			time.Sleep(5 * time.Second)
			acked.ok <- &jetstream.PubAck{Stream: "S"}
			time.Sleep(10 * time.Second) // t0+15 s: after the first message's end, before the second's
			late.ok <- &jetstream.PubAck{Stream: "S"}
		}()
		if err := w.await(t.Context(), acked, "a", "S", t0); err != nil {
			t.Fatalf("PubAck at 5 s of 10: %v", err)
		}
		if err := w.await(t.Context(), late, "b", "S", t0.Add(8*time.Second)); err != nil {
			t.Fatalf("PubAck 7 s after its send: %v", err)
		}
		if got := time.Since(t0); got != 15*time.Second {
			t.Errorf("second PubAck taken at %v, want 15s", got)
		}
		if w.timedOut {
			t.Error("timedOut set with every PubAck in time")
		}
		err := w.await(t.Context(), lost, "c", "S", t0.Add(9*time.Second))
		if !errors.Is(err, jetstream.ErrAsyncPublishTimeout) {
			t.Fatalf("lost PubAck: err = %v, want ErrAsyncPublishTimeout", err)
		}
		if got := time.Since(t0); got != 19*time.Second {
			t.Errorf("lost PubAck given up at %v, want 19s (its send at 9s + 10s)", got)
		}
		if !w.timedOut {
			t.Error("timedOut not set after a lost PubAck")
		}
	})
}

// A PubAck from a stream other than the topic's is an error: another
// stream took the subject.
func TestAckWaiterRefusesAnotherStream(t *testing.T) {
	t.Parallel()
	w := ackWaiter{timeout: time.Minute}
	defer w.stop()
	f := newFakeFuture()
	f.ok <- &jetstream.PubAck{Stream: "OTHER"}
	if err := w.await(t.Context(), f, "a", "WEIR_a", time.Now()); err == nil || !strings.Contains(err.Error(), `stored by stream "OTHER"`) {
		t.Errorf("err = %v, want stored by stream \"OTHER\"", err)
	}
}
