package nats

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/internal/defaults"
	"github.com/weirhq/weir/internal/redact"
	"github.com/weirhq/weir/resilience/backoff"
)

// Defaults of Config.
const (
	DefaultURL            = "nats://127.0.0.1:4222"
	DefaultStreamPrefix   = "WEIR_"
	DefaultDedupeWindow   = 2 * time.Minute
	DefaultPublishTimeout = 10 * time.Second
	DefaultReconnectWait  = 2 * time.Second
	DefaultNakDelay       = time.Second
	DefaultConnectTimeout = 5 * time.Second
	DefaultName           = "weir"
)

// KeyHeader is the NATS header that carries Message.Key. It, and the
// headers whose names begin with "Nats-" (NATS's own), cannot be set in
// Message.Headers.
const KeyHeader = "Weir-Key"

// ErrClosed is returned by the calls made on a Broker after Close.
var ErrClosed = errors.New("broker/nats: broker closed")

// Config configures a Broker. Its zero value works against a NATS server
// on the local machine's default port.
type Config struct {
	// URL is the NATS server's URL, or several separated by commas (the
	// members of a cluster): nats://, tls://, ws:// or wss://, with a
	// host. Default nats://127.0.0.1:4222.
	URL string
	// Name names the connection on the server (its monitoring pages).
	// Default "weir".
	Name string
	// StreamPrefix begins the name of each topic's stream; the rest is the
	// topic, see Broker.Declare. Letters, digits, '_' and '-' only.
	// Default "WEIR_".
	StreamPrefix string
	// DedupeWindow is how long a stream remembers the ids of the messages
	// it stored, dropping a message published again with one of them.
	// Default 2 min.
	DedupeWindow time.Duration
	// MaxAge bounds how long a stream keeps a message, acknowledged or
	// not. Zero, the default, keeps messages until they are deleted by
	// hand or a limit of the server's is reached.
	MaxAge time.Duration
	// Replicas is how many servers of a cluster keep each stream.
	// Default 1.
	Replicas int
	// PublishTimeout is how long Publish waits for the server to confirm a
	// message before counting it unconfirmed. Default 10 s.
	PublishTimeout time.Duration
	// ConnectTimeout bounds the first connection, made by Open. Default 5 s.
	ConnectTimeout time.Duration
	// RetryFirstConnect makes Open return a Broker even when no server
	// can be reached: it goes on connecting in the background, as it
	// reconnects after a lost connection, and meanwhile Declare and
	// Publish fail at once with an error wrapping broker.ErrNotConnected.
	// A bad URL, or a server that refuses the credentials or the TLS
	// setup, still fails Open. Default false: Open fails when it cannot
	// connect within ConnectTimeout.
	RetryFirstConnect bool
	// ReconnectWait is the longest wait between two attempts to reconnect
	// after a lost connection; the first waits 50 ms and each next one
	// twice as long, up to this. The attempts never stop. Default 2 s.
	ReconnectWait time.Duration
	// NakDelay is how long a delivery whose handler failed waits before
	// the server delivers it again. Default 1 s.
	NakDelay time.Duration
	// Logger receives the connection's events and the consumers' errors.
	// Default slog.Default().
	Logger *slog.Logger
	// Clock is the source of time for the consumers' waits between
	// requests that failed (100 ms doubling up to 5 s, ±10%) and for the
	// ages of the dead-letter outcomes the Broker remembers (10 min).
	// Default clock.Real. (The reconnect waits are nats.go's own timers.)
	Clock clock.Clock
}

