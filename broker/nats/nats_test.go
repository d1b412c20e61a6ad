package nats_test

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/broker/brokertest"
	"github.com/weirhq/weir/broker/nats"
	"github.com/weirhq/weir/broker/nats/natsembed"
	"github.com/weirhq/weir/broker/nats/natstest"
	"github.com/weirhq/weir/internal/eventually"
	"github.com/weirhq/weir/internal/testenv"
)

// The machine's NATS server, which the system harness restarts. These are
// the commands the machine's setup starts it with.
const (
	systemServer     = "/usr/sbin/nats-server"
	systemServerAddr = "127.0.0.1:4222"
)

var systemServerArgs = []string{"-a", "127.0.0.1", "-p", "4222", "-js", "-sd", "/var/lib/nats-server", "-l", "/var/log/nats-server.log"}

// testLogger logs warnings and errors to stderr, which go test shows when
// the package fails.
func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// opener returns a brokertest Open that connects to url, naming streams
// with prefix.
func opener(url, prefix string) func(t *testing.T) broker.Broker {
	return func(t *testing.T) broker.Broker {
		return openTest(t, nats.Config{URL: url, StreamPrefix: prefix})
	}
}

func openTest(t *testing.T, cfg nats.Config) *nats.Broker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg.Logger = testLogger()
	b, err := nats.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("open %s: %v", cfg.URL, err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return b
}

// TestSystemServer runs the conformance suite against the machine's NATS
// server, which its restart case restarts.
func TestSystemServer(t *testing.T) {
	url := testenv.NATS(t)
	brokertest.Run(t, brokertest.Harness{
		Open:    opener(url, natstest.Prefix(t, url)),
		Restart: func(t *testing.T) { restartSystemServer(t, url) },
	})
}

// restartSystemServer stops the machine's nats-server and starts it again
// as the machine's setup does, then waits until it takes connections.
func restartSystemServer(t *testing.T, rawURL string) {
	t.Helper()
	if u, err := url.Parse(rawURL); err != nil || u.Host != systemServerAddr {
		t.Fatalf("the restart case restarts the machine's nats-server at %s, not the one at %s", systemServerAddr, rawURL)
	}
	stop := exec.Command("start-stop-daemon", "--stop", "--exec", systemServer, "--retry", "10")
	if out, err := stop.CombinedOutput(); err != nil {
		t.Fatalf("stop nats-server: %v: %s", err, out)
	}
	start := exec.Command("start-stop-daemon", append([]string{"--start", "--oknodo", "--background", "--exec", systemServer, "--"}, systemServerArgs...)...)
	if out, err := start.CombinedOutput(); err != nil {
		t.Fatalf("start nats-server: %v: %s", err, out)
	}
	brokertest.WaitListening(t, systemServerAddr, 30*time.Second)
}

// TestEmbedded runs the conformance suite against the server
// natsembed.Open starts; its restart case shuts that server down and
// starts another on the same directory and port.
func TestEmbedded(t *testing.T) {
	eb := openEmbeddedTest(t)
	brokertest.Run(t, brokertest.Harness{
		Open:             opener(eb.URL(), ""),
		ServerGoroutines: "github.com/nats-io/nats-server/",
		Restart: func(t *testing.T) {
			if err := eb.Restart(); err != nil {
				t.Fatalf("restart the embedded server: %v", err)
			}
		},
	})
}

func openEmbeddedTest(t *testing.T) *natsembed.Broker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eb, err := natsembed.Open(ctx, natsembed.Config{Dir: t.TempDir(), Broker: nats.Config{Logger: testLogger()}})
	if err != nil {
		t.Fatalf("open embedded: %v", err)
	}
	t.Cleanup(func() {
		if err := eb.Close(); err != nil {
			t.Errorf("close embedded: %v", err)
		}
	})
	return eb
}

// TestMaxDeliveriesAdvisory checks the advisory path: a message whose
// consumer dies during each of its deliveries, without a handler error,
// is dead-lettered once, with its id, key and headers, reason
// max_deliveries_exceeded and no last error, and the handler never sees
// it again.
func TestMaxDeliveriesAdvisory(t *testing.T) {
	t.Run("system", func(t *testing.T) {
		url := testenv.NATS(t)
		t.Parallel()
		cfg := nats.Config{URL: url, StreamPrefix: natstest.Prefix(t, url)}
		testDiesEachTime(t, func(t *testing.T) *nats.Broker { return openTest(t, cfg) })
	})
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		eb := openEmbeddedTest(t)
		testDiesEachTime(t, func(t *testing.T) *nats.Broker { return openTest(t, nats.Config{URL: eb.URL()}) })
	})
}

