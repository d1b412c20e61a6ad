package rabbitmq_test

import (
	"context"
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
	proxy, proxied := faultproxy.ForURL(t, rawURL)
	proxy.Cut() // connections are closed as soon as they are accepted
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if b, err := rabbitmq.Open(ctx, rabbitmq.Config{URL: proxied, DialTimeout: 2 * time.Second}); err == nil {
		b.Close()
		t.Fatal("Open without RetryFirstConnect connected through a cut proxy")
	}

	b := brokertest.ConnectsInTheBackground(t, proxy, func(t *testing.T) broker.Broker {
		return open(t, proxied, rabbitmq.Config{RetryFirstConnect: true, DialTimeout: 2 * time.Second})
	}).(*tracked)
	if b.ServerVersion() == "" {
		t.Fatal("no server version once connected")
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
