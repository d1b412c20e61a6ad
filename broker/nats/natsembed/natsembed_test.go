package natsembed

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/broker/nats"
)

// testLogger logs warnings and errors to stderr, which go test shows when
// the package fails.
func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// streamOf returns the name of the stream that takes subject on the
// server at url, through a connection of its own.
func streamOf(ctx context.Context, url, subject string) (string, error) {
	nc, err := natsgo.Connect(url)
	if err != nil {
		return "", err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return "", err
	}
	return js.StreamNameBySubject(ctx, subject)
}

func TestConfigDefaultsAndErrors(t *testing.T) {
	t.Parallel()
	if _, err := (Config{}).withDefaults(); err == nil || !strings.Contains(err.Error(), "Dir") {
		t.Errorf("Config without Dir: %v, want an error naming Dir", err)
	}
	for name, bad := range map[string]Config{
		"Port":         {Dir: "d", Port: 70000},
		"MaxStore":     {Dir: "d", MaxStore: -1},
		"StartTimeout": {Dir: "d", StartTimeout: -1},
	} {
		if _, err := bad.withDefaults(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v, want one naming the field", name, err)
		}
	}
	c, err := Config{Dir: "d"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Host != DefaultHost || c.StartTimeout != DefaultStartTimeout || c.Broker.Logger == nil {
		t.Fatalf("defaults: %+v", c)
	}
}

// Restart keeps the server's port and directory: a message stored before
// is consumed after, through the Broker that reconnected by itself, and
// URL names the same server. Close shuts the server down, twice without
// harm, and then Restart refuses.
func TestRestartKeepsTheURLAndTheStreams(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := Open(ctx, Config{Dir: t.TempDir(), Broker: nats.Config{Logger: testLogger()}})
	if err != nil {
		t.Fatal(err)
	}
	url := b.URL()
	if !strings.HasPrefix(url, "nats://127.0.0.1:") || strings.HasSuffix(url, ":0") {
		t.Fatalf("URL() = %q, want nats://127.0.0.1 and the port taken", url)
	}
	if err := b.Declare(ctx, "kept"); err != nil {
		t.Fatal(err)
	}
	if err := b.Publish(ctx, []broker.Message{{ID: "m1", Topic: "kept", Body: []byte("before")}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Restart(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if b.URL() != url {
		t.Fatalf("URL() after restart = %q, want %q", b.URL(), url)
	}
	got := make(chan broker.Delivery, 1)
	cctx, stop := context.WithCancel(ctx)
	err = b.Consume(cctx, "kept", broker.ConsumeOptions{DeadLetter: func(context.Context, broker.Delivery, string, error) error { return nil }},
		func(_ context.Context, d broker.Delivery) error {
			got <- d
			stop()
			return nil
		})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("consume after the restart: %v", err)
	}
	if d := <-got; d.ID != "m1" || string(d.Body) != "before" {
		t.Fatalf("delivery after the restart: %+v", d)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := b.Restart(); err == nil {
		t.Fatal("Restart after Close worked")
	}
	if _, err := streamOf(ctx, url, "kept"); err == nil {
		t.Fatal("the server still answers after Close")
	}
}
