package rabbitmq_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/broker/brokertest"
	"github.com/weirhq/weir/broker/rabbitmq"
	"github.com/weirhq/weir/internal/faultproxy"
	"github.com/weirhq/weir/internal/testenv"
)

// A Broker opened with RetryFirstConnect while the server cannot be
// reached (a proxy in front of it refuses every connection) opens at
// once; Declare and Publish fail at once with ErrNotConnected until it has
// connected in the background, then work. Without RetryFirstConnect, Open
// fails as it did.
func TestOpenWhileTheServerIsUnreachable(t *testing.T) {
	rawURL := testenv.RabbitMQ(t)
	t.Parallel()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.New(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	proxy.Cut() // connections are closed as soon as they are accepted
	u.Host = proxy.Addr()
	proxied := u.String()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if b, err := rabbitmq.Open(ctx, rabbitmq.Config{URL: proxied, DialTimeout: 2 * time.Second}); err == nil {
		b.Close()
		t.Fatal("Open without RetryFirstConnect connected through a cut proxy")
	}

	begin := time.Now()
	b := open(t, proxied, rabbitmq.Config{RetryFirstConnect: true, DialTimeout: 2 * time.Second})
	if took := time.Since(begin); took > 10*time.Second {
		t.Fatalf("Open took %v", took)
	}
	if up, n := b.Connected(); up || n != 0 {
		t.Fatalf("Connected() = %v, %d before any connection; want false, 0", up, n)
	}
	topic := brokertest.Topic(t)
	begin = time.Now()
	if err := b.Declare(ctx, topic); !errors.Is(err, broker.ErrNotConnected) || !strings.Contains(err.Error(), proxy.Addr()) {
		t.Fatalf("Declare while not connected: %v; want ErrNotConnected naming %s", err, proxy.Addr())
	}
	err = b.Publish(ctx, []broker.Message{{ID: "1", Topic: topic}, {ID: "2", Topic: topic}})
	var pe *broker.PublishError
	if !errors.As(err, &pe) || len(pe.Errs) != 2 || !errors.Is(pe.Errs[0], broker.ErrNotConnected) || !errors.Is(pe.Errs[1], broker.ErrNotConnected) {
		t.Fatalf("Publish while not connected: %v; want a PublishError with ErrNotConnected for each message", err)
	}
	if took := time.Since(begin); took > 2*time.Second {
		t.Fatalf("Declare and Publish while not connected took %v; want them to fail at once", took)
	}

	proxy.Restore()
	deadline := time.Now().Add(30 * time.Second)
	for up, _ := b.Connected(); !up; up, _ = b.Connected() {
		if time.Now().After(deadline) {
			t.Fatal("not connected 30 s after the server became reachable")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := b.Declare(ctx, topic); err != nil {
		t.Fatalf("Declare once connected: %v", err)
	}
	if err := b.Publish(ctx, []broker.Message{{ID: "1", Topic: topic}, {ID: "2", Topic: topic}}); err != nil {
		t.Fatalf("Publish once connected: %v", err)
	}
	if up, n := b.Connected(); !up || n != 1 || b.ServerVersion() == "" {
		t.Fatalf("Connected() = %v, %d, server version %q; want true, 1 and a version", up, n, b.ServerVersion())
	}
}

// A bad URL, or credentials the server refuses, fail Open at once even
// with RetryFirstConnect: dialling again would not help.
func TestOpenRefusesWhatRetryingCannotFix(t *testing.T) {
	rawURL := testenv.RabbitMQ(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("guest", "not-the-password")
	for _, bad := range []string{"http://127.0.0.1:5672/", "amqp://[::1", u.String()} {
		b, err := rabbitmq.Open(ctx, rabbitmq.Config{URL: bad, RetryFirstConnect: true})
		if err == nil {
			b.Close()
			t.Errorf("Open(%s) worked", bad)
			continue
		}
		if strings.Contains(err.Error(), "not-the-password") {
			t.Errorf("Open's error shows the password: %v", err)
		}
	}
	if ctx.Err() != nil {
		t.Fatal("Open took the context's 30 s")
	}
}