// withDefaults returns c with its defaults, or an error naming the bad
// field.
func (c Config) withDefaults() (Config, error) {
	const field = "broker/nats: Config."
	if err := cmp.Or(
		defaults.Set(field+"DedupeWindow", &c.DedupeWindow, DefaultDedupeWindow),
		defaults.Set(field+"MaxAge", &c.MaxAge, 0),
		defaults.Set(field+"Replicas", &c.Replicas, 1),
		defaults.Set(field+"PublishTimeout", &c.PublishTimeout, DefaultPublishTimeout),
		defaults.Set(field+"ConnectTimeout", &c.ConnectTimeout, DefaultConnectTimeout),
		defaults.Set(field+"ReconnectWait", &c.ReconnectWait, DefaultReconnectWait),
		defaults.Set(field+"NakDelay", &c.NakDelay, DefaultNakDelay),
	); err != nil {
		return c, err
	}
	c.URL = cmp.Or(c.URL, DefaultURL)
	if err := checkURLs(c.URL); err != nil {
		return c, err
	}
	c.Name = cmp.Or(c.Name, DefaultName)
	c.StreamPrefix = cmp.Or(c.StreamPrefix, DefaultStreamPrefix)
	for _, r := range c.StreamPrefix {
		if !nameRune(r) {
			return c, fmt.Errorf("broker/nats: Config.StreamPrefix %q has %q; use letters, digits, '_' and '-'", c.StreamPrefix, r)
		}
	}
	if c.MaxAge > 0 && c.MaxAge < c.DedupeWindow {
		return c, fmt.Errorf("broker/nats: Config.MaxAge %v is shorter than DedupeWindow %v", c.MaxAge, c.DedupeWindow)
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Clock = clock.Or(c.Clock)
	return c, nil
}

// Broker is a broker.Broker over NATS JetStream. Its methods are safe for
// concurrent use.
type Broker struct {
	cfg Config
	log *slog.Logger
	nc  *natsgo.Conn
	js  jetstream.JetStream
	// pub is the JetStream context Publish sends through; see
	// retirePublisher.
	pub atomic.Pointer[jetstream.JetStream]
	// done is closed by Close; it stops the consumers.
	done chan struct{}

	// mu guards flights and recent, the in-process record that keeps a
	// message from being dead-lettered by both the handler path and the
	// max-deliveries advisory (see deadletter.go).
	mu      sync.Mutex
	flights map[seqKey]*flight
	recent  map[seqKey]outcome

	// connects counts the connections made, the first included.
	connects atomic.Uint64

	closeOnce sync.Once
}

var (
	_ broker.Broker       = (*Broker)(nil)
	_ broker.Connectivity = (*Broker)(nil)
)

// Open connects to the NATS server of cfg.URL, which must have JetStream
// enabled, and returns a Broker over it. The connection is made once
// before Open returns, unless cfg.RetryFirstConnect lets it go on in the
// background; later, a lost connection is made again, with backoff, for
// as long as the Broker is open.
func Open(ctx context.Context, cfg Config) (*Broker, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	b := &Broker{
		cfg:     cfg,
		log:     cfg.Logger.With(slog.String("broker", "nats")),
		done:    make(chan struct{}),
		flights: map[seqKey]*flight{},
		recent:  map[seqKey]outcome{},
	}
	timeout := cfg.ConnectTimeout
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		timeout = time.Until(d)
	}
	// background is set when the first connection goes on in the
	// background: nats.go then reports it to the connect handler.
	var background atomic.Bool
	opts := []natsgo.Option{
		natsgo.Name(cfg.Name),
		natsgo.Timeout(timeout),
		natsgo.MaxReconnects(-1),
		natsgo.CustomReconnectDelay(reconnectDelay(cfg.ReconnectWait)),
		// No buffer while reconnecting: a publish fails at once, rather
		// than waiting unconfirmed in memory, and Publish reports it.
		natsgo.ReconnectBufSize(-1),
		natsgo.DisconnectErrHandler(func(_ *natsgo.Conn, err error) {
			if err != nil {
				b.log.Warn("connection lost", slog.Any("err", err))
			}
		}),
		natsgo.ConnectHandler(func(nc *natsgo.Conn) {
			if background.Load() {
				b.connects.Add(1)
				b.log.Info("connected", slog.String("url", nc.ConnectedUrlRedacted()))
			}
		}),
		natsgo.ReconnectHandler(func(nc *natsgo.Conn) {
			b.connects.Add(1)
			b.log.Info("reconnected", slog.String("url", nc.ConnectedUrlRedacted()))
		}),
		natsgo.ReconnectErrHandler(func(_ *natsgo.Conn, err error) {
			b.log.Debug("connect failed; trying again", slog.Any("err", err))
		}),
		natsgo.ErrorHandler(func(_ *natsgo.Conn, sub *natsgo.Subscription, err error) {
			attrs := []any{slog.Any("err", err)}
			if sub != nil {
				attrs = append(attrs, slog.String("subject", sub.Subject))
			}
			b.log.Error("connection error", attrs...)
		}),
	}
	nc, err := natsgo.Connect(cfg.URL, opts...)
	if err != nil && cfg.RetryFirstConnect && !refused(err) {
		b.log.Warn("the NATS server cannot be reached; connecting in the background",
			slog.String("url", redact.URL(cfg.URL)), slog.Any("err", err))
		background.Store(true)
		nc, err = natsgo.Connect(cfg.URL, append(opts, natsgo.RetryOnFailedConnect(true))...)
	}
	if err != nil {
		return nil, fmt.Errorf("broker/nats: connect to %s: %w", redact.URL(cfg.URL), err)
	}
	if !background.Load() {
		b.connects.Store(1)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("broker/nats: jetstream: %w", err)
	}
	// Publish sends through a context of its own, without a timeout for
	// a PubAck, which nats.go would keep with a timer per message:
	// Publish times its waits itself (ackWaiter).
	pub, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(publishWindow*4))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("broker/nats: jetstream: %w", err)
	}
	b.nc, b.js = nc, js
	b.pub.Store(&pub)
	return b, nil
}

