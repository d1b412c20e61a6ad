package outbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/broker/nats"
	"github.com/weirhq/weir/broker/nats/natsembed"
	"github.com/weirhq/weir/inbox"
	"github.com/weirhq/weir/internal/eventually"
	"github.com/weirhq/weir/internal/teststore"
	"github.com/weirhq/weir/outbox"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/sqlite"
)

// From a committed transaction to a consumer's effect, through the
// embedded broker: every message is handled once, in its key's order,
// even when the relay publishes one again (a crash between its publish
// and its mark) and the broker delivers one again.
func TestOutboxToInboxThroughTheEmbeddedBroker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic = "grading.request"
	b := openEmbedded(ctx, t, topic)

	producer := openSQLite(t, "producer.db")
	consumer := openSQLite(t, "consumer.db")
	if _, err := consumer.DB().Exec(`CREATE TABLE effects (seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT, n INTEGER)`); err != nil {
		t.Fatal(err)
	}

	const n = 300
	for i := range n {
		err := producer.RunTx(ctx, func(_ *sql.Tx, ex store.Executor) error {
			_, err := outbox.Add(ctx, ex, time.Now(), store.OutboxMessage{
				Topic: topic, Key: fmt.Sprint("sub-", i%5), Payload: []byte(strconv.Itoa(i)),
			})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	relay, err := outbox.New(outbox.Config{Store: producer, Broker: b, ID: "relay", PollEvery: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	relayCtx, stopRelay := context.WithCancel(ctx)
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Run(relayCtx) }()
	defer func() {
		stopRelay()
		<-relayDone
	}()

	var mu sync.Mutex
	handled := 0
	h := inbox.Handle(consumer.RunTx, func(ctx context.Context, tx *sql.Tx, d broker.Delivery) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO effects (key, n) VALUES (?, ?)`, d.Key, string(d.Body)); err != nil {
			return err
		}
		mu.Lock()
		handled++
		mu.Unlock()
		return nil
	}, inbox.Config{Logger: slog.New(slog.DiscardHandler)})
	consumeCtx, stopConsumer := context.WithCancel(ctx)
	consumeDone := make(chan error, 1)
	go func() {
		consumeDone <- b.Consume(consumeCtx, topic, broker.ConsumeOptions{Prefetch: 1, DeadLetter: func(_ context.Context, d broker.Delivery, reason string, err error) error {
			t.Errorf("dead letter %s: %s %v", d.ID, reason, err)
			return nil
		}}, h)
	}()
	defer func() {
		stopConsumer()
		<-consumeDone
	}()

	waitEffects := func(want int) {
		t.Helper()
		eventually.True(t, fmt.Sprintf("%d effects", want), time.Minute, func() (bool, string) {
			var got int
			if err := consumer.DB().QueryRow(`SELECT count(*) FROM effects`).Scan(&got); err != nil {
				t.Fatal(err)
			}
			return got == want, fmt.Sprintf("%d effects", got)
		})
	}
	waitEffects(n)
	// The relay crashed after publishing message 1 and before marking it:
	// it goes again with the same id, after the dedupe window too.
	if err := b.Publish(ctx, []broker.Message{{ID: brokerID(t, relay, 1), Topic: topic, Key: "sub-1", Body: []byte("0")}}); err != nil {
		t.Fatal(err)
	}
	if err := h(ctx, broker.Delivery{Message: broker.Message{ID: brokerID(t, relay, 2), Topic: topic, Key: "sub-1", Body: []byte("1")}, Attempt: 2}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	waitEffects(n)

	// Each key's effects are in commit order.
	rows, err := consumer.DB().Query(`SELECT key, n FROM effects ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	last := map[string]int{}
	for rows.Next() {
		var key string
		var v int
		if err := rows.Scan(&key, &v); err != nil {
			t.Fatal(err)
		}
		if prev, ok := last[key]; ok && v <= prev {
			t.Fatalf("key %s: message %d handled after %d", key, v, prev)
		}
		last[key] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

func openSQLite(t *testing.T, name string) *sqlite.Store {
	return teststore.SQLite(t, filepath.Join(t.TempDir(), name))
}

// addNumbered adds n unkeyed messages of topic, with bodies name-0…, to
// s's outbox.
func addNumbered(t *testing.T, ctx context.Context, s store.Store, topic, name string, n int) {
	t.Helper()
	msgs := make([]store.OutboxMessage, n)
	for i := range msgs {
		msgs[i] = store.OutboxMessage{Topic: topic, Payload: fmt.Appendf(nil, "%s-%d", name, i)}
	}
	if _, err := outbox.Add(ctx, s.Executor(), time.Now(), msgs...); err != nil {
		t.Fatal(err)
	}
}

// openEmbedded starts an embedded NATS broker for t, closed when t ends,
// with topics declared.
func openEmbedded(ctx context.Context, t *testing.T, topics ...string) *natsembed.Broker {
	t.Helper()
	b, err := natsembed.Open(ctx, natsembed.Config{Dir: t.TempDir(), Broker: nats.Config{Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if err := b.Declare(ctx, topics...); err != nil {
		t.Fatal(err)
	}
	return b
}
