package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/broker/nats"
	"github.com/weirhq/weir/broker/nats/natsembed"
	"github.com/weirhq/weir/internal/tempstore"
	"github.com/weirhq/weir/outbox"
	"github.com/weirhq/weir/store"
)

// An order and the message announcing it commit in one transaction, or
// neither does: the relay publishes only what committed, with an id of
// its own that stays the same if it must publish the message again.
func Example() {
	ctx := context.Background()
	s := tempstore.MustOpen(ctx, `CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER)`) // sqlite.Open and Migrate, in a temporary directory
	defer s.Close()
	quiet := slog.New(slog.DiscardHandler)
	b, err := natsembed.Open(ctx, natsembed.Config{Dir: filepath.Join(s.Dir, "nats"), Broker: nats.Config{Logger: quiet}})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	for _, total := range []int{42, -1} {
		err := s.RunTx(ctx, func(tx *sql.Tx, ex store.Executor) error {
			res, err := tx.ExecContext(ctx, `INSERT INTO orders (total) VALUES ($1)`, total)
			if err != nil {
				return err
			}
			id, err := res.LastInsertId()
			if err != nil {
				return err
			}
			if _, err := outbox.Add(ctx, ex, time.Now(), store.OutboxMessage{
				Topic: "orders.created", Key: "customer-7", Payload: fmt.Appendf(nil, `{"order":%d,"total":%d}`, id, total),
			}); err != nil {
				return err
			}
			if total < 0 {
				return errors.New("a negative total: rolled back, message included")
			}
			return nil
		})
		fmt.Printf("order of %d: %v\n", total, err)
	}

	relay, err := outbox.New(outbox.Config{Store: s, Broker: b, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	// Run declares Config.Topics itself; RelayOnce, one round, does not.
	if err := b.Declare(ctx, "orders.created"); err != nil {
		log.Fatal(err)
	}
	n, err := relay.RelayOnce(ctx)
	fmt.Println("published:", n, err)

	consumeCtx, stop := context.WithCancel(ctx)
	defer stop()
	err = b.Consume(consumeCtx, "orders.created", broker.ConsumeOptions{
		DeadLetter: func(context.Context, broker.Delivery, string, error) error { return nil },
	}, func(_ context.Context, d broker.Delivery) error {
		fmt.Printf("received %s key=%s id=weir-<store id>-%s\n", d.Body, d.Key, d.ID[strings.LastIndexByte(d.ID, '-')+1:])
		stop()
		return nil
	})
	fmt.Println("consume:", err)
	// Output:
	// order of 42: <nil>
	// order of -1: a negative total: rolled back, message included
	// published: 1 <nil>
	// received {"order":1,"total":42} key=customer-7 id=weir-<store id>-1
	// consume: context canceled
}
