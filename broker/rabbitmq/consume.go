package rabbitmq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"reflect"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/resilience/retry"
)

// Consume runs h on the topic's messages until ctx ends, then returns
// ctx's error. It also consumes the topic's dead-letter queue, where
// RabbitMQ puts a message returned more than Config.DeliveryLimit times,
// and hands each such message to opts.DeadLetter with reason
// broker.ReasonMaxDeliveries and a nil error.
//
// A delivery's Attempt is RabbitMQ's x-delivery-count plus one. h
// returning nil acknowledges the delivery; an error has it delivered again
// (a basic.reject with requeue), unless the error is retry.Permanent or the
// delivery was attempt opts.MaxDeliveries: then opts.DeadLetter gets it
// and it is acknowledged once that returns nil.
//
// The consumers of a topic share its queue whatever their opts.Group,
// which only names their consumer tags: RabbitMQ's queue is the group.
// opts.AckWait is not used: a RabbitMQ delivery comes back when its
// consumer's channel closes. Deliveries are handled one at a time, in the
// order received; run Consume more than once for concurrency.
//
// After a lost connection Consume subscribes again, with backoff. It
// returns another error only for a bad option or a topic that was never
// declared (wrapping ErrNotDeclared), or ErrClosed after Close.
func (b *Broker) Consume(ctx context.Context, topic string, opts broker.ConsumeOptions, h broker.Handler) error {
	opts, err := opts.WithDefaults()
	if err != nil {
		return err
	}
	switch {
	case topic == "":
		return errors.New("rabbitmq: consume: empty topic")
	case h == nil:
		return errors.New("rabbitmq: consume: nil handler")
	}
	if opts.MaxDeliveries > b.cfg.DeliveryLimit+1 {
		b.log.Warn("rabbitmq: MaxDeliveries is above the queues' delivery limit: RabbitMQ dead-letters a failing message first, without its last error",
			"topic", topic, "max_deliveries", opts.MaxDeliveries, "delivery_limit", b.cfg.DeliveryLimit)
	}
	c := &consumer{b: b, topic: topic, opts: opts, h: h, tag: consumerTag(opts.Group)}
	subscribed := false
	for n := 1; ; n++ {
		err := c.run(ctx, &subscribed)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrClosed) || (!c.resubscribe && errors.Is(err, ErrNotDeclared)) {
			return err
		}
		if subscribed {
			// The count restarts after a subscription that stood.
			n, subscribed, c.resubscribe = 1, false, true
		}
		b.log.Warn("rabbitmq: consumer interrupted; subscribing again", "topic", topic, "attempt", n, "err", err)
		t := b.cfg.Clock.NewTimer(b.cfg.Reconnect.Next(n, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		}
	}
}

type consumer struct {
	b     *Broker
	topic string
	opts  broker.ConsumeOptions
	h     broker.Handler
	tag   string
	// resubscribe is set once a subscription succeeded: after that, a
	// missing queue is taken for one still recovering, not an error.
	resubscribe bool
	// dlqFailures counts consecutive DeadLetter failures on the
	// dead-letter queue, for the backoff before it goes back.
	dlqFailures int
}

// consumerTag returns a consumer tag naming the group, unique to the
// process.
func consumerTag(group string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return group + "." + hex.EncodeToString(b)
}

// run subscribes once and handles deliveries until ctx ends or the channel
// closes. subscribed is set once the subscription stands.
func (c *consumer) run(ctx context.Context, subscribed *bool) error {
	conn, err := c.b.sub.get(ctx)
	if err != nil {
		return err
	}
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	// Closing the channel returns the deliveries not acknowledged to
	// their queue, and RabbitMQ delivers them again.
	defer ch.Close()
	dlq := c.topic + DLQSuffix
	for _, q := range []string{c.topic, dlq} {
		if _, err := ch.QueueDeclarePassive(q, true, false, false, false, nil); err != nil {
			var ae *amqp.Error
			if errors.As(err, &ae) && ae.Code == amqp.NotFound && !c.resubscribe {
				return fmt.Errorf("rabbitmq: consume %s: no queue %q: %w", c.topic, q, ErrNotDeclared)
			}
			return fmt.Errorf("check queue %q: %w", q, err)
		}
	}
	if err := ch.Qos(c.opts.Prefetch, 0, false); err != nil {
		return fmt.Errorf("qos: %w", err)
	}
	msgs, err := ch.Consume(c.topic, c.tag, false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("consume queue %q: %w", c.topic, err)
	}
	dead, err := ch.Consume(dlq, c.tag+DLQSuffix, false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("consume queue %q: %w", dlq, err)
	}
	*subscribed = true
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case d, ok := <-msgs:
			if !ok {
				return fmt.Errorf("subscription to %q ended (channel closed or consumer cancelled)", c.topic)
			}
			if err := c.handle(ctx, d); err != nil {
				return err
			}
		case d, ok := <-dead:
			if !ok {
				return fmt.Errorf("subscription to %q ended (channel closed or consumer cancelled)", dlq)
			}
			if err := c.handleDead(ctx, d); err != nil {
				return err
			}
		}
	}
}

