package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/weirhq/weir/broker/rabbitmq"
)

func rabbitSides() sides {
	return sides{
		open: openRabbitTopic,
		raw:  runRawRabbit,
		relayDesc: "outbox.Relay (SQLite store, WAL) → broker/rabbitmq, to a topic declared by Declare (durable quorum queue with delivery limit and dead-lettering); " +
			"messages/s = n / (Run started → its marks have recorded n published)",
		rawDesc: "amqp091-go on one channel in confirm mode, to a durable quorum queue; persistent, mandatory, message-id, key in x-weir-key; " +
			"-batch PublishWithDeferredConfirm calls, then wait for their confirms; messages/s = n / (first publish → last confirm)",
	}
}

// openRabbitTopic opens weir's RabbitMQ driver and declares a fresh topic
// through it.
func openRabbitTopic(ctx context.Context, s settings, logger *slog.Logger) (*weirTopic, error) {
	b, err := rabbitmq.Open(ctx, rabbitmq.Config{URL: s.url, Logger: logger, ConnectionName: "relaybench"})
	if err != nil {
		return nil, err
	}
	admin, err := amqp.DialConfig(s.urlOr(rabbitmq.DefaultURL), amqp.Config{Properties: amqp.Table{"connection_name": "relaybench admin"}})
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("admin connection: %w", err)
	}
	topic := topicName("relay")
	wt := &weirTopic{
		broker: b,
		topic:  topic,
		stored: func(context.Context) (int, error) { return queueLength(admin, topic) },
		remove: func(context.Context) error {
			err := deleteQueues(admin, topic, topic+rabbitmq.DLQSuffix)
			return errors.Join(err, b.Close(), admin.Close())
		},
	}
	if err := b.Declare(ctx, topic); err != nil {
		return nil, errors.Join(err, wt.remove(ctx))
	}
	return wt, nil
}

// queueLength returns the messages ready in queue.
func queueLength(conn *amqp.Connection, queue string) (int, error) {
	ch, err := conn.Channel()
	if err != nil {
		return 0, err
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	return q.Messages, err
}

// deleteQueues deletes the queues; one that does not exist is no error.
func deleteQueues(conn *amqp.Connection, queues ...string) error {
	var errs []error
	for _, q := range queues {
		// A failed delete closes its channel: one channel each.
		ch, err := conn.Channel()
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		if _, err := ch.QueueDelete(q, false, false, false); err != nil {
			errs = append(errs, fmt.Errorf("delete queue %s: %w", q, err))
		}
		ch.Close()
	}
	return errors.Join(errs...)
}

// runRawRabbit publishes the run's messages with amqp091-go alone.
func runRawRabbit(ctx context.Context, s settings, msgs []message, _ *slog.Logger) (r result, err error) {
	r = result{system: "raw", messages: s.n}
	conn, err := amqp.DialConfig(s.urlOr(rabbitmq.DefaultURL), amqp.Config{Properties: amqp.Table{"connection_name": "relaybench raw"}})
	if err != nil {
		return r, fmt.Errorf("raw: dial: %w", err)
	}
	defer conn.Close()
	queue := topicName("raw")
	setup, err := conn.Channel()
	if err != nil {
		return r, fmt.Errorf("raw: open channel: %w", err)
	}
	_, err = setup.QueueDeclare(queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
	setup.Close()
	if err != nil {
		return r, fmt.Errorf("raw: declare queue: %w", err)
	}
	defer func() {
		if derr := deleteQueues(conn, queue); derr != nil {
			err = errors.Join(err, fmt.Errorf("raw: %w", derr))
		}
	}()

	ch, err := conn.Channel()
	if err != nil {
		return r, fmt.Errorf("raw: open channel: %w", err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		return r, fmt.Errorf("raw: confirm mode: %w", err)
	}
	var returned atomic.Int64
	returns := ch.NotifyReturn(make(chan amqp.Return, 1024))
	go func() {
		for range returns {
			returned.Add(1)
		}
	}()

	send := func(i int, m message) (*amqp.DeferredConfirmation, error) {
		var headers amqp.Table
		if m.key != "" {
			headers = amqp.Table{rabbitmq.HeaderKey: m.key}
		}
		return ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, amqp.Publishing{
			Headers:      headers,
			DeliveryMode: amqp.Persistent,
			MessageId:    "raw-" + strconv.Itoa(i),
			Timestamp:    time.Now(),
			Body:         m.body,
		})
	}
	wait := func(i int, dc *amqp.DeferredConfirmation) error {
		acked, err := dc.WaitContext(ctx)
		if err != nil {
			return fmt.Errorf("raw: confirm of %d: %w", i, err)
		}
		if !acked {
			return fmt.Errorf("raw: message %d nacked", i)
		}
		return nil
	}
	if err := publishRaw(s, msgs, &r, send, wait); err != nil {
		return r, err
	}
	if n := returned.Load(); n > 0 {
		return r, fmt.Errorf("raw: %d messages returned unroutable", n)
	}
	held, err := queueLength(conn, queue)
	if err := checkRaw(s, queue, held, err); err != nil {
		return r, err
	}
	r.note = fmt.Sprintf("last confirm at %.3fs; %s holds %d", r.elapsed.Seconds(), queue, held)
	return r, nil
}