func testDiesEachTime(t *testing.T, open func(t *testing.T) *nats.Broker) {
	b := open(t)
	topic := brokertest.Topic(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.Declare(ctx, topic); err != nil {
		t.Fatal(err)
	}
	msg := broker.Message{ID: topic + "-0", Topic: topic, Key: "k", Body: []byte("poison"),
		Headers: map[string]string{"X-Request-ID": "r1", "traceparent": "00-1"}}
	if err := b.Publish(ctx, []broker.Message{msg}); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var dead []broker.Delivery
	var reasons []string
	var lastErrs []error
	dl := func(_ context.Context, d broker.Delivery, reason string, lastErr error) error {
		mu.Lock()
		defer mu.Unlock()
		dead, reasons, lastErrs = append(dead, d), append(reasons, reason), append(lastErrs, lastErr)
		return nil
	}
	opts := broker.ConsumeOptions{MaxDeliveries: 2, AckWait: time.Second, DeadLetter: dl}

	// Two consumers, each on a broker of its own, die (are stopped) during
	// the message's delivery.
	for i := 1; i <= opts.MaxDeliveries; i++ {
		cb := open(t)
		cctx, stop := context.WithCancel(ctx)
		got := make(chan broker.Delivery, 1)
		done := make(chan error, 1)
		go func() {
			done <- cb.Consume(cctx, topic, opts, func(hctx context.Context, d broker.Delivery) error {
				got <- d
				<-hctx.Done()
				return hctx.Err()
			})
		}()
		select {
		case d := <-got:
			if d.Attempt != i {
				t.Fatalf("delivery %d: attempt %d", i, d.Attempt)
			}
		case <-ctx.Done():
			t.Fatalf("delivery %d did not come", i)
		}
		stop()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("consume %d returned %v, want context.Canceled", i, err)
		}
		if err := cb.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// A live member of the group receives the advisory.
	handled := make(chan broker.Delivery, 1)
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- b.Consume(cctx, topic, opts, func(_ context.Context, d broker.Delivery) error {
			handled <- d
			return nil
		})
	}()
	eventually.True(t, "the message dead-lettered", 30*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(dead) > 0, "no dead letter"
	})
	time.Sleep(2 * time.Second) // neither dead-lettered again nor delivered
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("consume returned %v, want context.Canceled", err)
	}
	select {
	case d := <-handled:
		t.Fatalf("the handler got the message again: %+v", d)
	default:
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dead) != 1 || reasons[0] != broker.ReasonMaxDeliveries || lastErrs[0] != nil {
		t.Fatalf("dead letters %+v, reasons %v, errors %v; want one, max deliveries, no error", dead, reasons, lastErrs)
	}
	d := dead[0]
	if d.ID != msg.ID || d.Topic != topic || d.Key != msg.Key || string(d.Body) != "poison" || d.Attempt != opts.MaxDeliveries ||
		len(d.Headers) != 2 || d.Headers["X-Request-ID"] != "r1" || d.Headers["traceparent"] != "00-1" {
		t.Fatalf("dead letter %+v, want %+v at attempt %d", d, msg, opts.MaxDeliveries)
	}
}

