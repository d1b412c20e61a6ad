package rabbitmq

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/weirhq/weir/broker"
)

// session is a connection that is dialled again, with backoff, whenever
// it is lost. amqp091-go does not reconnect by itself (its Recovery option
// is experimental), so a session watches NotifyClose.
type session struct {
	cfg  Config
	log  *slog.Logger
	role string
	// onFirst, if set, is called with the session's first connection, once.
	onFirst func(*amqp.Connection)

	mu       sync.Mutex
	first    *amqp.Connection // the first connection made, for its server properties
	conn     *amqp.Connection // nil while (re)connecting
	lastErr  error            // the last dial's error, while conn is nil
	connects uint64           // the connections made
	changed  chan struct{}    // closed, and replaced, when conn or lastErr changes

	done     chan struct{} // closed by close
	finished chan struct{} // closed when run returns
	once     sync.Once
}

// openSession dials once and then keeps the connection up until close.
// When that dial fails it returns the error, unless background is set
// and the server did not refuse the client (its credentials, its TLS):
// then the session goes on dialling in the background, and get fails
// with broker.ErrNotConnected meanwhile.
func openSession(ctx context.Context, cfg Config, role string, background bool, onFirst func(*amqp.Connection)) (*session, error) {
	s := &session{
		cfg: cfg, log: cfg.Logger.With("connection", role), role: role, onFirst: onFirst,
		changed: make(chan struct{}), done: make(chan struct{}), finished: make(chan struct{}),
	}
	conn, err := s.dial(ctx)
	switch {
	case err == nil:
		s.set(conn)
	case !background || refused(err):
		return nil, fmt.Errorf("rabbitmq: connect to %s: %w", redactURL(cfg.URL), err)
	default:
		s.log.Warn("rabbitmq: the server cannot be reached; connecting in the background", "server", redactURL(cfg.URL), "err", err)
		s.setErr(err)
		conn = nil // amqp091-go may return one with its error
	}
	go s.run(conn)
	return s, nil
}

// refused reports whether err, a failed dial, is the server refusing the
// client (its credentials, its virtual host, its TLS) rather than the
// server being unreachable: dialling again would not help.
func refused(err error) bool {
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.Is(err, amqp.ErrCredentials) || errors.Is(err, amqp.ErrVhost) || errors.Is(err, amqp.ErrSASL) ||
		errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci)
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

// run watches conn and dials again when it closes, until close; with a
// nil conn (the first dial failed) it begins by dialling.
func (s *session) run(conn *amqp.Connection) {
	defer close(s.finished)
	for {
		if conn != nil {
			lost := conn.NotifyClose(make(chan *amqp.Error, 1))
			select {
			case <-s.done:
				conn.Close()
				return
			case err := <-lost:
				s.log.Warn("rabbitmq: connection lost; dialling again", "err", err)
			}
			s.unset()
		}
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
				s.setErr(err)
				continue
			}
			if s.connected() == 0 {
				s.log.Info("rabbitmq: connected", "attempts", n)
			} else {
				s.log.Info("rabbitmq: reconnected", "attempts", n)
			}
			conn = c
			s.set(conn)
			break
		}
	}
}

// set makes conn the session's connection.
func (s *session) set(conn *amqp.Connection) {
	s.mu.Lock()
	first := s.first == nil
	if first {
		s.first = conn
	}
	s.conn, s.lastErr = conn, nil
	s.connects++
	s.notifyLocked()
	s.mu.Unlock()
	if first && s.onFirst != nil {
		s.onFirst(conn)
	}
}

// unset drops the lost connection; calls wait for the next one until a
// dial fails.
func (s *session) unset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conn = nil
	s.notifyLocked()
}

// setErr records a failed dial: calls fail with broker.ErrNotConnected
// until a dial succeeds.
func (s *session) setErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastErr = err
	s.notifyLocked()
}

func (s *session) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// connected returns how many connections the session has made.
func (s *session) connected() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connects
}

// state returns whether the session has a connection now, and how many
// it has made.
func (s *session) state() (bool, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn != nil && !s.conn.IsClosed(), s.connects
}

// firstConn returns the session's first connection, or nil before it.
func (s *session) firstConn() *amqp.Connection {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first
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

// get returns the open connection. After a lost connection it waits for
// the next within ctx, its error then wrapping broker.ErrNotConnected
// and ctx's. Before the session's first connection (Open went on
// dialling in the background) it fails at once, with an error wrapping
// broker.ErrNotConnected and the last dial's error.
func (s *session) get(ctx context.Context) (*amqp.Connection, error) {
	for {
		s.mu.Lock()
		conn, lastErr, changed, never := s.conn, s.lastErr, s.changed, s.connects == 0
		s.mu.Unlock()
		select {
		case <-s.done:
			return nil, ErrClosed
		default:
		}
		if conn != nil && !conn.IsClosed() {
			return conn, nil
		}
		if conn == nil && never && lastErr != nil {
			return nil, fmt.Errorf("%w: %s, dialling again in the background: %w", broker.ErrNotConnected, redactURL(s.cfg.URL), lastErr)
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
		case <-changed:
		case <-ctx.Done():
			if lastErr != nil {
				return nil, fmt.Errorf("wait for the %s connection: %w: %w (last dial: %v)", s.role, broker.ErrNotConnected, ctx.Err(), lastErr)
			}
			return nil, fmt.Errorf("wait for the %s connection: %w: %w", s.role, broker.ErrNotConnected, ctx.Err())
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
