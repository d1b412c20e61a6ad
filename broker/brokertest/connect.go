package brokertest

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/internal/eventually"
	"github.com/weirhq/weir/internal/faultproxy"
)

// ConnectsInTheBackground checks a broker that open opens through proxy,
// cut for now, with the driver's option to go on connecting in the
// background (RetryFirstConnect): Open returns within 10 s; until the
// proxy is restored the broker reports no connection, and Declare and
// Publish fail at once with errors wrapping broker.ErrNotConnected (each
// message's, for Publish) that name the proxy's address; once it is
// restored, the broker connects by itself, Declare and Publish work, and
// Connected counts one connection. The broker must implement
// broker.Connectivity. It returns the broker, connected.
func ConnectsInTheBackground(t *testing.T, proxy *faultproxy.Proxy, open func(t *testing.T) broker.Broker) broker.Broker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	proxy.Cut()
	begin := time.Now()
	b := open(t)
	if took := time.Since(begin); took > 10*time.Second {
		t.Fatalf("Open took %v", took)
	}
	c, ok := b.(broker.Connectivity)
	if !ok {
		t.Fatalf("%T does not report its connection (broker.Connectivity)", b)
	}
	if up, n := c.Connected(); up || n != 0 {
		t.Fatalf("Connected() = %v, %d before any connection; want false, 0", up, n)
	}
	topic := Topic(t)
	begin = time.Now()
	if err := b.Declare(ctx, topic); !errors.Is(err, broker.ErrNotConnected) || !strings.Contains(err.Error(), proxy.Addr()) {
		t.Fatalf("Declare while not connected: %v; want ErrNotConnected naming %s", err, proxy.Addr())
	}
	err := b.Publish(ctx, []broker.Message{{ID: "1", Topic: topic}, {ID: "2", Topic: topic}})
	var pe *broker.PublishError
	if !errors.As(err, &pe) || len(pe.Errs) != 2 || !errors.Is(pe.Errs[0], broker.ErrNotConnected) || !errors.Is(pe.Errs[1], broker.ErrNotConnected) {
		t.Fatalf("Publish while not connected: %v; want a PublishError with ErrNotConnected for each message", err)
	}
	if took := time.Since(begin); took > 2*time.Second {
		t.Fatalf("Declare and Publish while not connected took %v; want them to fail at once", took)
	}

	proxy.Restore()
	eventually.True(t, "connected after the server became reachable", 30*time.Second, func() (bool, string) {
		up, _ := c.Connected()
		return up, "not connected"
	})
	if err := b.Declare(ctx, topic); err != nil {
		t.Fatalf("Declare once connected: %v", err)
	}
	if err := b.Publish(ctx, []broker.Message{{ID: "1", Topic: topic}, {ID: "2", Topic: topic}}); err != nil {
		t.Fatalf("Publish once connected: %v", err)
	}
	if up, n := c.Connected(); !up || n != 1 {
		t.Fatalf("Connected() = %v, %d; want true, 1", up, n)
	}
	return b
}

// WaitListening waits until addr accepts a TCP connection, failing t
// after timeout: for a test that restarted the server there.
func WaitListening(t testing.TB, addr string, timeout time.Duration) {
	t.Helper()
	eventually.True(t, "a server accepts connections at "+addr, timeout, func() (bool, string) {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false, err.Error()
		}
		conn.Close()
		return true, ""
	})
}
