package nats_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/broker/brokertest"
	"github.com/weirhq/weir/broker/nats"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/internal/faultproxy"
)

// A Broker opened with RetryFirstConnect while its server cannot be
// reached opens at once; Declare and Publish fail at once with
// ErrNotConnected until it has connected in the background, then work.
// Without RetryFirstConnect, Open fails as it did.
func TestOpenWhileTheServerIsUnreachable(t *testing.T) {
	t.Parallel()
	eb := openEmbeddedTest(t)
	proxy, url := faultproxy.ForURL(t, eb.URL())
	proxy.Cut() // connections are closed as soon as they are accepted
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if b, err := nats.Open(ctx, nats.Config{URL: url, ConnectTimeout: 2 * time.Second, Logger: testLogger()}); err == nil {
		b.Close()
		t.Fatal("Open without RetryFirstConnect connected through a cut proxy")
	}

	brokertest.ConnectsInTheBackground(t, proxy, func(t *testing.T) broker.Broker {
		return openTest(t, nats.Config{URL: url, RetryFirstConnect: true, ReconnectWait: 200 * time.Millisecond})
	})
}

// A URL nats.go cannot dial fails Open at once, RetryFirstConnect or not,
// naming the problem and not the password.
func TestOpenRefusesABadURL(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for url, want := range map[string]string{
		"http://127.0.0.1:4222":          `scheme "http"`,
		"amqp://u:secret@127.0.0.1:4222": `scheme "amqp"`,
		"nats://":                        "no host",
		"nats://u:secret@[::1":           "not a URL",
		"nats://127.0.0.1:4222,ftp://h":  `scheme "ftp"`,
	} {
		b, err := nats.Open(ctx, nats.Config{URL: url, RetryFirstConnect: true, Logger: testLogger()})
		if err == nil {
			b.Close()
			t.Errorf("Open(%q) worked", url)
			continue
		}
		if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q): %v; want an error saying %s, without the password", url, err, want)
		}
	}
	if ctx.Err() != nil {
		t.Fatal("a bad URL took the context's 5 s")
	}
}

// A consumer that cannot reach the server waits between its attempts on
// Config.Clock, 100 ms doubling (±10%), rather than on the wall clock: a
// fake clock that does not move holds it, and each move lets one more
// attempt through.
func TestConsumerWaitsItsBackoffOnTheClock(t *testing.T) {
	t.Parallel()
	proxy, url := faultproxy.ForURL(t, "nats://127.0.0.1:4222")
	proxy.Cut() // connections are closed as soon as they are accepted
	fake := clock.NewFake(time.Date(2026, 1, 21, 15, 0, 0, 0, time.UTC))
	b := openTest(t, nats.Config{URL: url, RetryFirstConnect: true, Clock: fake})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- b.Consume(cctx, brokertest.Topic(t), broker.ConsumeOptions{DeadLetter: func(context.Context, broker.Delivery, string, error) error { return nil }},
			func(context.Context, broker.Delivery) error { return nil })
	}()
	for attempt, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
		if err := fake.WaitForTimers(ctx, 1); err != nil {
			t.Fatalf("attempt %d: the consumer does not wait on the clock: %v", attempt+1, err)
		}
		if d := fake.AdvanceToNextTimer(); d < want*9/10 || d > want*11/10 {
			t.Fatalf("wait after attempt %d: %v, want %v ±10%%", attempt+1, d, want)
		}
	}
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("consume: %v, want context.Canceled", err)
	}
}
