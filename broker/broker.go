// Package broker is the seam between weir and a message broker: one
// interface, implemented by the drivers in its subpackages (broker/nats for
// NATS JetStream, broker/rabbitmq for RabbitMQ, and an embedded default),
// and one conformance suite, broker/brokertest, that every driver passes
// against the real server.
//
// Delivery is at least once: a message is acknowledged only after its
// handler returned nil, so a consumer that dies mid-message has it
// delivered again. Every message carries a stable id (an outbox row's) so
// that a duplicate, published again after a crash or delivered again after
// a lost acknowledgement, can be recognised downstream (an inbox).
package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/weirhq/weir/internal/defaults"
)

// Message is a message to publish.
type Message struct {
	// ID identifies the message for deduplication: RabbitMQ's message-id,
	// NATS's Nats-Msg-Id. Required; keep it stable across republishes.
	ID string
	// Topic is where the message goes: a durable queue (RabbitMQ) or a
	// stream subject (NATS) that Declare made. Required.
	Topic string
	// Key orders messages: those with one key are published in the order
	// given. Optional; carried to consumers.
	Key string
	// Body is the payload.
	Body []byte
	// Headers are carried to consumers. Names are case-sensitive.
	Headers map[string]string
}

// Delivery is a message as a consumer receives it.
type Delivery struct {
	Message
	// Attempt is the delivery's number: 1 the first time, more when the
	// broker delivers it again (the handler failed, or its consumer died
	// before acknowledging).
	Attempt int
}

// Handler handles one delivery. Nil acknowledges it; an error has it
// delivered again, unless the error is marked with retry.Permanent or the
// message reached ConsumeOptions.MaxDeliveries: then it is handed to
// ConsumeOptions.DeadLetter and removed from the broker.
type Handler func(ctx context.Context, d Delivery) error

// DeadLetterFunc receives a message the broker gives up on, with the
// reason (ReasonMaxDeliveries, ReasonPermanent) and the last handler error
// (nil when the consumer died each time). The message is removed from the
// broker only after it returns nil.
type DeadLetterFunc func(ctx context.Context, d Delivery, reason string, lastErr error) error

// Reasons a message is dead-lettered.
const (
	ReasonMaxDeliveries = "max_deliveries_exceeded"
	ReasonPermanent     = "non_retryable"
)

// Defaults of ConsumeOptions.
const (
	DefaultGroup         = "weir"
	DefaultMaxDeliveries = 5
	DefaultAckWait       = 30 * time.Second
	DefaultPrefetch      = 64
)

// ConsumeOptions configures a consumer. Its zero value works.
type ConsumeOptions struct {
	// Group names the durable consumer: consumers of one group share the
	// topic's messages. Default "weir".
	Group string
	// MaxDeliveries is how many times a message is delivered before it is
	// dead-lettered. Default 5.
	MaxDeliveries int
	// AckWait is how long a delivery may go unacknowledged before the
	// broker delivers it again (where the broker has such a timer; a
	// RabbitMQ delivery returns when its channel closes). Default 30 s.
	AckWait time.Duration
	// Prefetch bounds the deliveries in flight. Default 64.
	Prefetch int
	// DeadLetter receives the messages given up on. Required.
	DeadLetter DeadLetterFunc
}

// WithDefaults returns o with its defaults, or an error naming the bad
// field.
func (o ConsumeOptions) WithDefaults() (ConsumeOptions, error) {
	if err := cmp.Or(
		defaults.Set("broker: ConsumeOptions.MaxDeliveries", &o.MaxDeliveries, DefaultMaxDeliveries),
		defaults.Set("broker: ConsumeOptions.AckWait", &o.AckWait, DefaultAckWait),
		defaults.Set("broker: ConsumeOptions.Prefetch", &o.Prefetch, DefaultPrefetch),
	); err != nil {
		return o, err
	}
	if o.DeadLetter == nil {
		return o, errors.New("broker: ConsumeOptions.DeadLetter is nil; a message given up on must go somewhere")
	}
	o.Group = cmp.Or(o.Group, DefaultGroup)
	return o, nil
}

// Broker is a message broker.
type Broker interface {
	// Declare makes the durable queues or streams of the topics, with
	// what dead-lettering needs; declaring again is a no-op.
	Declare(ctx context.Context, topics ...string) error
	// Publish publishes msgs in order and returns once the broker has
	// confirmed each (stored durably). It returns nil when every message
	// was confirmed, or a *PublishError saying which were not (those may
	// or may not have reached the broker: publish them again with the
	// same ids). It reconnects, with backoff, after a lost connection.
	Publish(ctx context.Context, msgs []Message) error
	// Consume runs h on the topic's messages as a member of opts.Group
	// until ctx ends, then returns ctx's error (deliveries in flight are
	// not acknowledged: the broker delivers them again). It reconnects,
	// with backoff, after a lost connection, and returns another error
	// only when it cannot consume at all (a bad option, a topic never
	// declared).
	Consume(ctx context.Context, topic string, opts ConsumeOptions, h Handler) error
	// Features declares what the broker does itself.
	Features() Features
	// Close closes the broker's connections.
	Close() error
}

// ErrNotConnected is wrapped by the error of a call made while the broker
// has no connection to its server: not yet (a driver opened while the
// server was unreachable) or not since it was lost. The driver keeps
// connecting in the background; the same call can succeed once it has.
var ErrNotConnected = errors.New("broker: not connected to the server")

// Connectivity is implemented by a Broker that knows the state of its
// connection to the server (both drivers do). An outbox relay whose
// breaker opened probes such a broker as soon as it has reconnected.
type Connectivity interface {
	// Connected reports whether the broker has a connection now, and how
	// many connections it has made since it was opened: a count that
	// changed between two calls means it connected again in between.
	Connected() (up bool, connects uint64)
}

// Features are what a driver's broker does itself.
type Features struct {
	// Name is the driver's name.
	Name string
	// Dedupe is true when the broker drops a message published again with
	// an id it has seen within DedupeWindow (NATS JetStream); consumers
	// dedupe through an inbox either way.
	Dedupe       bool
	DedupeWindow time.Duration
}

// PublishError is Publish's error when some messages were not confirmed.
type PublishError struct {
	// Errs holds, for each message given to Publish, nil when it was
	// confirmed, or why it was not.
	Errs []error
}

func (e *PublishError) Error() string {
	var failed []string
	var first error
	for i, err := range e.Errs {
		if err != nil {
			failed = append(failed, fmt.Sprint(i))
			if first == nil {
				first = err
			}
		}
	}
	return fmt.Sprintf("broker: %d of %d messages not confirmed (%s): %v", len(failed), len(e.Errs), strings.Join(failed, ", "), first)
}

// Unwrap returns the errors of the messages not confirmed.
func (e *PublishError) Unwrap() []error {
	var out []error
	for _, err := range e.Errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// CheckMessages returns an error naming the first message of msgs that
// lacks an id or a topic. Drivers call it before publishing anything.
func CheckMessages(msgs []Message) error {
	for i, m := range msgs {
		switch {
		case m.ID == "":
			return fmt.Errorf("broker: message %d has no ID", i)
		case m.Topic == "":
			return fmt.Errorf("broker: message %d (%s) has no Topic", i, m.ID)
		}
	}
	return nil
}