// reconnectBase is the wait before the first attempt to reconnect.
const reconnectBase = 50 * time.Millisecond

// jitter is the share by which the driver's waits vary, either way, so
// that clients that lost one server do not all come back at once.
const jitter = 0.1

// reconnectDelay returns nats.go's reconnect delay: 50 ms, doubled at each
// attempt up to limit, ±10%, never past limit.
func reconnectDelay(limit time.Duration) natsgo.ReconnectDelayHandler {
	b := backoff.Exponential(min(reconnectBase, limit), 2, limit).WithProportionalJitter(jitter)
	return func(attempts int) time.Duration {
		return b.Next(attempts, 0)
	}
}

// refused reports whether err, a failed first connection, is the server
// refusing the client (its credentials, its TLS) rather than the server
// being unreachable: trying again in the background would not help.
func refused(err error) bool {
	for _, e := range []error{natsgo.ErrAuthorization, natsgo.ErrAuthExpired, natsgo.ErrAuthRevoked, natsgo.ErrAccountAuthExpired,
		natsgo.ErrNkeysNotSupported, natsgo.ErrSecureConnRequired, natsgo.ErrSecureConnWanted, natsgo.ErrClientCertOrRootCAsRequired} {
		if errors.Is(err, e) {
			return true
		}
	}
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci) ||
		strings.Contains(strings.ToLower(err.Error()), "authorization violation")
}

// checkURLs returns an error unless each of the comma-separated urls is
// one nats.go can dial: nats://, tls://, ws:// or wss://, with a host (a
// bare host:port is taken as nats://).
func checkURLs(urls string) error {
	for _, raw := range strings.Split(urls, ",") {
		raw = strings.TrimSpace(raw)
		if !strings.Contains(raw, "://") {
			raw = "nats://" + raw
		}
		u, err := url.Parse(raw)
		if err != nil {
			// url.Parse's error repeats the URL, which may hold a password.
			return fmt.Errorf("broker/nats: Config.URL %s is not a URL", redact.URL(raw))
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Errorf("broker/nats: Config.URL %s: scheme %q; want nats://, tls://, ws:// or wss://", redact.URL(raw), u.Scheme)
		}
		if u.Host == "" {
			return fmt.Errorf("broker/nats: Config.URL %s has no host", redact.URL(raw))
		}
	}
	return nil
}

// Connected reports whether the Broker has a connection to the server
// now, and how many connections it has made since Open; see
// broker.Connectivity.
func (b *Broker) Connected() (bool, uint64) {
	return b.nc.IsConnected(), b.connects.Load()
}

// notConnected returns the error of op while the Broker has no
// connection, or nil when it has one.
func (b *Broker) notConnected(op string) error {
	if b.nc.IsConnected() {
		return nil
	}
	return fmt.Errorf("broker/nats: %s: %w (connecting to %s in the background)", op, broker.ErrNotConnected, redact.URL(b.cfg.URL))
}

// Features reports what JetStream does itself: it drops a message
// published again with an id it stored within the dedupe window.
func (b *Broker) Features() broker.Features {
	return broker.Features{Name: "nats", Dedupe: true, DedupeWindow: b.cfg.DedupeWindow}
}

// Close closes the connection. Consumers return ErrClosed. Calling it
// again does nothing.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		close(b.done)
		b.nc.Close()
	})
	return nil
}

func (b *Broker) closed() bool {
	select {
	case <-b.done:
		return true
	default:
		return b.nc.IsClosed()
	}
}

// Declare makes each topic's stream: file storage, the topic as its only
// subject, limits retention (a message stays after it was acknowledged,
// so that every group of consumers gets it) and a duplicate window of
// Config.DedupeWindow. The stream's name is Config.StreamPrefix followed
// by the topic, each character other than a letter, digit, '_' or '-'
// made '_', and, if any was, or the topic is longer than 64 bytes, '_' and
// eight hex digits of the topic's SHA-256, so that two topics never share
// a name. Declaring a stream that exists updates its duplicate window and
// maximum age to the configured ones. While the Broker has no connection
// Declare fails at once with an error wrapping broker.ErrNotConnected.
func (b *Broker) Declare(ctx context.Context, topics ...string) error {
	if b.closed() {
		return ErrClosed
	}
	for _, topic := range topics {
		if err := checkTopic(topic); err != nil {
			return err
		}
	}
	if err := b.notConnected("declare " + strings.Join(topics, ", ")); err != nil {
		return err
	}
	for _, topic := range topics {
		if err := b.declare(ctx, topic); err != nil {
			return fmt.Errorf("broker/nats: declare %s: %w", topic, err)
		}
	}
	return nil
}

