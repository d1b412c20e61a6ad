package rabbitmq_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/broker/brokertest"
	"github.com/weirhq/weir/broker/rabbitmq"
	"github.com/weirhq/weir/broker/rabbitmq/rabbitmqtest"
	"github.com/weirhq/weir/internal/testenv"
	"github.com/weirhq/weir/resilience/backoff"
)

// restartMessagesEnv overrides how many messages the restart case
// publishes.
const restartMessagesEnv = "WEIR_BROKER_RESTART_MESSAGES"

func TestConformance(t *testing.T) {
	rawURL := testenv.RabbitMQ(t)
	n := 0 // the suite's default, 10,000
	if v := os.Getenv(restartMessagesEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 0 {
			t.Fatalf("%s=%q is not a count of messages", restartMessagesEnv, v)
		}
	}
	brokertest.Run(t, brokertest.Harness{
		Open:            func(t *testing.T) broker.Broker { return open(t, rawURL, rabbitmq.Config{}) },
		Restart:         func(t *testing.T) { restart(t, rawURL) },
		RestartMessages: n,
	})
}

// TestPublishDuringAnOutageFailsWithinItsContext stops RabbitMQ, so it is
// not parallel: Go runs it alone, before the parallel tests.
func TestPublishDuringAnOutageFailsWithinItsContext(t *testing.T) {
	rawURL := testenv.RabbitMQ(t)
	needRabbitmqctl(t, rawURL)
	b := open(t, rawURL, rabbitmq.Config{})
	topic := brokertest.Topic(t)
	if err := b.Declare(context.Background(), topic); err != nil {
		t.Fatal(err)
	}
	if out, err := rabbitmqctl("stop_app"); err != nil {
		t.Fatalf("rabbitmqctl stop_app: %v: %s", err, out)
	}
	started := false
	t.Cleanup(func() {
		if !started {
			restart(t, rawURL)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	begin := time.Now()
	err := b.Publish(ctx, []broker.Message{{ID: "a", Topic: topic}, {ID: "b", Topic: topic}})
	took := time.Since(begin)
	var pe *broker.PublishError
	// Each error is the context's deadline, or, if the connection's loss
	// had not been noticed yet, the closed channel's.
	if !errors.As(err, &pe) || len(pe.Errs) != 2 || pe.Errs[0] == nil || pe.Errs[1] == nil {
		t.Fatalf("publish during the outage: %v, want a PublishError with an error for each message", err)
	}
	if took > 5*time.Second {
		t.Fatalf("publish during the outage took %v with a 2 s context", took)
	}

	if out, err := rabbitmqctl("start_app"); err != nil {
		t.Fatalf("rabbitmqctl start_app: %v: %s", err, out)
	}
	started = true
	if out, err := rabbitmqctl("await_startup", "--timeout", "120"); err != nil {
		t.Fatalf("rabbitmqctl await_startup: %v: %s", err, out)
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.Publish(ctx, []broker.Message{{ID: "a", Topic: topic}}); err != nil {
		t.Fatalf("publish once RabbitMQ is back: %v", err)
	}
}

// tracked records the topics it declared, so that the test deletes their
// queues when it ends.
type tracked struct {
	*rabbitmq.Broker
	mu     sync.Mutex
	topics []string
}

func (b *tracked) Declare(ctx context.Context, topics ...string) error {
	b.mu.Lock()
	b.topics = append(b.topics, topics...)
	b.mu.Unlock()
	return b.Broker.Declare(ctx, topics...)
}

// open opens a broker for t, closed and its declared queues deleted when t
// ends. cfg.URL and cfg.Logger are set for the test.
func open(t *testing.T, rawURL string, cfg rabbitmq.Config) *tracked {
	t.Helper()
	cfg.URL = rawURL
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	if cfg.Reconnect == (backoff.Backoff{}) {
		// Quicker than the default after the restart case's restarts.
		cfg.Reconnect = backoff.Exponential(50*time.Millisecond, 2, time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := rabbitmq.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tb := &tracked{Broker: b}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		tb.mu.Lock()
		defer tb.mu.Unlock()
		rabbitmqtest.DeleteQueues(t, rawURL, tb.topics...)
	})
	return tb
}

// restart restarts the RabbitMQ application, keeping its data, and waits
// until it accepts connections again. It needs rabbitmqctl, so a server on
// this machine that the test may control (here: the test runs as root).
func restart(t *testing.T, rawURL string) {
	t.Helper()
	needRabbitmqctl(t, rawURL)
	start := time.Now()
	if out, err := rabbitmqctl("stop_app"); err != nil {
		// The node itself may be down: start it.
		t.Logf("rabbitmqctl stop_app: %v: %s; starting the node with rabbitmq-server -detached", err, out)
		if out, err := exec.Command("rabbitmq-server", "-detached").CombinedOutput(); err != nil {
			t.Fatalf("rabbitmq-server -detached: %v: %s", err, out)
		}
	} else if out, err := rabbitmqctl("start_app"); err != nil {
		t.Fatalf("rabbitmqctl start_app: %v: %s", err, out)
	}
	if out, err := rabbitmqctl("await_startup", "--timeout", "120"); err != nil {
		t.Fatalf("rabbitmqctl await_startup: %v: %s", err, out)
	}
	brokertest.WaitListening(t, hostPort(t, rawURL), time.Minute)
	t.Logf("RabbitMQ restarted in %v", time.Since(start).Round(time.Millisecond))
}

// needRabbitmqctl skips the test loudly, or fails it under
// WEIR_REQUIRE_SERVICES, when rabbitmqctl is not there to stop the server.
func needRabbitmqctl(t *testing.T, rawURL string) {
	t.Helper()
	if _, err := exec.LookPath("rabbitmqctl"); err == nil {
		return
	}
	msg := "this test needs rabbitmqctl in PATH, to stop and start the RabbitMQ at " + hostPort(t, rawURL)
	if os.Getenv(testenv.RequireEnv) != "" {
		t.Fatal(msg)
	}
	t.Skip("SKIPPING: " + msg + "; set " + testenv.RequireEnv + "=1 to make this a failure")
}

func rabbitmqctl(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return exec.CommandContext(ctx, "rabbitmqctl", args...).CombinedOutput()
}

func hostPort(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	if port == "" {
		port = "5672"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// consume runs Consume until the test ends.
func consume(t *testing.T, b broker.Broker, topic string, opts broker.ConsumeOptions, h broker.Handler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Consume(ctx, topic, opts, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("consume: %v", err)
		}
	})
}

func TestMessageOverTheDeliveryLimitReachesDeadLetterThroughTheDLQ(t *testing.T) {
	t.Parallel()
	rawURL := testenv.RabbitMQ(t)
	b := open(t, rawURL, rabbitmq.Config{DeliveryLimit: 2})
	topic := brokertest.Topic(t)
	ctx := context.Background()
	if err := b.Declare(ctx, topic); err != nil {
		t.Fatal(err)
	}
	if err := b.Publish(ctx, []broker.Message{{ID: "m1", Topic: topic, Key: "k", Body: []byte("x"), Headers: map[string]string{"h": "v"}}}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var attempts []int
	var dl brokertest.DeadLetters
	// MaxDeliveries above the delivery limit: RabbitMQ gives up first, as
	// it does for a message whose consumers crash on it.
	consume(t, b, topic, broker.ConsumeOptions{DeadLetter: dl.Func, MaxDeliveries: 10}, func(_ context.Context, d broker.Delivery) error {
		mu.Lock()
		attempts = append(attempts, d.Attempt)
		mu.Unlock()
		return errors.New("crash")
	})
	dl.Await(t, "the message dead-lettered", 30*time.Second, 1)
	time.Sleep(time.Second) // and only once
	mu.Lock()
	defer mu.Unlock()
	got, why, errs := dl.All()
	if fmt.Sprint(attempts) != "[1 2 3]" {
		t.Errorf("attempts %v, want [1 2 3]: a delivery limit of 2 allows 2 returns", attempts)
	}
	d := got[0]
	if len(got) != 1 || why[0] != broker.ReasonMaxDeliveries || errs[0] != nil ||
		d.ID != "m1" || d.Topic != topic || d.Key != "k" || string(d.Body) != "x" || d.Headers["h"] != "v" || len(d.Headers) != 1 || d.Attempt != 3 {
		t.Errorf("dead letters %+v, reasons %v, errors %v; want m1 at attempt 3 with its key and headers, max deliveries, a nil error", got, why, errs)
	}
}

func TestUnackedByACrashedConsumerComesBackWithAHigherAttempt(t *testing.T) {
	t.Parallel()
	rawURL := testenv.RabbitMQ(t)
	b := open(t, rawURL, rabbitmq.Config{})
	topic := brokertest.Topic(t)
	ctx := context.Background()
	if err := b.Declare(ctx, topic); err != nil {
		t.Fatal(err)
	}
	if err := b.Publish(ctx, []broker.Message{{ID: "m1", Topic: topic, Body: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	// A consumer that takes the message and dies: its connection closes.
	conn, err := amqp.Dial(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := ch.Consume(topic, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-msgs:
	case <-time.After(30 * time.Second):
		t.Fatal("no delivery")
	}
	conn.Close()

	got := make(chan broker.Delivery, 1)
	var dl brokertest.DeadLetters
	consume(t, b, topic, broker.ConsumeOptions{DeadLetter: dl.Func}, func(_ context.Context, d broker.Delivery) error {
		select {
		case got <- d:
		default:
		}
		return nil
	})
	select {
	case d := <-got:
		if d.Attempt != 2 {
			t.Fatalf("attempt %d after one crash, want 2", d.Attempt)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("not delivered again")
	}
}

func TestDeclareIsIdempotent(t *testing.T) {
	t.Parallel()
	b := open(t, testenv.RabbitMQ(t), rabbitmq.Config{})
	topic := brokertest.Topic(t)
	for range 2 {
		if err := b.Declare(context.Background(), topic); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDeclareRefusesAQueueWithOtherArguments(t *testing.T) {
	t.Parallel()
	rawURL := testenv.RabbitMQ(t)
	b := open(t, rawURL, rabbitmq.Config{})
	topic := brokertest.Topic(t)
	if err := b.Declare(context.Background(), topic); err != nil {
		t.Fatal(err)
	}
	other := open(t, rawURL, rabbitmq.Config{DeliveryLimit: 7})
	err := other.Declare(context.Background(), topic)
	if !errors.Is(err, rabbitmq.ErrQueueMismatch) || !strings.Contains(err.Error(), "x-delivery-limit") {
		t.Fatalf("declare with another delivery limit: %v, want ErrQueueMismatch naming x-delivery-limit", err)
	}
}

func TestPublishToAnUndeclaredTopicFails(t *testing.T) {
	t.Parallel()
	rawURL := testenv.RabbitMQ(t)
	b := open(t, rawURL, rabbitmq.Config{})
	declared := brokertest.Topic(t)
	if err := b.Declare(context.Background(), declared); err != nil {
		t.Fatal(err)
	}
	undeclared := brokertest.Topic(t)
	err := b.Publish(context.Background(), []broker.Message{
		{ID: "a", Topic: declared, Body: []byte("a")},
		{ID: "b", Topic: undeclared, Body: []byte("b")},
	})
	var pe *broker.PublishError
	if !errors.As(err, &pe) || len(pe.Errs) != 2 || pe.Errs[0] != nil || !errors.Is(pe.Errs[1], rabbitmq.ErrNotDeclared) {
		t.Fatalf("publish: %v, want a PublishError with ErrNotDeclared for the second message only", err)
	}
	// The channel is still good.
	if err := b.Publish(context.Background(), []broker.Message{{ID: "c", Topic: declared}}); err != nil {
		t.Fatal(err)
	}
}

func TestConsumeOfAnUndeclaredTopicFails(t *testing.T) {
	t.Parallel()
	b := open(t, testenv.RabbitMQ(t), rabbitmq.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := b.Consume(ctx, brokertest.Topic(t), broker.ConsumeOptions{DeadLetter: (&brokertest.DeadLetters{}).Func},
		func(context.Context, broker.Delivery) error { return nil })
	if !errors.Is(err, rabbitmq.ErrNotDeclared) {
		t.Fatalf("consume: %v, want ErrNotDeclared", err)
	}
}

func TestPublishRefusesReservedHeaders(t *testing.T) {
	t.Parallel()
	b := open(t, testenv.RabbitMQ(t), rabbitmq.Config{})
	for _, h := range []string{rabbitmq.HeaderKey, "x-delivery-count", "x-death", "x-first-death-queue"} {
		err := b.Publish(context.Background(), []broker.Message{{ID: "a", Topic: "t", Headers: map[string]string{h: "v"}}})
		if err == nil || !strings.Contains(err.Error(), h) {
			t.Errorf("publish with header %s: %v, want an error naming it", h, err)
		}
	}
}

func TestPublishAfterCloseFails(t *testing.T) {
	t.Parallel()
	b := open(t, testenv.RabbitMQ(t), rabbitmq.Config{})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	err := b.Publish(context.Background(), []broker.Message{{ID: "a", Topic: "t"}})
	if !errors.Is(err, rabbitmq.ErrClosed) {
		t.Fatalf("publish after close: %v, want ErrClosed", err)
	}
}

func TestOpenRefusesABadConfig(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		cfg  rabbitmq.Config
		want string
	}{
		{"negative delivery limit", rabbitmq.Config{DeliveryLimit: -1}, "DeliveryLimit"},
		{"negative publish timeout", rabbitmq.Config{PublishTimeout: -time.Second}, "PublishTimeout"},
		{"negative dial timeout", rabbitmq.Config{DialTimeout: -time.Second}, "DialTimeout"},
		{"not an AMQP URL", rabbitmq.Config{URL: "http://user:secret@host/"}, "URL"},
		{"bad backoff", rabbitmq.Config{Reconnect: backoff.Backoff{Base: -1}}, "Reconnect"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := rabbitmq.Open(context.Background(), c.cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "secret") {
				t.Fatalf("open: %v, want an error naming %s (and no password)", err, c.want)
			}
		})
	}
}

func TestOpenFailsWhenNothingAnswers(t *testing.T) {
	t.Parallel()
	_, err := rabbitmq.Open(context.Background(), rabbitmq.Config{URL: "amqp://guest:secret@127.0.0.1:1/", DialTimeout: 2 * time.Second})
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("open: %v, want an error without the password", err)
	}
}
