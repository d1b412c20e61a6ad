package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/internal/crashpoint"
)

// consumeAckingFirst consumes topic's stream on the NATS server at url, as
// the durable consumer group, until ctx ends, and gets each message wrong
// on purpose: it acks the message, and waits for the server to confirm
// the ack, before h runs the message's transaction. A process killed
// between the two (crash point consumer.after-early-ack), or a
// transaction that fails, loses the message: the server will not deliver
// it again. WorkerConfig.AckBeforeCommit runs it, to check that the
// harness sees that bug; weir's consumers ack after h returns.
func consumeAckingFirst(ctx context.Context, url, topic, group string, h broker.Handler, logger *slog.Logger) error {
	nc, err := natsgo.Connect(url, natsgo.Name(workerID+"-acking-first"), natsgo.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("chaos: connect the consumer that acks first: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	stream, err := js.StreamNameBySubject(ctx, topic)
	if err != nil {
		return fmt.Errorf("chaos: the stream of %s: %w", topic, err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: group,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 5 * time.Second, MaxDeliver: maxDeliveries})
	if err != nil {
		return fmt.Errorf("chaos: the consumer that acks first: %w", err)
	}
	log := logger.With("consumer", group)
	for ctx.Err() == nil {
		batch, err := cons.Fetch(10, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			log.Warn("fetch", "err", err.Error())
			if err := sleep(ctx, 100*time.Millisecond); err != nil {
				return err
			}
			continue
		}
		for msg := range batch.Messages() {
			if err := msg.DoubleAck(ctx); err != nil {
				log.Warn("ack (the message will be delivered again)", "err", err.Error())
				continue
			}
			crashpoint.Hit(crashpoint.ConsumerAfterEarlyAck)
			d := broker.Delivery{Message: broker.Message{ID: msg.Headers().Get(jetstream.MsgIDHeader), Topic: msg.Subject(), Body: msg.Data()}, Attempt: 1}
			if meta, err := msg.Metadata(); err == nil {
				d.Attempt = int(meta.NumDelivered)
			}
			if err := h(ctx, d); err != nil {
				log.Error("a message acknowledged before it was handled failed: it is lost", "msg_id", d.ID, "err", err.Error())
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			log.Debug("fetch", "err", err.Error()) // the wait's end, mostly: fetched again
		}
	}
	return ctx.Err()
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
