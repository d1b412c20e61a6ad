// Package brokertest is the conformance suite every broker driver runs
// against a real broker. A driver is done when Run passes.
//
// Each case uses topics of its own (random names), so cases run in
// parallel, except two that run alone: the restart case, which restarts
// the broker, and the one that counts the goroutines left after Close.
package brokertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/internal/eventually"
	"github.com/weirhq/weir/internal/leakcheck"
	"github.com/weirhq/weir/resilience/retry"
)

// Harness is what a driver gives the suite.
type Harness struct {
	// Open returns a broker for the calling test, closed when it ends.
	Open func(t *testing.T) broker.Broker
	// Restart stops the broker's server and starts it again, its stored
	// messages kept, as an operator's restart or a crash would. Brokers
	// that Open returned must come back by themselves.
	Restart func(t *testing.T)
	// RestartMessages is how many messages the restart case publishes.
	// Default 10,000.
	RestartMessages int
	// ServerGoroutines, when the broker's server runs in the test's
	// process (an embedded server), is a string that the stacks of its
	// goroutines hold, such as its package's path: the case that counts
	// the goroutines left after Close leaves those out, the server
	// outliving the broker it serves.
	ServerGoroutines string
}

type suiteCase struct {
	name string
	fn   func(*testing.T, Harness)
}

// Run runs every case of the suite.
func Run(t *testing.T, h Harness) {
	for _, c := range []suiteCase{
		{"PublishAndConsume", testPublishAndConsume},
		{"PublishRefusesBadMessages", testBadMessages},
		{"FailedHandlerIsRedelivered", testRedeliveredAfterError},
		{"UnackedDeliveryComesBackAfterTheConsumerDies", testConsumerDies},
		{"PoisonMessageIsDeadLetteredAfterMaxDeliveries", testPoison},
		{"PermanentErrorIsDeadLetteredAtOnce", testPermanent},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, h)
		})
	}
	// Not parallel: the goroutines of other cases would count.
	t.Run("CloseEndsConsumeAndLeavesNoGoroutines", func(t *testing.T) {
		testCloseLeavesNoGoroutines(t, h)
	})
	t.Run("BrokerRestartedMidStreamLosesNothing", func(t *testing.T) {
		testRestart(t, h)
	})
}

// Topic returns a topic name of the calling test's own.
func Topic(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "weirtest." + hex.EncodeToString(b)
}

func declared(t *testing.T, h Harness) (broker.Broker, string) {
	t.Helper()
	b := h.Open(t)
	topic := Topic(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Declare(ctx, topic); err != nil {
		t.Fatalf("declare %s: %v", topic, err)
	}
	return b, topic
}

func messages(topic string, n int) []broker.Message {
	msgs := make([]broker.Message, n)
	for i := range msgs {
		msgs[i] = broker.Message{
			ID: fmt.Sprintf("%s-%d", topic, i), Topic: topic, Key: "k" + strconv.Itoa(i%3),
			Body: []byte(fmt.Sprintf(`{"n":%d}`, i)), Headers: map[string]string{"source": "brokertest", "n": strconv.Itoa(i)},
		}
	}
	return msgs
}

func publish(t *testing.T, b broker.Broker, msgs []broker.Message) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.Publish(ctx, msgs); err != nil {
		t.Fatalf("publish %d messages: %v", len(msgs), err)
	}
}

// consumer runs Consume in a goroutine until the test ends or stop is
// called, and fails the test if Consume returns anything but ctx's error.
func consumer(t *testing.T, b broker.Broker, topic string, opts broker.ConsumeOptions, h broker.Handler) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Consume(ctx, topic, opts, h) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("consume %s: %v", topic, err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("consume %s did not return within 30 s of its context ending", topic)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// DeadLetters records what a consumer dead-letters: pass its Func as
// ConsumeOptions.DeadLetter.
type DeadLetters struct {
	mu   sync.Mutex
	got  []broker.Delivery
	why  []string
	errs []error
}

// Func records a dead letter; it is a broker.DeadLetterFunc.
func (d *DeadLetters) Func(_ context.Context, dl broker.Delivery, reason string, lastErr error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, dl)
	d.why = append(d.why, reason)
	d.errs = append(d.errs, lastErr)
	return nil
}

// Count returns how many dead letters were recorded.
func (d *DeadLetters) Count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.got)
}

// Consuming runs b.Consume on topic in a goroutine, its handler taking
// every delivery, and returns once the first delivery was handled, with
// the channel that receives Consume's result: the consumer is running.
// It fails t if Consume returns first, or if nothing comes within 30 s.
func Consuming(t *testing.T, ctx context.Context, b broker.Broker, topic string) <-chan error {
	t.Helper()
	got := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		var dl DeadLetters
		done <- b.Consume(ctx, topic, broker.ConsumeOptions{DeadLetter: dl.Func}, func(context.Context, broker.Delivery) error {
			select {
			case got <- struct{}{}:
			default:
			}
			return nil
		})
	}()
	select {
	case <-got:
		return done
	case err := <-done:
		t.Fatalf("consume %s returned before a delivery: %v", topic, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("consume %s: no delivery within 30 s", topic)
	}
	return nil
}

