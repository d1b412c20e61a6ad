package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/weirhq/weir/broker"
)

// HeaderKey is the AMQP header that carries Message.Key.
const HeaderKey = "x-weir-key"

// reservedHeader reports whether an AMQP header name belongs to weir or to
// RabbitMQ, which sets these on redelivery and dead-lettering: Publish
// refuses them in Message.Headers and deliveries leave them out.
func reservedHeader(name string) bool {
	switch name {
	case HeaderKey, "x-delivery-count", "x-death":
		return true
	}
	return strings.HasPrefix(name, "x-first-death-") || strings.HasPrefix(name, "x-last-death-")
}

// Publish publishes msgs, in order, persistent, to the default exchange
// with the topic as the routing key, on a channel in confirm mode, and
// waits for every confirm. Messages are published mandatory: one whose
// topic has no queue comes back from RabbitMQ and its error wraps
// ErrNotDeclared. A negative confirm, or a lost channel, gives an error
// wrapping ErrNacked; the end of ctx or of Config.PublishTimeout, one
// wrapping ctx's error. Without a connection (see Config.RetryFirstConnect)
// each message's error wraps broker.ErrNotConnected. Those errors are in
// a *broker.PublishError.
func (b *Broker) Publish(ctx context.Context, msgs []broker.Message) error {
	if err := broker.CheckMessages(msgs); err != nil {
		return err
	}
	for i, m := range msgs {
		for name := range m.Headers {
			if reservedHeader(name) {
				return fmt.Errorf("rabbitmq: message %d (%s) has header %q, a name reserved for RabbitMQ or weir", i, m.ID, name)
			}
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.PublishTimeout)
	defer cancel()
	errs := make([]error, len(msgs))
	failAll := func(err error) error {
		for i := range errs {
			errs[i] = err
		}
		return &broker.PublishError{Errs: errs}
	}

	select {
	case b.pubSem <- struct{}{}:
		defer func() { <-b.pubSem }()
	case <-ctx.Done():
		return failAll(fmt.Errorf("rabbitmq: wait for the publish channel: %w", ctx.Err()))
	}
	ch, returns, err := b.publishChannel(ctx)
	if err != nil {
		return failAll(fmt.Errorf("rabbitmq: publish: %w", err))
	}

	type route struct{ topic, id string }
	unroutable := map[route]bool{}
	drain := func() {
		for {
			select {
			case r, ok := <-returns:
				if !ok {
					return
				}
				unroutable[route{r.RoutingKey, r.MessageId}] = true
			default:
				return
			}
		}
	}

	confirms := make([]*amqp.DeferredConfirmation, len(msgs))
	now := b.cfg.Clock.Now()
	for i, m := range msgs {
		headers := make(amqp.Table, len(m.Headers)+1)
		for k, v := range m.Headers {
			headers[k] = v
		}
		if m.Key != "" {
			headers[HeaderKey] = m.Key
		}
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", m.Topic, true, false, amqp.Publishing{
			Headers:      headers,
			DeliveryMode: amqp.Persistent,
			MessageId:    m.ID,
			Timestamp:    now,
			Body:         m.Body,
		})
		if err != nil {
			// The channel is unusable: the rest are not sent.
			for j := i; j < len(msgs); j++ {
				errs[j] = fmt.Errorf("rabbitmq: publish %s: %w", msgs[j].ID, err)
			}
			break
		}
		confirms[i] = dc
		drain()
	}

	timedOut := false
	for i, dc := range confirms {
		if dc == nil {
			continue
		}
	wait:
		for !timedOut {
			select {
			case <-dc.Done():
				break wait
			case r, ok := <-returns:
				if ok {
					unroutable[route{r.RoutingKey, r.MessageId}] = true
				} else {
					returns = nil
				}
			case <-ctx.Done():
				timedOut = true
			}
		}
		switch {
		case dc.Acked():
		case timedOut:
			errs[i] = fmt.Errorf("rabbitmq: confirm of %s: %w", msgs[i].ID, ctx.Err())
		case ch.IsClosed():
			errs[i] = fmt.Errorf("rabbitmq: confirm of %s: channel closed before the confirm: %w", msgs[i].ID, ErrNacked)
		default:
			errs[i] = fmt.Errorf("rabbitmq: confirm of %s: %w", msgs[i].ID, ErrNacked)
		}
	}
	// RabbitMQ sends a message's basic.return before its basic.ack, and
	// amqp091-go hands returns over before it reads the next frame: every
	// return of this batch is in the channel by now.
	drain()
	if timedOut {
		// Late confirms and returns would confuse the next call.
		b.dropPublishChannel()
	}

	failed := false
	for i, m := range msgs {
		if errs[i] == nil && unroutable[route{m.Topic, m.ID}] {
			errs[i] = fmt.Errorf("rabbitmq: publish %s: no queue %q: %w", m.ID, m.Topic, ErrNotDeclared)
		}
		failed = failed || errs[i] != nil
	}
	if failed {
		return &broker.PublishError{Errs: errs}
	}
	return nil
}

// publishChannel returns the channel to publish on, opening one in
// confirm mode when there is none or it closed. The caller holds pubSem.
func (b *Broker) publishChannel(ctx context.Context) (*amqp.Channel, chan amqp.Return, error) {
	if b.pubCh != nil && !b.pubCh.IsClosed() {
		return b.pubCh, b.returns, nil
	}
	b.pubCh, b.returns = nil, nil
	conn, err := b.pub.get(ctx)
	if err != nil {
		return nil, nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		return nil, nil, fmt.Errorf("open channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		ch.Close()
		return nil, nil, fmt.Errorf("confirm mode: %w", err)
	}
	// Drained while Publish waits, and after each message it sends, so it
	// never fills: amqp091-go drops a return it cannot hand over in 5 s.
	returns := ch.NotifyReturn(make(chan amqp.Return, 1024))
	b.pubCh, b.returns = ch, returns
	return ch, returns, nil
}

// dropPublishChannel closes the publish channel. The caller holds pubSem.
func (b *Broker) dropPublishChannel() {
	if b.pubCh != nil {
		if err := b.pubCh.Close(); err != nil && !errors.Is(err, amqp.ErrClosed) {
			b.log.Debug("rabbitmq: close publish channel", "err", err)
		}
	}
	b.pubCh, b.returns = nil, nil
}
