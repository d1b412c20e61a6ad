package outbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/broker/brokertest"
	"github.com/weirhq/weir/broker/nats"
	"github.com/weirhq/weir/broker/nats/natstest"
	"github.com/weirhq/weir/broker/rabbitmq"
	"github.com/weirhq/weir/broker/rabbitmq/rabbitmqtest"
	"github.com/weirhq/weir/internal/eventually"
	"github.com/weirhq/weir/internal/testenv"
	"github.com/weirhq/weir/internal/teststore"
	"github.com/weirhq/weir/outbox"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/postgres"
	"github.com/weirhq/weir/store/sqlite"
)

// idStore is a store of the test, which it can wipe: delete and make
// again in place, as an operator who deleted the data directory or
// dropped the schema would.
type idStore interface {
	store() store.Store
	wipe(t *testing.T)
}

type sqliteIDStore struct {
	path string
	s    *sqlite.Store
}

func (s *sqliteIDStore) store() store.Store { return s.s }

func (s *sqliteIDStore) wipe(t *testing.T) {
	t.Helper()
	if err := s.s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(s.path + suffix); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	s.s = teststore.SQLite(t, s.path)
}

type postgresIDStore struct {
	url string
	s   *postgres.Store
}

func (s *postgresIDStore) store() store.Store { return s.s }

func (s *postgresIDStore) wipe(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	schema := s.s.Schema()
	if _, err := s.s.Pool().Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Fatal(err)
	}
	again, err := postgres.Open(ctx, postgres.Config{URL: s.url, Schema: schema, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { again.Close() })
	if _, err := again.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	s.s = again
}

// idBroker opens the machine's NATS server (streams of the test's own,
// deleted at its end) or RabbitMQ (the topic's queues deleted at its end).
func idBroker(t *testing.T, name, topic string) broker.Broker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logger := slog.New(slog.DiscardHandler)
	switch name {
	case "nats":
		url := testenv.NATS(t)
		b, err := nats.Open(ctx, nats.Config{URL: url, StreamPrefix: natstest.Prefix(t, url), Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	case "rabbitmq":
		url := testenv.RabbitMQ(t)
		b, err := rabbitmq.Open(ctx, rabbitmq.Config{URL: url, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			b.Close()
			rabbitmqtest.DeleteQueues(t, url, topic)
		})
		return b
	}
	t.Fatalf("no broker %s", name)
	return nil
}

// Two stores publishing to one NATS stream or one RabbitMQ queue, and a
// store wiped and made again in place, each start their outbox ids at 1:
// their messages must still have ids of their own, so that neither the
// broker's dedupe window (NATS) nor a consumer's inbox (which the
// consumer here stands for, keeping the ids it received) drops one as a
// duplicate of another's. Every message arrives, each with an id of its
// own.
func TestStoresNeverShareMessageIDs(t *testing.T) {
	const perStore = 1000
	stores := map[string]func(t *testing.T) idStore{
		"sqlite": func(t *testing.T) idStore {
			path := filepath.Join(t.TempDir(), "weir.db")
			return &sqliteIDStore{path: path, s: teststore.SQLite(t, path)}
		},
		"postgres": func(t *testing.T) idStore {
			s, url := teststore.PostgresStore(t, "weir_outbox_ids_", 4)
			return &postgresIDStore{url: url, s: s}
		},
	}
	for _, brokerName := range []string{"nats", "rabbitmq"} {
		for storeName, newStore := range stores {
			t.Run(brokerName+"/"+storeName, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				topic := brokertest.Topic(t)
				b := idBroker(t, brokerName, topic)
				if err := b.Declare(ctx, topic); err != nil {
					t.Fatal(err)
				}
				handled := consumeOnce(t, ctx, b, topic)

				a, other := newStore(t), newStore(t)
				publishAll(t, ctx, a.store(), b, topic, "a", perStore)
				publishAll(t, ctx, other.store(), b, topic, "b", perStore)
				waitHandled(t, handled, 2*perStore)
				a.wipe(t)
				publishAll(t, ctx, a.store(), b, topic, "a-again", perStore)
				waitHandled(t, handled, 3*perStore)
			})
		}
	}
}

