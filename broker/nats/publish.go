package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

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
	js := *b.pub.Load()
	errs := make([]error, len(msgs))
	futures := make([]jetstream.PubAckFuture, len(msgs))
	sent := make([]time.Time, len(msgs)) // when each was sent: its wait ends Config.PublishTimeout later
	waited := 0                          // futures before this one have been waited for
	streams := make([]string, len(msgs)) // each message's topic's stream
	acks := ackWaiter{timeout: b.cfg.PublishTimeout}
	defer acks.stop()
	wait := func() {
		if f := futures[waited]; f != nil {
			errs[waited] = acks.await(ctx, f, msgs[waited].ID, streams[waited], sent[waited])
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
		f, err := js.PublishMsgAsync(natsMsg(m), stall)
		if err != nil {
			if errors.Is(err, natsgo.ErrReconnectBufExceeded) {
				err = fmt.Errorf("connection lost, reconnecting: %w: %w", broker.ErrNotConnected, err)
			}
			errs[i] = fmt.Errorf("publish %s: %w", m.ID, err)
			failed = true
			continue
		}
		futures[i], sent[i] = f, time.Now()
	}
	for waited < len(msgs) {
		wait()
	}
	if acks.timedOut {
		b.retirePublisher(js)
	}
	for _, err := range errs {
		if err != nil {
			return &broker.PublishError{Errs: errs}
		}
	}
	return nil
}

// ackWaiter waits for the PubAcks of one Publish call, each for at most
// timeout from its send, with one timer for them all rather than the
// timer per message that nats.go would start and stop (measured at about
// a fifth of the client's CPU time per message).
type ackWaiter struct {
	timeout time.Duration
	timer   *time.Timer // made at the first wait that blocks
	// timedOut is set when a PubAck did not come in time: nats.go still
	// holds its message as pending.
	timedOut bool
	// fired is set when the timer has fired and was not set again.
	fired bool
}

// await waits for f's PubAck, which must come from stream, until timeout
// after sent. The check of the stream costs the server nothing, where a
// Nats-Expected-Stream header on every message would cost it a lookup
// each.
func (w *ackWaiter) await(ctx context.Context, f jetstream.PubAckFuture, id, stream string, sent time.Time) error {
	for {
		select {
		case ack := <-f.Ok():
			return checkAck(ack, id, stream)
		case err := <-f.Err():
			return ackError(err, id)
		default:
		}
		left := time.Until(sent.Add(w.timeout))
		if left <= 0 {
			w.timedOut = true
			return fmt.Errorf("publish %s: no PubAck within %v: %w", id, w.timeout, jetstream.ErrAsyncPublishTimeout)
		}
		// Armed for an earlier message, the timer fires no later than
		// this one's end (sends are in order): it is set again only
		// when it has fired early.
		switch {
		case w.timer == nil:
			w.timer = time.NewTimer(left)
		case w.fired:
			w.timer.Reset(left)
			w.fired = false
		}
		select {
		case ack := <-f.Ok():
			return checkAck(ack, id, stream)
		case err := <-f.Err():
			return ackError(err, id)
		case <-ctx.Done():
			return fmt.Errorf("publish %s: %w", id, ctx.Err())
		case <-w.timer.C:
			w.fired = true // look again: this message's time may be left
		}
	}
}

// stop stops the timer, if any.
func (w *ackWaiter) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// checkAck returns the error of ack, the PubAck of message id, unless it
// comes from stream. A duplicate is no error: the stream has it.
func checkAck(ack *jetstream.PubAck, id, stream string) error {
	if ack.Stream != stream {
		return fmt.Errorf("publish %s: stored by stream %q, not the topic's %q (does another stream take the subject?)", id, ack.Stream, stream)
	}
	return nil
}

// ackError returns err, what nats.go reported instead of message id's
// PubAck, with what it likely means.
func ackError(err error, id string) error {
	if errors.Is(err, jetstream.ErrNoStreamResponse) {
		err = fmt.Errorf("%w (is the topic declared?)", err)
	}
	return fmt.Errorf("publish %s: %w", id, err)
}

// retirePublisher replaces js, the JetStream context a Publish sent
// through, after a PubAck that did not come in time: nats.go keeps its
// message pending in js until the connection is lost, and enough of them
// (4 × 1024) would stall every later publish. The retired context keeps
// them, and its reply subscription, until then; a PubAck that comes late
// still reaches it. Another Publish that retired js first wins.
func (b *Broker) retirePublisher(js jetstream.JetStream) {
	cur := b.pub.Load()
	if *cur != js {
		return
	}
	next, err := jetstream.New(b.nc, jetstream.WithPublishAsyncMaxPending(publishWindow*4))
	if err != nil {
		b.log.Warn("make a new JetStream context for publishing; keeping the old one", slog.Any("err", err))
		return
	}
	if b.pub.CompareAndSwap(cur, &next) {
		b.log.Warn("a PubAck did not come within the publish timeout; publishing through a new JetStream context", slog.Duration("publish_timeout", b.cfg.PublishTimeout))
	}
}

// natsMsg returns m as a NATS message, its id in Nats-Msg-Id (set here,
// as jetstream.WithMsgID would, without an option made and applied for
// each message).
func natsMsg(m broker.Message) *natsgo.Msg {
	h := make(natsgo.Header, len(m.Headers)+2)
	for k, v := range m.Headers {
		h[k] = []string{v} // not Set, which would change the name's case
	}
	if m.Key != "" {
		h[KeyHeader] = []string{m.Key}
	}
	h[jetstream.MsgIDHeader] = []string{m.ID}
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
