package rabbitmq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/internal/defaults"
	"github.com/weirhq/weir/resilience/backoff"
)

// Defaults of Config.
const (
	DefaultURL                = "amqp://guest:guest@127.0.0.1:5672/"
	DefaultDeliveryLimit      = 20
	DefaultDeadLetterExchange = "weir.dlx"
	DefaultPublishTimeout     = 30 * time.Second
	DefaultDialTimeout        = 10 * time.Second
	DefaultConnectionName     = "weir"
)

// DefaultReconnect is the backoff between attempts to dial again after a
// lost connection: 100 ms doubling to 5 s, ±20%.
var DefaultReconnect = backoff.Exponential(100*time.Millisecond, 2, 5*time.Second)

// DLQSuffix is appended to a topic to name its dead-letter queue.
const DLQSuffix = ".dlq"

// Errors.
var (
	// ErrNotDeclared is wrapped by the error of a message published to a
	// topic that has no queue (RabbitMQ returned it as unroutable), and by
	// Consume's error for such a topic.
	ErrNotDeclared = errors.New("topic not declared")
	// ErrQueueMismatch is wrapped by Declare's error when a queue of the
	// topic's name exists with other arguments than the ones Declare would
	// give it (another type, delivery limit or dead-letter exchange).
	// RabbitMQ cannot change a queue's arguments: delete the queue or
	// declare with a matching Config.
	ErrQueueMismatch = errors.New("queue exists with other arguments")
	// ErrNacked is wrapped by the error of a message RabbitMQ refused to
	// store (a negative confirm), or whose confirm was lost with its channel.
	ErrNacked = errors.New("not confirmed by the broker")
	// ErrClosed is returned by the methods of a closed Broker.
	ErrClosed = errors.New("rabbitmq: broker closed")
)

// Config configures a Broker. Its zero value connects to a local RabbitMQ
// as guest.
type Config struct {
	// URL is the AMQP URL of the server. Default
	// amqp://guest:guest@127.0.0.1:5672/.
	URL string
	// Logger receives connection losses, reconnects and dead-letter
	// failures. Default: logs are discarded.
	Logger *slog.Logger
	// DeliveryLimit is the x-delivery-limit Declare gives each topic's
	// quorum queue: RabbitMQ dead-letters a message to the topic's
	// dead-letter queue once it was returned (rejected with requeue, or its
	// consumer's channel closed) more than this many times, and Consume
	// hands it to ConsumeOptions.DeadLetter with reason
	// broker.ReasonMaxDeliveries and a nil error. It is the broker's own
	// guard against a message that crashes every consumer; keep it at or
	// above the consumers' MaxDeliveries so that they, which know the
	// handler's last error, see a failing message first. Default 20
	// (broker.DefaultMaxDeliveries is 5). Must not be negative.
	DeliveryLimit int
	// DeadLetterExchange is the direct exchange through which RabbitMQ
	// dead-letters a topic's messages to the topic's dead-letter queue.
	// Default "weir.dlx".
	DeadLetterExchange string
	// PublishTimeout bounds one Publish call, the wait for a connection
	// and for the confirms included, when ctx has no earlier deadline.
	// Default 30 s. Must not be negative.
	PublishTimeout time.Duration
	// DialTimeout bounds one dial, the AMQP handshake included. Default
	// 10 s. Must not be negative.
	DialTimeout time.Duration
	// Reconnect is the backoff between dials after a lost connection, and
	// between a consumer's attempts to subscribe again. Default
	// DefaultReconnect (100 ms doubling to 5 s).
	Reconnect backoff.Backoff
	// ConnectionName is shown in RabbitMQ's management tools, suffixed
	// with "publish" or "consume". Default "weir".
	ConnectionName string
	// RetryFirstConnect makes Open return a Broker even when the server
	// cannot be reached: it goes on dialling in the background, with
	// Reconnect's backoff, and until its first connection Declare and
	// Publish fail at once with an error wrapping broker.ErrNotConnected
	// (Consume subscribes again with backoff). After that, as after any
	// lost connection, they wait for the next connection within their
	// context (Publish: and PublishTimeout), their error then wrapping
	// broker.ErrNotConnected too. A bad URL, or a server that refuses the
	// credentials, the virtual host or the TLS setup, still fails Open.
	// Default false: Open fails when it cannot connect.
	RetryFirstConnect bool
	// Clock is the source of time for backoff waits. Default clock.Real.
	Clock clock.Clock
}