func (b *Broker) declare(ctx context.Context, topic string) error {
	name := b.streamName(topic)
	want := jetstream.StreamConfig{
		Name:        name,
		Description: "weir topic " + topic,
		Subjects:    []string{topic},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		Storage:     jetstream.FileStorage,
		Replicas:    b.cfg.Replicas,
		Duplicates:  b.cfg.DedupeWindow,
		MaxAge:      b.cfg.MaxAge,
	}
	// Each request is bounded (see apiTimeout): Declare fails instead of
	// waiting on a reply that will not come.
	for {
		s, err := request(ctx, func(ctx context.Context) (jetstream.Stream, error) { return b.js.Stream(ctx, name) })
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			_, err = request(ctx, func(ctx context.Context) (jetstream.Stream, error) { return b.js.CreateStream(ctx, want) })
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				continue // made meanwhile by another declarer: check it
			}
			return err
		}
		if err != nil {
			return err
		}
		have := s.CachedInfo().Config
		if len(have.Subjects) != 1 || have.Subjects[0] != topic {
			return fmt.Errorf("stream %s exists with subjects %q, not the topic", name, have.Subjects)
		}
		if have.Duplicates == want.Duplicates && have.MaxAge == want.MaxAge {
			return nil
		}
		have.Duplicates, have.MaxAge = want.Duplicates, want.MaxAge
		_, err = request(ctx, func(ctx context.Context) (jetstream.Stream, error) { return b.js.UpdateStream(ctx, have) })
		return err
	}
}

// request makes one request to the JetStream API with ctx bounded by
// apiTimeout.
func request[T any](ctx context.Context, do func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	return do(ctx)
}

// streamName returns the name of topic's stream (see Declare).
func (b *Broker) streamName(topic string) string {
	return b.cfg.StreamPrefix + safeName(topic)
}

// maxNameLen bounds the part of a stream or consumer name taken from a
// topic or group, which the server also uses as a directory name.
const maxNameLen = 64

// nameRune reports whether r may appear in a stream or consumer name as is.
func nameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'
}

// safeName returns s made a valid stream or consumer name: see Declare.
func safeName(s string) string {
	var sb strings.Builder
	changed := false
	for _, r := range s {
		if nameRune(r) {
			sb.WriteRune(r)
		} else {
			sb.WriteByte('_')
			changed = true
		}
	}
	out := sb.String()
	if len(out) > maxNameLen {
		out, changed = out[:maxNameLen], true
	}
	if changed {
		sum := sha256.Sum256([]byte(s))
		out += "_" + hex.EncodeToString(sum[:4])
	}
	return out
}

// checkTopic returns an error unless topic is a NATS subject that a stream
// can take as its own: dot-separated tokens, no wildcard, no white space,
// not one of the server's own ($JS..., $SYS...).
func checkTopic(topic string) error {
	switch {
	case topic == "":
		return errors.New("broker/nats: empty topic")
	case strings.HasPrefix(topic, "$"):
		return fmt.Errorf("broker/nats: topic %q: names beginning with $ are the server's", topic)
	case strings.ContainsAny(topic, "*>"):
		return fmt.Errorf("broker/nats: topic %q has a wildcard", topic)
	}
	for _, r := range topic {
		if r <= ' ' || r == 0x7f {
			return fmt.Errorf("broker/nats: topic %q has white space or a control character", topic)
		}
	}
	for _, tok := range strings.Split(topic, ".") {
		if tok == "" {
			return fmt.Errorf("broker/nats: topic %q has an empty token", topic)
		}
	}
	return nil
}

// checkHeaders returns an error unless the headers of message i can be
// sent as NATS headers and received as they are.
func checkHeaders(i int, m broker.Message) error {
	for k, v := range m.Headers {
		bad := ""
		switch {
		case k == "":
			bad = "an empty name"
		case strings.EqualFold(k, KeyHeader):
			bad = "a name reserved for Message.Key"
		case len(k) >= 5 && strings.EqualFold(k[:5], "Nats-"):
			bad = "a name reserved by NATS"
		case strings.ContainsFunc(k, func(r rune) bool { return r <= ' ' || r == ':' || r == 0x7f }):
			bad = "white space, a control character or ':' in its name"
		case strings.ContainsAny(v, "\r\n"):
			bad = "a line break in its value"
		}
		if bad != "" {
			return fmt.Errorf("broker/nats: message %d (%s): header %q has %s", i, m.ID, k, bad)
		}
	}
	return nil
}
