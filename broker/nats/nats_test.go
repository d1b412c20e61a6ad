package nats

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/broker/brokertest"
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
		return openTest(t, Config{URL: url, StreamPrefix: prefix})
	}
}

func openTest(t *testing.T, cfg Config) *Broker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg.Logger = testLogger()
	b, err := Open(ctx, cfg)
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

// systemPrefix returns a stream prefix of the calling test's own, and
// deletes the streams named with it when the test ends, so that the
// machine's server does not keep every run's messages.
func systemPrefix(t *testing.T, url string) string {
	t.Helper()
	prefix := "WEIRTEST_" + strings.ToUpper(strings.TrimPrefix(brokertest.Topic(t), "weirtest.")) + "_"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b, err := Open(ctx, Config{URL: url, Logger: testLogger()})
		if err != nil {
			t.Errorf("delete the test's streams: %v", err)
			return
		}
		defer b.Close()
		names := b.js.StreamNames(ctx)
		for name := range names.Name() {
			if strings.HasPrefix(name, prefix) {
				if err := b.js.DeleteStream(ctx, name); err != nil {
					t.Errorf("delete stream %s: %v", name, err)
				}
			}
		}
		if err := names.Err(); err != nil {
			t.Errorf("list streams: %v", err)
		}
	})
	return prefix
}

// TestSystemServer runs the conformance suite against the machine's NATS
// server, which its restart case restarts.
func TestSystemServer(t *testing.T) {
	url := testenv.NATS(t)
	brokertest.Run(t, brokertest.Harness{
		Open:    opener(url, systemPrefix(t, url)),
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
	waitListening(t, systemServerAddr)
}

// waitListening polls addr until it accepts a connection.
func waitListening(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server does not accept connections at %s 30 s after its start: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestEmbedded runs the conformance suite against the server OpenEmbedded
// starts; its restart case shuts that server down and starts another on
// the same directory and port.
func TestEmbedded(t *testing.T) {
	eb := openEmbeddedTest(t)
	brokertest.Run(t, brokertest.Harness{
		Open: opener(eb.srv.url(), ""),
		Restart: func(t *testing.T) {
			if err := eb.srv.restart(); err != nil {
				t.Fatalf("restart the embedded server: %v", err)
			}
		},
	})
}

func openEmbeddedTest(t *testing.T) *Broker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eb, err := OpenEmbedded(ctx, EmbeddedConfig{Dir: t.TempDir(), Broker: Config{Logger: testLogger()}})
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
		cfg := Config{URL: url, StreamPrefix: systemPrefix(t, url)}
		testDiesEachTime(t, func(t *testing.T) *Broker { return openTest(t, cfg) })
	})
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		eb := openEmbeddedTest(t)
		testDiesEachTime(t, func(t *testing.T) *Broker { return openTest(t, Config{URL: eb.srv.url()}) })
	})
}

func testDiesEachTime(t *testing.T, open func(t *testing.T) *Broker) {
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
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(dead)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the message was not dead-lettered within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
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
	b := openTest(t, Config{URL: eb.srv.url()})
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
	other, err := Open(ctx, Config{URL: eb.srv.url(), DedupeWindow: time.Minute, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Declare(ctx, topic); err != nil {
		t.Fatal(err)
	}
	s, err := eb.js.Stream(ctx, eb.streamName(topic))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.Duplicates; got != time.Minute {
		t.Fatalf("duplicate window %v after declaring with 1m", got)
	}
}

// TestCloseEndsConsume checks that closing the Broker makes Consume
// return ErrClosed rather than retry forever.
func TestCloseEndsConsume(t *testing.T) {
	t.Parallel()
	eb := openEmbeddedTest(t)
	b := openTest(t, Config{URL: eb.srv.url()})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic := brokertest.Topic(t)
	if err := b.Declare(ctx, topic); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- b.Consume(ctx, topic, broker.ConsumeOptions{DeadLetter: func(context.Context, broker.Delivery, string, error) error { return nil }},
			func(context.Context, broker.Delivery) error { return nil })
	}()
	time.Sleep(200 * time.Millisecond)
	b.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("consume returned %v, want ErrClosed", err)
		}
	case <-ctx.Done():
		t.Fatal("consume did not return after Close")
	}
	if err := b.Publish(ctx, []broker.Message{{ID: "1", Topic: topic}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("publish after close: %v, want ErrClosed", err)
	}
}

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
	if _, err := (EmbeddedConfig{}).withDefaults(); err == nil || !strings.Contains(err.Error(), "Dir") {
		t.Errorf("EmbeddedConfig without Dir: %v, want an error naming Dir", err)
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	base, limit := 50*time.Millisecond, 2*time.Second
	prev := time.Duration(0)
	for n := 1; n <= 40; n++ {
		d := backoff(n, base, limit)
		if d > limit || d < base*9/10 {
			t.Fatalf("backoff(%d) = %v, want within [%v, %v]", n, d, base*9/10, limit)
		}
		if n > 1 && d < prev/2 {
			t.Fatalf("backoff(%d) = %v after %v", n, d, prev)
		}
		prev = d
	}
	if d := backoff(1000, base, limit); d < limit*9/10 {
		t.Fatalf("backoff(1000) = %v, want near the limit", d)
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
		testSlowLastDelivery(t, openTest(t, Config{URL: url, StreamPrefix: systemPrefix(t, url)}))
	})
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		testSlowLastDelivery(t, openEmbeddedTest(t))
	})
}

func testSlowLastDelivery(t *testing.T, b *Broker) {
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
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(reasons)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the message was not dead-lettered within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
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
