package outbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/broker/nats"
	"github.com/weirhq/weir/internal/eventually"
	"github.com/weirhq/weir/internal/faultproxy"
	"github.com/weirhq/weir/outbox"
)

// The relay publishes to a NATS server through a proxy that is cut for a
// few seconds, long enough for its breaker to open, with messages added
// meanwhile: once the server is reachable again, the backlog is
// delivered within seconds, not after a 60 s breaker.
func TestBacklogDrainsSoonAfterABrokerOutage(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic = "outage"
	eb := openEmbedded(ctx, t, topic)
	proxy, via := faultproxy.ForURL(t, eb.URL())
	rb, err := nats.Open(ctx, nats.Config{URL: via, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rb.Close() })

	var mu sync.Mutex
	got := map[string]bool{}
	cctx, stop := context.WithCancel(ctx)
	consumed := make(chan error, 1)
	go func() {
		consumed <- eb.Consume(cctx, topic, broker.ConsumeOptions{DeadLetter: func(context.Context, broker.Delivery, string, error) error { return nil }},
			func(_ context.Context, d broker.Delivery) error {
				mu.Lock()
				got[d.ID] = true
				mu.Unlock()
				return nil
			})
	}()
	t.Cleanup(func() {
		stop()
		<-consumed
	})
	delivered := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}
	waitDelivered := func(want int, within time.Duration) time.Duration {
		t.Helper()
		begin := time.Now()
		eventually.True(t, fmt.Sprintf("%d messages delivered after the broker came back", want), within, func() (bool, string) {
			n := delivered()
			return n >= want, fmt.Sprintf("%d delivered", n)
		})
		return time.Since(begin)
	}

	logger, logs := newLogRecorder()
	s := openSQLite(t, "weir.db")
	relay, err := outbox.New(outbox.Config{Store: s, Broker: rb, ID: "relay", Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, relay)
	// Unkeyed messages, so that the drain after the outage is a few
	// pipelined publishes and what the test times is how soon the relay
	// publishes again.
	add := func(n int, name string) { addNumbered(t, ctx, s, topic, name, n) }
	add(100, "before")
	waitDelivered(100, 30*time.Second)

	proxy.Cut()
	for i := range 5 {
		add(40, fmt.Sprint("during-", i))
	}
	eventually.True(t, "the relay's breaker opened after the outage", 30*time.Second, func() (bool, string) {
		return len(logs.find(slog.LevelWarn, "breaker opened")) > 0, "not logged"
	})
	time.Sleep(3 * time.Second) // the outage goes on: a probe fails meanwhile
	proxy.Restore()
	took := waitDelivered(300, 15*time.Second)
	t.Logf("the backlog of %d messages was delivered %v after the broker came back", 200, took.Round(time.Millisecond))
	if took > 10*time.Second {
		t.Fatalf("the backlog took %v to drain after the broker came back; want a few seconds", took)
	}
	if len(logs.find(slog.LevelInfo, "breaker closed")) == 0 {
		t.Fatal("the breaker's closing was not logged")
	}
}