// withDefaults returns c with its defaults, or an error naming the bad
// field.
func (c Config) withDefaults() (Config, error) {
	if err := cmp.Or(
		defaults.Set("rabbitmq: Config.DeliveryLimit", &c.DeliveryLimit, DefaultDeliveryLimit),
		defaults.Set("rabbitmq: Config.PublishTimeout", &c.PublishTimeout, DefaultPublishTimeout),
		defaults.Set("rabbitmq: Config.DialTimeout", &c.DialTimeout, DefaultDialTimeout),
	); err != nil {
		return c, err
	}
	c.URL = cmp.Or(c.URL, DefaultURL)
	if _, err := amqp.ParseURI(c.URL); err != nil {
		// ParseURI's errors do not repeat the URL, which may hold a password.
		return c, fmt.Errorf("rabbitmq: Config.URL: %w", err)
	}
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	c.DeadLetterExchange = cmp.Or(c.DeadLetterExchange, DefaultDeadLetterExchange)
	if c.Reconnect == (backoff.Backoff{}) {
		c.Reconnect = DefaultReconnect
	}
	if err := c.Reconnect.Validate(); err != nil {
		return c, fmt.Errorf("rabbitmq: Config.Reconnect: %w", err)
	}
	if c.ConnectionName == "" {
		c.ConnectionName = DefaultConnectionName
	}
	c.Clock = clock.Or(c.Clock)
	return c, nil
}

// Broker is a RabbitMQ broker. It keeps two connections, one to publish
// and one to consume (so that RabbitMQ's flow control on publishers never
// stalls acknowledgements), and dials each again when it is lost. It is
// safe for concurrent use.
type Broker struct {
	cfg Config
	log *slog.Logger
	pub *session
	sub *session

	// pubSem serializes publishers on pubCh; a channel rather than a mutex
	// so that waiting for it respects ctx.
	pubSem  chan struct{}
	pubCh   *amqp.Channel // guarded by pubSem; nil or closed: open another
	returns chan amqp.Return

	closeOnce sync.Once
}

var (
	_ broker.Broker       = (*Broker)(nil)
	_ broker.Connectivity = (*Broker)(nil)
)

// Open connects to RabbitMQ and returns a Broker. It fails when the server
// cannot be reached within ctx, unless cfg.RetryFirstConnect lets it go on
// dialling in the background, or when it refuses the credentials; after
// that, the Broker reconnects by itself.
func Open(ctx context.Context, cfg Config) (*Broker, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, log: cfg.Logger, pubSem: make(chan struct{}, 1)}
	b.pub, err = openSession(ctx, cfg, "publish", cfg.RetryFirstConnect, b.checkServer)
	if err != nil {
		return nil, err
	}
	b.sub, err = openSession(ctx, cfg, "consume", cfg.RetryFirstConnect, nil)
	if err != nil {
		b.pub.close()
		return nil, err
	}
	return b, nil
}

// checkServer warns, at the first connection, about a server that cannot
// dead-letter at least once.
func (b *Broker) checkServer(conn *amqp.Connection) {
	if v := serverVersion(conn); !versionAtLeast(v, 3, 10) {
		b.log.Warn("rabbitmq: the server predates 3.10: dead-lettering is at most once (no x-dead-letter-strategy=at-least-once), so a message RabbitMQ dead-letters can be lost if the dead-letter queue is unavailable",
			"version", v)
	}
}

// atLeastOnce reports whether the server dead-letters at least once
// (RabbitMQ 3.10 and later), as its first connection announced.
func (b *Broker) atLeastOnce() bool {
	return versionAtLeast(b.ServerVersion(), 3, 10)
}

// Connected reports whether the Broker has its publishing connection now,
// and how many such connections it has made since Open; see
// broker.Connectivity.
func (b *Broker) Connected() (bool, uint64) {
	return b.pub.state()
}

