package natsembed_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/broker/nats"
	"github.com/weirhq/weir/broker/nats/natsembed"
)

// Open runs weir's single-machine broker: a NATS server with JetStream
// inside the process, its streams kept in a directory. nats.Open takes a
// Config with the URL of a NATS deployment instead; the rest is the same.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "weir-nats-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := natsembed.Open(ctx, natsembed.Config{
		Dir:    dir,
		Broker: nats.Config{Logger: slog.New(slog.DiscardHandler)},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	if err := b.Declare(ctx, "orders.created"); err != nil {
		log.Fatal(err)
	}
	msg := broker.Message{ID: "order-42", Topic: "orders.created", Key: "customer-7",
		Body: []byte(`{"order":42}`), Headers: map[string]string{"source": "checkout"}}
	// The second publish of the same id is dropped by the stream's dedupe.
	for range 2 {
		if err := b.Publish(ctx, []broker.Message{msg}); err != nil {
			log.Fatal(err)
		}
	}

	consumeCtx, stop := context.WithCancel(ctx)
	err = b.Consume(consumeCtx, "orders.created", broker.ConsumeOptions{
		Group: "billing",
		DeadLetter: func(_ context.Context, d broker.Delivery, reason string, lastErr error) error {
			fmt.Println("dead letter:", d.ID, reason, lastErr)
			return nil
		},
	}, func(_ context.Context, d broker.Delivery) error {
		fmt.Printf("%s key=%s source=%s attempt=%d %s\n", d.ID, d.Key, d.Headers["source"], d.Attempt, d.Body)
		stop()
		return nil
	})
	fmt.Println("consume:", err)
	fmt.Printf("%+v\n", b.Features())
	// Output:
	// order-42 key=customer-7 source=checkout attempt=1 {"order":42}
	// consume: context canceled
	// {Name:nats Dedupe:true DedupeWindow:2m0s}
}