// handle runs the handler on one delivery and settles it. An error means
// the channel is unusable (or ctx ended).
func (c *consumer) handle(ctx context.Context, d amqp.Delivery) error {
	del := c.delivery(d)
	herr := c.h(ctx, del)
	if herr == nil {
		return ack(d)
	}
	if ctx.Err() != nil {
		// In flight when the consumer stops: not settled, so it comes back
		// when the channel closes.
		return ctx.Err()
	}
	var reason string
	switch {
	case retry.IsPermanent(herr):
		reason = broker.ReasonPermanent
	case del.Attempt >= c.opts.MaxDeliveries:
		reason = broker.ReasonMaxDeliveries
	default:
		return requeue(d)
	}
	if err := c.opts.DeadLetter(ctx, del, reason, herr); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Delivered again, it fails again and comes back here; past the
		// delivery limit RabbitMQ moves it to the dead-letter queue.
		c.b.log.Error("rabbitmq: dead letter failed; the message will be delivered again",
			"topic", c.topic, "msg_id", del.ID, "attempt", del.Attempt, "reason", reason, "err", err)
		return requeue(d)
	}
	return ack(d)
}

// handleDead hands a message of the dead-letter queue to DeadLetter. Its
// Attempt is Config.DeliveryLimit+1 when RabbitMQ dead-lettered it for the
// delivery limit.
func (c *consumer) handleDead(ctx context.Context, d amqp.Delivery) error {
	del := c.delivery(d)
	if reason, _ := d.Headers["x-first-death-reason"].(string); reason == "delivery_limit" {
		// The deliveries it had in its own queue, which RabbitMQ does not
		// carry over.
		del.Attempt = c.b.cfg.DeliveryLimit + 1
	}
	if err := c.opts.DeadLetter(ctx, del, broker.ReasonMaxDeliveries, nil); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c.dlqFailures++
		c.b.log.Error("rabbitmq: dead letter failed; trying again",
			"topic", c.topic, "msg_id", del.ID, "attempt", c.dlqFailures, "err", err)
		// The dead-letter queue has no delivery limit: wait before the
		// message comes back rather than spin on it.
		t := c.b.cfg.Clock.NewTimer(c.b.cfg.Reconnect.Next(c.dlqFailures, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		}
		return requeue(d)
	}
	c.dlqFailures = 0
	return ack(d)
}

// delivery converts an AMQP delivery.
func (c *consumer) delivery(d amqp.Delivery) broker.Delivery {
	headers := make(map[string]string, len(d.Headers))
	key := ""
	for k, v := range d.Headers {
		switch {
		case k == HeaderKey:
			key, _ = v.(string)
		case reservedHeader(k):
		default:
			if s, ok := v.(string); ok {
				headers[k] = s
			} else {
				headers[k] = fmt.Sprint(v)
			}
		}
	}
	return broker.Delivery{
		Message: broker.Message{
			ID: d.MessageId, Topic: c.topic, Key: key, Body: d.Body, Headers: headers,
		},
		Attempt: attempt(d.Headers),
	}
}

// attempt returns the delivery's number: RabbitMQ's x-delivery-count, the
// deliveries that went back to the queue before, plus one. The server
// sends it as a signed integer; any integer type is read.
func attempt(h amqp.Table) int {
	var n int64
	switch v := reflect.ValueOf(h["x-delivery-count"]); {
	case v.CanInt():
		n = v.Int()
	case v.CanUint():
		n = int64(min(v.Uint(), math.MaxInt64))
	}
	return int(max(n, 0)) + 1
}

func ack(d amqp.Delivery) error {
	if err := d.Ack(false); err != nil {
		return fmt.Errorf("ack %s: %w", d.MessageId, err)
	}
	return nil
}

// requeue returns a delivery whose handling failed to its queue. It uses
// basic.reject, not basic.nack: from RabbitMQ 4.3 on, only a reject (or
// the channel closing) counts as a failed delivery in x-delivery-count and
// toward the delivery limit; before 4.3 both do.
func requeue(d amqp.Delivery) error {
	if err := d.Reject(true); err != nil {
		return fmt.Errorf("reject %s: %w", d.MessageId, err)
	}
	return nil
}