// TestPublishToUndeclaredTopic checks that a message whose topic has no
// stream is reported unconfirmed, promptly.
func TestPublishToUndeclaredTopic(t *testing.T) {
	t.Parallel()
	eb := openEmbeddedTest(t)
	b := openTest(t, nats.Config{URL: eb.URL()})
	topic := brokertest.Topic(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := b.Publish(ctx, []broker.Message{{ID: "1", Topic: topic}, {ID: "2", Topic: topic}})
	var pe *broker.PublishError
	if !errors.As(err, &pe) || len(pe.Errs) != 2 || pe.Errs[0] == nil || pe.Errs[1] == nil {
		t.Fatalf("publish to an undeclared topic: %v, want a PublishError for both messages", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("publish took the whole timeout: %v", err)
	}
}

// TestDeclareIsIdempotent checks that declaring twice, and declaring
// after the dedupe window changed, succeed.
func TestDeclareIsIdempotent(t *testing.T) {
	t.Parallel()
	eb := openEmbeddedTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	topic := brokertest.Topic(t)
	for range 2 {
		if err := eb.Declare(ctx, topic); err != nil {
			t.Fatal(err)
		}
	}
	other, err := nats.Open(ctx, nats.Config{URL: eb.URL(), DedupeWindow: time.Minute, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Declare(ctx, topic); err != nil {
		t.Fatal(err)
	}
	s, err := nats.JetStream(eb.Broker).Stream(ctx, nats.StreamName(eb.Broker, topic))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.Duplicates; got != time.Minute {
		t.Fatalf("duplicate window %v after declaring with 1m", got)
	}
}

// TestCloseEndsConsume checks that closing the Broker while a consumer
// runs (it has handled a delivery) makes Consume return ErrClosed rather
// than retry forever.
func TestCloseEndsConsume(t *testing.T) {
	t.Parallel()
	eb := openEmbeddedTest(t)
	b := openTest(t, nats.Config{URL: eb.URL()})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic := brokertest.Topic(t)
	if err := b.Declare(ctx, topic); err != nil {
		t.Fatal(err)
	}
	if err := b.Publish(ctx, []broker.Message{{ID: "0", Topic: topic}}); err != nil {
		t.Fatal(err)
	}
	// Closed once the consumer runs, not before it has begun.
	done := brokertest.Consuming(t, ctx, b, topic)
	b.Close()
	select {
	case err := <-done:
		if !errors.Is(err, nats.ErrClosed) {
			t.Fatalf("consume returned %v, want ErrClosed", err)
		}
	case <-ctx.Done():
		t.Fatal("consume did not return after Close")
	}
	if err := b.Publish(ctx, []broker.Message{{ID: "1", Topic: topic}}); !errors.Is(err, nats.ErrClosed) {
		t.Fatalf("publish after close: %v, want ErrClosed", err)
	}
}

// TestSlowLastDeliveryIsDeadLetteredOnce checks that a handler that runs
// past AckWait on the message's last delivery, while the server gives up
// on the message and sends its max-deliveries advisory, dead-letters it
// once, with the handler's error, and that the advisory path leaves it to
// the handler.
func TestSlowLastDeliveryIsDeadLetteredOnce(t *testing.T) {
	t.Run("system", func(t *testing.T) {
		url := testenv.NATS(t)
		t.Parallel()
		testSlowLastDelivery(t, openTest(t, nats.Config{URL: url, StreamPrefix: natstest.Prefix(t, url)}))
	})
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		testSlowLastDelivery(t, openEmbeddedTest(t).Broker)
	})
}

func testSlowLastDelivery(t *testing.T, b *nats.Broker) {
	topic := brokertest.Topic(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.Declare(ctx, topic); err != nil {
		t.Fatal(err)
	}
	if err := b.Publish(ctx, []broker.Message{{ID: topic + "-0", Topic: topic, Body: []byte("slow")}}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reasons []string
	var lastErrs []error
	handled := 0
	dl := func(_ context.Context, d broker.Delivery, reason string, lastErr error) error {
		mu.Lock()
		defer mu.Unlock()
		reasons, lastErrs = append(reasons, reason), append(lastErrs, lastErr)
		return nil
	}
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- b.Consume(cctx, topic, broker.ConsumeOptions{MaxDeliveries: 1, AckWait: time.Second, DeadLetter: dl},
			func(context.Context, broker.Delivery) error {
				mu.Lock()
				handled++
				mu.Unlock()
				time.Sleep(3 * time.Second) // past AckWait: the server gives up meanwhile
				return errors.New("too slow")
			})
	}()
	eventually.True(t, "the message dead-lettered", 30*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(reasons) > 0, "no dead letter"
	})
	time.Sleep(2 * time.Second) // nor dead-lettered again
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("consume returned %v, want context.Canceled", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if handled != 1 || len(reasons) != 1 || reasons[0] != broker.ReasonMaxDeliveries || lastErrs[0] == nil || lastErrs[0].Error() != "too slow" {
		t.Fatalf("handled %d times; dead letters: reasons %v, errors %v; want one run and one dead letter with the handler's error",
			handled, reasons, lastErrs)
	}
}