// consumeOnce consumes topic until the test ends, as an inbox would: a
// message whose id it received before is a duplicate, and dropped. It
// returns how many messages it took, and fails the test if two of them
// had one body (a message handled twice under two ids).
func consumeOnce(t *testing.T, ctx context.Context, b broker.Broker, topic string) func() int {
	t.Helper()
	var mu sync.Mutex
	ids := map[string]bool{}
	bodies := map[string]string{}
	h := func(_ context.Context, d broker.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		if ids[d.ID] {
			return nil // a duplicate, for an inbox
		}
		ids[d.ID] = true
		if first, ok := bodies[string(d.Body)]; ok {
			t.Errorf("message %s came as %s and as %s", d.Body, first, d.ID)
		}
		bodies[string(d.Body)] = d.ID
		return nil
	}
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- b.Consume(cctx, topic, broker.ConsumeOptions{DeadLetter: func(_ context.Context, d broker.Delivery, reason string, err error) error {
			t.Errorf("dead letter %s: %s %v", d.ID, reason, err)
			return nil
		}}, h)
	}()
	t.Cleanup(func() {
		stop()
		<-done
	})
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(ids)
	}
}

// publishAll adds n messages, with bodies name-0…, to s's outbox and
// relays them until the outbox is empty.
func publishAll(t *testing.T, ctx context.Context, s store.Store, b broker.Broker, topic, name string, n int) {
	t.Helper()
	addNumbered(t, ctx, s, topic, name, n)
	r, err := outbox.New(outbox.Config{Store: s, Broker: b, ID: "relay-" + name, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for sent := 0; sent < n; {
		got, err := r.RelayOnce(ctx)
		if err != nil {
			t.Fatalf("relay %s: %v", name, err)
		}
		if got == 0 {
			t.Fatalf("relay %s: %d of %d messages relayed, then none", name, sent, n)
		}
		sent += got
	}
}

// waitHandled waits until want messages were handled, and a moment more
// to see that no more come.
func waitHandled(t *testing.T, handled func() int, want int) {
	t.Helper()
	eventually.True(t, fmt.Sprintf("%d messages arrived with ids of their own after the last publish", want), time.Minute, func() (bool, string) {
		n := handled()
		return n >= want, fmt.Sprintf("%d arrived: the others were dropped as duplicates", n)
	})
	time.Sleep(200 * time.Millisecond)
	if got := handled(); got != want {
		t.Fatalf("%d messages handled, want %d", got, want)
	}
}

// A message added before the store had an identity (by an earlier weir)
// keeps the broker id it had, "<Source>-<outbox id>", so that a republish
// of one is still a duplicate; the later ones carry the store's identity.
func TestMessagesOlderThanTheStoreIdentityKeepTheirIDs(t *testing.T) {
	b := &fakeBroker{}
	r, s, _ := newRelay(t, b, func(c *outbox.Config) { c.Source = "orders" })
	ids := addInTx(t, s, t0, true, store.OutboxMessage{Topic: "t"}, store.OutboxMessage{Topic: "t"}, store.OutboxMessage{Topic: "t"})
	if _, err := s.DB().Exec(`UPDATE weir_store_identity SET outbox_legacy_through = ?`, ids[1]); err != nil {
		t.Fatal(err)
	}
	ident, err := s.Executor().OutboxIdentity(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.RelayOnce(context.Background()); n != 3 || err != nil {
		t.Fatalf("RelayOnce: %d, %v", n, err)
	}
	want := []string{fmt.Sprint("orders-", ids[0]), fmt.Sprint("orders-", ids[1]), fmt.Sprintf("orders-%s-%d", ident.StoreID, ids[2])}
	if got := b.ids(); !slices.Equal(got, want) {
		t.Fatalf("broker ids %v, want %v", got, want)
	}
}