// Features reports that RabbitMQ does not drop duplicates: consumers
// dedupe through an inbox.
func (b *Broker) Features() broker.Features {
	return broker.Features{Name: "rabbitmq", Dedupe: false}
}

// Close closes the Broker's connections. Consume calls in progress return
// ErrClosed; deliveries in flight go back to their queues. It is safe to
// call twice.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		b.pub.close()
		b.sub.close()
	})
	return nil
}

// ServerVersion returns the RabbitMQ version the server announced at the
// Broker's first connection, e.g. "3.13.7"; "" before it.
func (b *Broker) ServerVersion() string { return serverVersion(b.pub.firstConn()) }

// queueArgs returns the arguments of a topic's queue.
func (b *Broker) queueArgs(topic string) amqp.Table {
	args := amqp.Table{
		"x-queue-type":              "quorum",
		"x-delivery-limit":          int64(b.cfg.DeliveryLimit),
		"x-dead-letter-exchange":    b.cfg.DeadLetterExchange,
		"x-dead-letter-routing-key": topic,
	}
	if b.atLeastOnce() {
		// At-least-once dead-lettering needs reject-publish: RabbitMQ keeps
		// a dead-lettered message in the source queue until the dead-letter
		// queue confirmed it.
		args["x-dead-letter-strategy"] = "at-least-once"
		args["x-overflow"] = "reject-publish"
	}
	return args
}

// Declare makes, for each topic, a durable quorum queue named by the topic
// (with the delivery limit and dead-lettering of Config), its dead-letter
// queue topic+".dlq", and the binding between them through the
// dead-letter exchange. Declaring again is a no-op; a queue that exists
// with other arguments gives an error wrapping ErrQueueMismatch. Without a
// connection it fails with an error wrapping broker.ErrNotConnected: at
// once before the first (Config.RetryFirstConnect), after waiting for the
// next within ctx after a lost one.
func (b *Broker) Declare(ctx context.Context, topics ...string) error {
	for _, t := range topics {
		if t == "" {
			return errors.New("rabbitmq: declare: empty topic")
		}
	}
	conn, err := b.pub.get(ctx)
	if err != nil {
		return fmt.Errorf("rabbitmq: declare: %w", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("rabbitmq: declare: open channel: %w", err)
	}
	defer ch.Close()
	// The calls below do not take ctx; closing the channel when it ends
	// makes the one in progress return.
	stop := context.AfterFunc(ctx, func() { ch.Close() })
	defer stop()
	wrap := func(what, name string, err error) error {
		if ctx.Err() != nil {
			return fmt.Errorf("rabbitmq: declare %s %q: %w", what, name, ctx.Err())
		}
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.PreconditionFailed {
			return fmt.Errorf("rabbitmq: declare %s %q: %w: %w", what, name, ErrQueueMismatch, err)
		}
		return fmt.Errorf("rabbitmq: declare %s %q: %w", what, name, err)
	}
	if err := ch.ExchangeDeclare(b.cfg.DeadLetterExchange, amqp.ExchangeDirect, true, false, false, false, nil); err != nil {
		return wrap("exchange", b.cfg.DeadLetterExchange, err)
	}
	for _, t := range topics {
		dlq := t + DLQSuffix
		if _, err := ch.QueueDeclare(dlq, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
			return wrap("queue", dlq, err)
		}
		if err := ch.QueueBind(dlq, t, b.cfg.DeadLetterExchange, false, nil); err != nil {
			return wrap("binding of queue", dlq, err)
		}
		if _, err := ch.QueueDeclare(t, true, false, false, false, b.queueArgs(t)); err != nil {
			return wrap("queue", t, err)
		}
	}
	return nil
}

// serverVersion returns the version a server announced, or "".
func serverVersion(conn *amqp.Connection) string {
	if conn == nil {
		return ""
	}
	v, _ := conn.Properties["version"].(string)
	return v
}

// versionAtLeast reports whether version v ("3.10.8") is at least
// major.minor. An unreadable version counts as recent: servers old
// enough to lack the features all announce one.
func versionAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return true
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(strings.TrimFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil {
		return true
	}
	return ma > major || ma == major && mi >= minor
}
