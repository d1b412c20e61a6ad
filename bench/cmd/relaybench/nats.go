package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weirhq/weir/broker/nats"
)

func natsSides() sides {
	return sides{
		relay: func(ctx context.Context, s settings, msgs []message, logger *slog.Logger) (result, error) {
			return runRelay(ctx, s, msgs, logger, openNATSTopic)
		},
		raw: runRawNATS,
		relayDesc: "outbox.Relay (SQLite store, WAL) → broker/nats, to a topic declared by Declare (file stream, 2 min duplicate window); " +
			"messages/s = n / (Run started → its marks have recorded n published)",
		rawDesc: "nats.go jetstream on one connection, to a file stream with a 2 min duplicate window; Nats-Msg-Id, key in Weir-Key; " +
			"-batch PublishMsgAsync calls, then wait for their PubAcks; messages/s = n / (first publish → last PubAck)",
	}
}

func natsURL(s settings) string {
	if s.url != "" {
		return s.url
	}
	return nats.DefaultURL
}

// openNATSTopic opens weir's NATS driver and declares a fresh topic
// through it.
func openNATSTopic(ctx context.Context, s settings, logger *slog.Logger) (*weirTopic, error) {
	b, err := nats.Open(ctx, nats.Config{URL: s.url, Name: "relaybench", Logger: logger})
	if err != nil {
		return nil, err
	}
	nc, js, err := connectNATS(s, "relaybench admin")
	if err != nil {
		b.Close()
		return nil, err
	}
	topic := topicName("relay")
	// The stream's name is the driver's: found by its subject.
	streamOf := func(ctx context.Context) (jetstream.Stream, error) {
		name, err := js.StreamNameBySubject(ctx, topic)
		if err != nil {
			return nil, err
		}
		return js.Stream(ctx, name)
	}
	wt := &weirTopic{
		broker: b,
		topic:  topic,
		stored: func(ctx context.Context) (int, error) {
			st, err := streamOf(ctx)
			if err != nil {
				return 0, err
			}
			return streamLength(ctx, st)
		},
		remove: func(ctx context.Context) error {
			var err error
			if st, serr := streamOf(ctx); serr == nil {
				err = js.DeleteStream(ctx, st.CachedInfo().Config.Name)
			} else if !errors.Is(serr, jetstream.ErrStreamNotFound) {
				err = serr
			}
			nc.Close()
			return errors.Join(err, b.Close())
		},
	}
	if err := b.Declare(ctx, topic); err != nil {
		return nil, errors.Join(err, wt.remove(ctx))
	}
	return wt, nil
}

func connectNATS(s settings, name string) (*natsgo.Conn, jetstream.JetStream, error) {
	nc, err := natsgo.Connect(natsURL(s), natsgo.Name(name))
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	return nc, js, nil
}

// streamLength returns the messages st holds.
func streamLength(ctx context.Context, st jetstream.Stream) (int, error) {
	info, err := st.Info(ctx)
	if err != nil {
		return 0, err
	}
	return int(info.State.Msgs), nil
}

// runRawNATS publishes the run's messages with nats.go's jetstream alone.
func runRawNATS(ctx context.Context, s settings, msgs []message, _ *slog.Logger) (r result, err error) {
	r = result{system: "raw", messages: s.n}
	nc, js, err := connectNATS(s, "relaybench raw")
	if err != nil {
		return r, fmt.Errorf("raw: %w", err)
	}
	defer nc.Close()
	subject := topicName("raw")
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:       subject,
		Subjects:   []string{subject},
		Retention:  jetstream.LimitsPolicy,
		Discard:    jetstream.DiscardOld,
		Storage:    jetstream.FileStorage,
		Replicas:   1,
		Duplicates: nats.DefaultDedupeWindow,
	})
	if err != nil {
		return r, fmt.Errorf("raw: create stream: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if derr := js.DeleteStream(dctx, subject); derr != nil {
			err = errors.Join(err, fmt.Errorf("raw: delete stream %s: %w", subject, derr))
		}
	}()

	futures := make([]jetstream.PubAckFuture, 0, s.batch)
	settle()
	cpu0, allocs0 := cpuTime(), mallocs()
	t0 := time.Now()
	for i := 0; i < len(msgs); i += s.batch {
		futures = futures[:0]
		for j, m := range msgs[i:min(i+s.batch, len(msgs))] {
			msg := &natsgo.Msg{Subject: subject, Data: m.body}
			if m.key != "" {
				msg.Header = natsgo.Header{nats.KeyHeader: []string{m.key}}
			}
			f, err := js.PublishMsgAsync(msg, jetstream.WithMsgID("raw-"+strconv.Itoa(i+j)))
			if err != nil {
				return r, fmt.Errorf("raw: publish %d: %w", i+j, err)
			}
			futures = append(futures, f)
		}
		for j, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return r, fmt.Errorf("raw: PubAck of %d: %w", i+j, err)
			case <-ctx.Done():
				return r, fmt.Errorf("raw: PubAck of %d: %w", i+j, ctx.Err())
			}
		}
	}
	r.elapsed = time.Since(t0)
	r.cpu, r.allocs = cpuTime()-cpu0, mallocs()-allocs0
	held, err := streamLength(ctx, st)
	if err != nil {
		return r, fmt.Errorf("raw: count the messages on %s: %w", subject, err)
	}
	if held != s.n {
		return r, fmt.Errorf("raw: %s holds %d messages, want %d", subject, held, s.n)
	}
	r.note = fmt.Sprintf("last PubAck at %.3fs; stream %s holds %d", r.elapsed.Seconds(), subject, held)
	return r, nil
}
