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
		open: openNATSTopic,
		raw:  runRawNATS,
		relayDesc: "outbox.Relay (SQLite store, WAL) → broker/nats, to a topic declared by Declare (file stream, 2 min duplicate window); " +
			"messages/s = n / (Run started → its marks have recorded n published)",
		rawDesc: "nats.go jetstream on one connection, to a file stream with a 2 min duplicate window; Nats-Msg-Id, key in Weir-Key; " +
			"-batch PublishMsgAsync calls, then wait for their PubAcks; messages/s = n / (first publish → last PubAck)",
	}
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
	nc, err := natsgo.Connect(s.urlOr(nats.DefaultURL), natsgo.Name(name))
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

	send := func(i int, m message) (jetstream.PubAckFuture, error) {
		msg := &natsgo.Msg{Subject: subject, Data: m.body}
		if m.key != "" {
			msg.Header = natsgo.Header{nats.KeyHeader: []string{m.key}}
		}
		return js.PublishMsgAsync(msg, jetstream.WithMsgID("raw-"+strconv.Itoa(i)))
	}
	wait := func(i int, f jetstream.PubAckFuture) error {
		select {
		case <-f.Ok():
			return nil
		case err := <-f.Err():
			return fmt.Errorf("raw: PubAck of %d: %w", i, err)
		case <-ctx.Done():
			return fmt.Errorf("raw: PubAck of %d: %w", i, ctx.Err())
		}
	}
	if err := publishRaw(s, msgs, &r, send, wait); err != nil {
		return r, err
	}
	held, err := streamLength(ctx, st)
	if err := checkRaw(s, subject, held, err); err != nil {
		return r, err
	}
	r.note = fmt.Sprintf("last PubAck at %.3fs; stream %s holds %d", r.elapsed.Seconds(), subject, held)
	return r, nil
}
