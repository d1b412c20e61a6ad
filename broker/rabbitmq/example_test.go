package rabbitmq_test

import (
	"context"
	"log"
	"log/slog"
	"time"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/broker/rabbitmq"
)

// Example publishes a message and consumes it. It needs a RabbitMQ at the
// default URL, so it is compiled but not run.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := rabbitmq.Open(ctx, rabbitmq.Config{
		URL:    "amqp://guest:guest@127.0.0.1:5672/",
		Logger: slog.Default(),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	if err := b.Declare(ctx, "orders"); err != nil {
		log.Fatal(err)
	}
	err = b.Publish(ctx, []broker.Message{{
		ID: "order-42", Topic: "orders", Key: "customer-7", Body: []byte(`{"total":12}`),
		Headers: map[string]string{"kind": "order.created"},
	}})
	if err != nil {
		log.Fatal(err) // a *broker.PublishError: publish those again with the same ids
	}

	err = b.Consume(ctx, "orders", broker.ConsumeOptions{
		DeadLetter: func(ctx context.Context, d broker.Delivery, reason string, lastErr error) error {
			log.Printf("giving up on %s after %d attempts (%s): %v", d.ID, d.Attempt, reason, lastErr)
			return nil
		},
	}, func(ctx context.Context, d broker.Delivery) error {
		log.Printf("%s: %s (attempt %d)", d.ID, d.Body, d.Attempt)
		return nil
	})
	log.Print(err) // the context's error once it ends
}
