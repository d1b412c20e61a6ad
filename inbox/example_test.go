package inbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"log/slog"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/inbox"
	"github.com/weirhq/weir/internal/tempstore"
)

// A consumer's handler made by Handle records each message id in the
// transaction of its effects. The broker delivers a message three times:
// the first handling fails and rolls back, record included; the second
// commits the shipment; the third finds the record and changes nothing.
func ExampleHandle() {
	ctx := context.Background()
	s := tempstore.MustOpen(ctx, `CREATE TABLE shipments (order_ref TEXT)`) // sqlite.Open and Migrate, in a temporary directory
	defer s.Close()

	calls := 0
	h := inbox.Handle(s.RunTx, func(ctx context.Context, tx *sql.Tx, d broker.Delivery) error {
		calls++
		if _, err := tx.ExecContext(ctx, `INSERT INTO shipments (order_ref) VALUES ($1)`, string(d.Body)); err != nil {
			return err
		}
		if calls == 1 {
			return fmt.Errorf("warehouse API: %d", 503)
		}
		return nil
	}, inbox.Config{Logger: slog.New(slog.DiscardHandler)})

	// What a broker passes to the handler at each delivery of one message.
	d := broker.Delivery{Message: broker.Message{ID: "weir-7f3a-42", Topic: "orders.paid", Body: []byte("order-42")}}
	for d.Attempt = 1; d.Attempt <= 3; d.Attempt++ {
		fmt.Printf("delivery %d: %v\n", d.Attempt, h(ctx, d))
	}
	var shipments int
	if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM shipments`).Scan(&shipments); err != nil {
		log.Fatal(err)
	}
	fmt.Println("handler runs:", calls, "shipments:", shipments)
	// Output:
	// delivery 1: warehouse API: 503
	// delivery 2: <nil>
	// delivery 3: <nil>
	// handler runs: 2 shipments: 1
}
