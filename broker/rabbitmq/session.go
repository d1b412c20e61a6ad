package rabbitmq

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// session is a connection that is dialled again, with backoff, whenever
// it is lost. amqp091-go does not reconnect by itself (its Recovery option
// is experimental), so a session watches NotifyClose.
type session struct {
	cfg  Config
	log  *slog.Logger
	role string

	// first is the connection Open dialled, for its server properties.
	first *amqp.Connection

	mu    sync.Mutex
	conn  *amqp.Connection // nil while reconnecting
	ready chan struct{}    // closed when conn is set; replaced when it is lost

	done     chan struct{} // closed by close
	finished chan struct{} // closed when run returns
	once     sync.Once
}

// openSession dials once, failing if that fails, and then keeps the
// connection up until close.
func openSession(ctx context.Context, cfg Config, role string) (*session, error) {
	s := &session{
		cfg: cfg, log: cfg.Logger.With("connection", role), role: role,
		ready: make(chan struct{}), done: make(chan struct{}), finished: make(chan struct{}),
	}
	conn, err := s.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: connect to %s: %w", redactURL(cfg.URL), err)
	}
	s.first = conn
	s.set(conn)
	go s.run(conn)
	return s, nil
}

// dial opens one connection, within ctx and Config.DialTimeout.
func (s *session) dial(ctx context.Context) (*amqp.Connection, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.DialTimeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	return amqp.DialConfig(s.cfg.URL, amqp.Config{
		Heartbeat: 10 * time.Second,
		Locale:    "en_US",
		Properties: amqp.Table{
			"connection_name": s.cfg.ConnectionName + " " + s.role,
			"product":         "weir",
		},
		Dial: func(network, addr string) (net.Conn, error) {
			var d net.Dialer
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// A deadline for the TLS and AMQP handshakes; amqp091-go
			// clears it once the connection is open.
			if err := conn.SetDeadline(deadline); err != nil {
				conn.Close()
				return nil, err
			}
			return conn, nil
		},
	})
}

// run watches conn and dials again when it closes, until close.
func (s *session) run(conn *amqp.Connection) {
	defer close(s.finished)
	for {
		lost := conn.NotifyClose(make(chan *amqp.Error, 1))
		select {
		case <-s.done:
			conn.Close()
			return
		case err := <-lost:
			s.log.Warn("rabbitmq: connection lost; dialling again", "err", err)
		}
		s.unset()
		for n := 1; ; n++ {
			t := s.cfg.Clock.NewTimer(s.cfg.Reconnect.Next(n, 0))
			select {
			case <-s.done:
				t.Stop()
				return
			case <-t.C():
			}
			c, err := s.redial()
			if err != nil {
				s.log.Warn("rabbitmq: dial failed; trying again", "attempt", n, "err", err)
				continue
			}
			s.log.Info("rabbitmq: reconnected", "attempts", n)
			conn = c
			s.set(conn)
			break
		}
	}
}

func (s *session) set(conn *amqp.Connection) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conn = conn
	close(s.ready)
}

func (s *session) unset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conn = nil
	s.ready = make(chan struct{})
}

// redial dials once, giving up when the session closes.
func (s *session) redial() (*amqp.Connection, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return s.dial(ctx)
}

// get returns the open connection, waiting for a reconnect within ctx.
func (s *session) get(ctx context.Context) (*amqp.Connection, error) {
	for {
		s.mu.Lock()
		conn, ready := s.conn, s.ready
		s.mu.Unlock()
		select {
		case <-s.done:
			return nil, ErrClosed
		default:
		}
		if conn != nil && !conn.IsClosed() {
			return conn, nil
		}
		if conn != nil {
			// Closed, and run has not noticed yet: wait a moment for it.
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("wait for the %s connection: %w", s.role, ctx.Err())
			case <-s.done:
				return nil, ErrClosed
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for the %s connection: %w", s.role, ctx.Err())
		case <-s.done:
			return nil, ErrClosed
		}
	}
}

// close stops reconnecting and closes the connection. Safe to call twice.
func (s *session) close() {
	s.once.Do(func() { close(s.done) })
	<-s.finished
}

// redactURL returns u without its password, for messages.
func redactURL(u string) string {
	uri, err := amqp.ParseURI(u)
	if err != nil {
		return "the configured URL"
	}
	return fmt.Sprintf("%s:%d", uri.Host, uri.Port)
}
