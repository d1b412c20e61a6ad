package nats

import (
	"context"
	"errors"
	"fmt"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weirhq/weir/broker"
)

// publishWindow bounds the messages of one Publish sent and not yet
// confirmed.
const publishWindow = 1024

// errNotSent is the error of the messages after one that could not be
// sent: Publish stops there, so that a retry keeps their order.
var errNotSent = errors.New("not sent: an earlier message of the batch failed")

// Publish sends msgs in order, each with its id as Nats-Msg-Id, its key in
// the Weir-Key header and its headers as NATS headers, to its topic's
// stream, and waits for the stream's confirm of each (a PubAck: the
// message is stored). A PubAck that reports a duplicate, a message the
// stream already stored within its dedupe window, counts as a confirm.
//
// Messages are sent without waiting for the confirms of those before
// (at most 1024 unconfirmed at a time). When one cannot be sent, the
// connection being lost for instance, the rest are not sent. The error is
// a *broker.PublishError naming the messages not confirmed: the connection
// lost (or not made yet: each error then wraps broker.ErrNotConnected,
// and none is sent), the confirm not received within Config.PublishTimeout, the topic
// not declared, the message stored by a stream other than the topic's
// (another stream took the subject while the topic's was gone), or ctx
// ended. A message whose headers NATS cannot carry (an empty name, or one
// with white space or ':', a name reserved by NATS or for the key, a value
// with a line break) makes Publish return an error before it sends any. A header value's leading blanks do not
// reach consumers.
func (b *Broker) Publish(ctx context.Context, msgs []broker.Message) error {
	if err := broker.CheckMessages(msgs); err != nil {
		return err
	}
	for i, m := range msgs {
		if i == 0 || m.Topic != msgs[i-1].Topic {
			if err := checkTopic(m.Topic); err != nil {
				return fmt.Errorf("broker/nats: message %d (%s): %w", i, m.ID, err)
			}
		}
		if err := checkHeaders(i, m); err != nil {
			return err
		}
	}
	if b.closed() {
		return ErrClosed
	}
	if len(msgs) == 0 {
		return nil
	}
	if err := b.notConnected("publish"); err != nil {
		errs := make([]error, len(msgs))
		for i := range errs {
			errs[i] = err
		}
		return &broker.PublishError{Errs: errs}
	}
	errs := make([]error, len(msgs))
	futures := make([]jetstream.PubAckFuture, len(msgs))
	waited := 0                          // futures before this one have been waited for
	streams := make([]string, len(msgs)) // each message's topic's stream
	wait := func() {
		if f := futures[waited]; f != nil {
			errs[waited] = awaitAck(ctx, f, msgs[waited].ID, streams[waited])
		}
		waited++
	}
	failed := false
	stall := jetstream.WithStallWait(b.cfg.PublishTimeout)
	for i, m := range msgs {
		if failed || ctx.Err() != nil {
			errs[i] = errNotSent
			if ctx.Err() != nil {
				errs[i] = fmt.Errorf("publish %s: %w", m.ID, ctx.Err())
			}
			continue
		}
		for i-waited >= publishWindow {
			wait()
		}
		if i == 0 || m.Topic != msgs[i-1].Topic {
			streams[i] = b.streamName(m.Topic)
		} else {
			streams[i] = streams[i-1]
		}
		f, err := b.js.PublishMsgAsync(natsMsg(m), jetstream.WithMsgID(m.ID), stall)
		if err != nil {
			if errors.Is(err, natsgo.ErrReconnectBufExceeded) {
				err = fmt.Errorf("connection lost, reconnecting: %w: %w", broker.ErrNotConnected, err)
			}
			errs[i] = fmt.Errorf("publish %s: %w", m.ID, err)
			failed = true
			continue
		}
		futures[i] = f
	}
	for waited < len(msgs) {
		wait()
	}
	for _, err := range errs {
		if err != nil {
			return &broker.PublishError{Errs: errs}
		}
	}
	return nil
}

// awaitAck waits for f's PubAck, which must come from stream: the check
// costs the server nothing, where a Nats-Expected-Stream header on every
// message would cost it a lookup each.
func awaitAck(ctx context.Context, f jetstream.PubAckFuture, id, stream string) error {
	select {
	case ack := <-f.Ok():
		if ack.Stream != stream {
			return fmt.Errorf("publish %s: stored by stream %q, not the topic's %q (does another stream take the subject?)", id, ack.Stream, stream)
		}
		return nil // a duplicate too: the stream has it
	case err := <-f.Err():
		if errors.Is(err, jetstream.ErrNoStreamResponse) {
			err = fmt.Errorf("%w (is the topic declared?)", err)
		}
		return fmt.Errorf("publish %s: %w", id, err)
	case <-ctx.Done():
		return fmt.Errorf("publish %s: %w", id, ctx.Err())
	}
}

// natsMsg returns m as a NATS message, without its id (which
// jetstream.WithMsgID sets).
func natsMsg(m broker.Message) *natsgo.Msg {
	h := make(natsgo.Header, len(m.Headers)+2)
	for k, v := range m.Headers {
		h[k] = []string{v} // not Set, which would change the name's case
	}
	if m.Key != "" {
		h[KeyHeader] = []string{m.Key}
	}
	return &natsgo.Msg{Subject: m.Topic, Header: h, Data: m.Body}
}

// message returns the broker.Message that a NATS message carries.
func message(subject string, h natsgo.Header, body []byte) broker.Message {
	m := broker.Message{Topic: subject, Body: body}
	for k, vs := range h {
		switch {
		case len(vs) == 0:
		case k == jetstream.MsgIDHeader:
			m.ID = vs[0]
		case k == KeyHeader:
			m.Key = vs[0]
		case len(k) >= 5 && k[:5] == "Nats-":
		default:
			if m.Headers == nil {
				m.Headers = make(map[string]string, len(h))
			}
			m.Headers[k] = vs[0]
		}
	}
	return m
}
