package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/broker/nats"
	"github.com/weirhq/weir/broker/nats/natstest"
	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/internal/testenv"
)

// `weir run -broker nats://…` publishes one event per saved or failed
// document, through the outbox, to the topic, each under its own id.
func TestRunPublishesEventsToNATS(t *testing.T) {
	skipShort(t)
	url := testenv.NATS(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	topic := "e2e_events_" + hex.EncodeToString(b)
	t.Cleanup(func() { natstest.DeleteStreams(t, url, nats.DefaultStreamPrefix+topic) })

	p, data, _ := weirRun(t, "e2e-events", "-watch-every", "100ms", "-broker", url, "-events-topic", topic)
	in := filepath.Join(data, "incoming", "events")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		writeAtomic(t, filepath.Join(in, fmt.Sprintf("doc-%d.txt", i)), fmt.Sprintf("Document %d is about the harbour pilots of Leith.", i))
	}
	writeAtomic(t, filepath.Join(in, "broken.txt"), "\x00\x01")

	events := map[string]pipeline.Event{} // by message id
	dups := 0
	consumeEvents(t, url, topic, "e2e", func(id string, e pipeline.Event) bool {
		if _, ok := events[id]; ok {
			dups++
		}
		events[id] = e
		return len(events) == 6
	})
	if err := p.stop(); err != nil {
		t.Fatalf("stop: %v; log:\n%s", err, p.log())
	}
	saved, failed := map[string]bool{}, map[string]bool{}
	for _, e := range events {
		switch e.Type {
		case pipeline.EventSaved:
			saved[e.Path] = true
		case pipeline.EventFailed:
			failed[e.Path] = true
		}
	}
	if len(saved) != 5 || len(failed) != 1 || !failed["events/broken.txt"] {
		t.Fatalf("events: %d saved %v, failed %v (of %d, %d delivered twice); want the 5 documents saved and broken.txt failed; log:\n%s",
			len(saved), saved, failed, len(events), dups, p.log())
	}
}

func writeAtomic(t *testing.T, name, body string) {
	t.Helper()
	if err := os.WriteFile(name+".tmp", []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(name+".tmp", name); err != nil {
		t.Fatal(err)
	}
}

// consumeEvents reads the topic's events as the consumer group, passing
// each with its message id to handle, one at a time, until handle returns
// true or a minute has passed.
func consumeEvents(t *testing.T, natsURL, topic, group string, handle func(id string, e pipeline.Event) (done bool)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	br, err := nats.Open(ctx, nats.Config{URL: natsURL})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	if err := br.Declare(ctx, topic); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	consumed := make(chan error, 1)
	go func() {
		consumed <- br.Consume(ctx, topic, broker.ConsumeOptions{Group: group,
			DeadLetter: func(_ context.Context, d broker.Delivery, reason string, err error) error {
				t.Errorf("event %s given up: %s: %v", d.ID, reason, err)
				return nil
			}}, func(_ context.Context, d broker.Delivery) error {
			var e pipeline.Event
			if err := json.Unmarshal(d.Body, &e); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			if handle(d.ID, e) {
				cancel()
			}
			return nil
		})
	}()
	if err := <-consumed; err != nil && ctx.Err() == nil {
		t.Fatalf("consume: %v", err)
	}
}