// Await waits, failing t after timeout, until want dead letters were
// recorded.
func (d *DeadLetters) Await(t testing.TB, what string, timeout time.Duration, want int) {
	t.Helper()
	eventually.True(t, what, timeout, func() (bool, string) {
		n := d.Count()
		return n == want, fmt.Sprintf("%d dead letters, want %d", n, want)
	})
}

// All returns the recorded dead letters, their reasons and last errors.
func (d *DeadLetters) All() ([]broker.Delivery, []string, []error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]broker.Delivery(nil), d.got...), append([]string(nil), d.why...), append([]error(nil), d.errs...)
}

func testPublishAndConsume(t *testing.T, h Harness) {
	b, topic := declared(t, h)
	msgs := messages(topic, 100)
	publish(t, b, msgs)
	var mu sync.Mutex
	got := map[string]broker.Delivery{}
	var dl DeadLetters
	consumer(t, b, topic, broker.ConsumeOptions{DeadLetter: dl.Func}, func(_ context.Context, d broker.Delivery) error {
		mu.Lock()
		got[d.ID] = d
		mu.Unlock()
		return nil
	})
	eventually.True(t, "all 100 messages consumed", 30*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == len(msgs), fmt.Sprintf("%d consumed", len(got))
	})
	mu.Lock()
	defer mu.Unlock()
	for _, m := range msgs {
		d, ok := got[m.ID]
		if !ok || d.Topic != topic || d.Key != m.Key || string(d.Body) != string(m.Body) ||
			d.Headers["source"] != "brokertest" || d.Headers["n"] != m.Headers["n"] || d.Attempt != 1 {
			t.Fatalf("delivery of %s: %+v, want %+v at attempt 1", m.ID, d, m)
		}
	}
	if dl.Count() != 0 {
		t.Fatalf("%d messages dead-lettered", dl.Count())
	}
}

func testBadMessages(t *testing.T, h Harness) {
	b, topic := declared(t, h)
	ctx := context.Background()
	for _, m := range []broker.Message{{Topic: topic, Body: []byte("x")}, {ID: "x", Body: []byte("x")}} {
		if err := b.Publish(ctx, []broker.Message{m}); err == nil {
			t.Fatalf("publish of %+v succeeded, want an error naming the missing field", m)
		}
	}
	if err := b.Consume(ctx, topic, broker.ConsumeOptions{}, func(context.Context, broker.Delivery) error { return nil }); err == nil ||
		errors.Is(err, context.Canceled) {
		t.Fatalf("consume without DeadLetter: %v, want an error naming it", err)
	}
}

func testRedeliveredAfterError(t *testing.T, h Harness) {
	b, topic := declared(t, h)
	publish(t, b, messages(topic, 1))
	var mu sync.Mutex
	var attempts []int
	var dl DeadLetters
	consumer(t, b, topic, broker.ConsumeOptions{DeadLetter: dl.Func, AckWait: time.Second}, func(_ context.Context, d broker.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		attempts = append(attempts, d.Attempt)
		if len(attempts) == 1 {
			return errors.New("index unavailable")
		}
		return nil
	})
	eventually.True(t, "the failed message delivered again", 30*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(attempts) >= 2, fmt.Sprintf("attempts %v", attempts)
	})
	time.Sleep(500 * time.Millisecond) // nothing more comes once acknowledged
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(attempts, []int{1, 2}) {
		t.Fatalf("attempts %v, want [1 2]", attempts)
	}
}

func testConsumerDies(t *testing.T, h Harness) {
	b, topic := declared(t, h)
	publish(t, b, messages(topic, 1))
	var dl DeadLetters
	started := make(chan struct{})
	var once sync.Once
	stop := consumer(t, b, topic, broker.ConsumeOptions{DeadLetter: dl.Func, AckWait: time.Second}, func(ctx context.Context, d broker.Delivery) error {
		once.Do(func() { close(started) })
		<-ctx.Done() // dies mid-message: never acknowledges
		return ctx.Err()
	})
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the message was not delivered")
	}
	stop()

	b2 := h.Open(t)
	got := make(chan broker.Delivery, 10)
	consumer(t, b2, topic, broker.ConsumeOptions{DeadLetter: dl.Func, AckWait: time.Second}, func(_ context.Context, d broker.Delivery) error {
		got <- d
		return nil
	})
	select {
	case d := <-got:
		if d.Attempt < 2 {
			t.Fatalf("redelivery at attempt %d, want 2 or more", d.Attempt)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the unacknowledged message was not delivered again to a new consumer")
	}
}

