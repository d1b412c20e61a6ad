package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weirhq/weir/broker/nats"
	"github.com/weirhq/weir/broker/nats/natsembed"
)

// startBroker sets cfg.NATS and cfg.Topics from cfg.Broker, starting the
// NATS server of BrokerHarness in this process. It returns what the run's
// first line says of the broker, and what stops the server, or deletes
// the run's streams from an external one.
func startBroker(ctx context.Context, cfg *Config) (string, func(), error) {
	switch b := cfg.Broker; b {
	case "", BrokerHarness:
		// The server's log is left out: a worker killed mid-request makes
		// it warn, which is the harness's own doing.
		srv, err := natsembed.Open(ctx, natsembed.Config{Dir: filepath.Join(cfg.Dir, "nats"),
			Broker: nats.Config{Logger: slog.New(slog.DiscardHandler)}})
		if err != nil {
			return "", nil, fmt.Errorf("chaos: start the harness's NATS server: %w", err)
		}
		cfg.NATS = srv.URL()
		return "in the harness's process at " + cfg.NATS, func() { _ = srv.Close() }, nil
	case BrokerWorker:
		return "embedded in each worker", func() {}, nil
	default:
		if err := CheckBroker(b); err != nil {
			return "", nil, fmt.Errorf("chaos: Config.Broker %w", err)
		}
		u, _ := url.Parse(b)
		word := make([]byte, 4)
		if _, err := rand.Read(word); err != nil {
			return "", nil, err
		}
		cfg.NATS, cfg.Topics = b, "run"+hex.EncodeToString(word)
		docs, done := cfg.docsTopic(), cfg.doneTopic()
		stop := func() {
			if err := deleteStreams(b, docs, done); err != nil {
				fmt.Fprintf(cfg.Out, "could not delete the run's streams from %s: %v\n", u.Redacted(), err)
			}
		}
		return fmt.Sprintf("at %s, topics %s and %s", u.Redacted(), docs, done), stop, nil
	}
}

// CheckBroker returns an error unless b is a value of Config.Broker: the
// value, quoted, and what is wanted.
func CheckBroker(b string) error {
	if b == "" || b == BrokerHarness || b == BrokerWorker {
		return nil
	}
	u, err := url.Parse(b)
	if err == nil && (u.Scheme == "nats" || u.Scheme == "tls") && u.Host != "" {
		return nil
	}
	if err == nil {
		b = u.Redacted()
	}
	return fmt.Errorf("%q: want %s, %s or the URL of a NATS server (nats://host:port)", b, BrokerHarness, BrokerWorker)
}

// deleteStreams deletes the streams of topics from the NATS server at
// addr, those that exist.
func deleteStreams(addr string, topics ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := natsgo.Connect(addr, natsgo.Name(workerID+"-cleanup"), natsgo.Timeout(5*time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	var errs []error
	for _, topic := range topics {
		name, err := js.StreamNameBySubject(ctx, topic)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err == nil {
			err = js.DeleteStream(ctx, name)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("stream of %s: %w", topic, err))
		}
	}
	return errors.Join(errs...)
}