func testPoison(t *testing.T, h Harness) {
	b, topic := declared(t, h)
	publish(t, b, messages(topic, 1))
	var mu sync.Mutex
	deliveries := 0
	var dl DeadLetters
	consumer(t, b, topic, broker.ConsumeOptions{DeadLetter: dl.Func, MaxDeliveries: 3, AckWait: time.Second}, func(context.Context, broker.Delivery) error {
		mu.Lock()
		deliveries++
		mu.Unlock()
		return errors.New("cannot parse")
	})
	dl.Await(t, "the poison message dead-lettered", time.Minute, 1)
	time.Sleep(2 * time.Second) // it is not delivered again
	mu.Lock()
	defer mu.Unlock()
	dl.mu.Lock()
	defer dl.mu.Unlock()
	if deliveries != 3 || len(dl.got) != 1 || dl.why[0] != broker.ReasonMaxDeliveries || dl.errs[0] == nil ||
		dl.errs[0].Error() != "cannot parse" || dl.got[0].ID != topic+"-0" {
		t.Fatalf("deliveries %d, dead letters %+v reasons %v errors %v; want 3 deliveries, then one dead letter (max deliveries, the last error)",
			deliveries, dl.got, dl.why, dl.errs)
	}
}

func testPermanent(t *testing.T, h Harness) {
	b, topic := declared(t, h)
	publish(t, b, messages(topic, 1))
	var dl DeadLetters
	consumer(t, b, topic, broker.ConsumeOptions{DeadLetter: dl.Func, MaxDeliveries: 5}, func(context.Context, broker.Delivery) error {
		return retry.Permanent(errors.New("schema violation"))
	})
	dl.Await(t, "the message dead-lettered", 30*time.Second, 1)
	dl.mu.Lock()
	defer dl.mu.Unlock()
	if dl.why[0] != broker.ReasonPermanent || dl.got[0].Attempt != 1 {
		t.Fatalf("dead letter %+v reason %s, want non_retryable at attempt 1", dl.got[0], dl.why[0])
	}
}

// testCloseLeavesNoGoroutines closes a broker while a consumer runs, once
// it has handled a delivery: Consume returns an error of its own (not
// its context's), and every goroutine the broker started ends.
func testCloseLeavesNoGoroutines(t *testing.T, h Harness) {
	before := leakcheck.Take()
	b, topic := declared(t, h)
	publish(t, b, messages(topic, 10))
	done := Consuming(t, context.Background(), b, topic)
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	select {
	case err := <-done:
		if err == nil || errors.Is(err, context.Canceled) {
			t.Fatalf("consume returned %v after Close; want the driver's closed error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("consume did not return within 30 s of Close")
	}
	var ignore []string
	if h.ServerGoroutines != "" {
		ignore = append(ignore, h.ServerGoroutines)
	}
	before.Check(t, 10*time.Second, ignore...)
}

// testRestart publishes RestartMessages messages in batches while a
// consumer runs, restarts the broker at a third and at a half of them, and
// checks that every message whose publish was confirmed was consumed.
// Unconfirmed batches are published again with the same ids, as an outbox
// relay does.
func testRestart(t *testing.T, h Harness) {
	if h.Restart == nil {
		t.Fatal("the harness has no Restart")
	}
	n := h.RestartMessages
	if n == 0 {
		n = 10_000
	}
	b, topic := declared(t, h)
	var mu sync.Mutex
	seen := map[string]bool{}
	var dl DeadLetters
	consumer(t, b, topic, broker.ConsumeOptions{DeadLetter: dl.Func, AckWait: 5 * time.Second}, func(_ context.Context, d broker.Delivery) error {
		mu.Lock()
		seen[d.ID] = true
		mu.Unlock()
		return nil
	})
	msgs := messages(topic, n)
	const batch = 200
	restartAt := map[int]bool{n / 3 / batch * batch: true, n / 2 / batch * batch: true}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i := 0; i < n; i += batch {
		if restartAt[i] {
			t.Logf("restarting the broker after %d messages", i)
			h.Restart(t)
		}
		part := msgs[i:min(i+batch, n)]
		for try := 1; ; try++ {
			err := b.Publish(ctx, part)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("publish after %d messages: %v", i, err)
			}
			t.Logf("publish of messages %d-%d, try %d: %v", i, i+len(part)-1, try, err)
			time.Sleep(200 * time.Millisecond)
		}
	}
	eventually.True(t, fmt.Sprintf("all %d confirmed messages consumed", n), 3*time.Minute, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == n, fmt.Sprintf("%d consumed", len(seen))
	})
	if dl.Count() != 0 {
		t.Fatalf("%d messages dead-lettered", dl.Count())
	}
}
