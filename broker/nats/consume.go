package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/retry"
)

// pollWait is how long one pull request waits for messages before the
// consumer makes another. It bounds how long a consumer whose request
// the server lost (a restart) waits before asking again.
const pollWait = 5 * time.Second

// retryBackoff is a consumer's wait after a failed request to the server:
// 100 ms doubling up to 5 s, ±10%.
var retryBackoff = backoff.Exponential(100*time.Millisecond, 2, 5*time.Second).WithProportionalJitter(jitter)

// deadLetterTimeout bounds a dead-lettering that Consume does after its
// ctx ended (see handle).
const deadLetterTimeout = 30 * time.Second

// Consume runs h on the messages of topic's stream as a member of
// opts.Group, until ctx ends; then it waits for the handlers running and
// returns ctx's error.
//
// The group is a durable pull consumer of the stream, named as a stream
// is (see Declare) but without the prefix: explicit acks, opts.AckWait,
// and opts.MaxDeliveries as its MaxDeliver. Each member asks the server
// for as many messages as it has free handlers, at most opts.Prefetch,
// and runs a handler for each message as it arrives: up to opts.Prefetch
// handlers at once. A handler's result decides the message's fate:
//
//   - nil: the message is acknowledged, after the handler returned.
//   - an error marked with retry.Permanent: opts.DeadLetter gets it with
//     broker.ReasonPermanent, then it is terminated (never delivered
//     again to the group).
//   - another error at the last delivery (its number is opts.MaxDeliveries
//     or more): opts.DeadLetter gets it with broker.ReasonMaxDeliveries,
//     then it is terminated.
//   - another error: the message is delivered again after
//     Config.NakDelay.
//   - any error after ctx ended: nothing, the handler was stopped; the
//     server delivers the message again after opts.AckWait.
//
// When opts.DeadLetter fails, the message is delivered again after
// Config.NakDelay rather than terminated.
//
// A message whose consumer died on each of its deliveries, without a
// handler's error, is dead-lettered through the server's max-deliveries
// advisory; see the package documentation.
//
// Consume returns another error than ctx's only when it cannot consume at
// all: a bad option, a topic whose stream does not exist, the Broker
// closed. A lost connection or a restarted server makes it wait, with
// backoff, and ask again.
func (b *Broker) Consume(ctx context.Context, topic string, opts broker.ConsumeOptions, h broker.Handler) error {
	opts, err := opts.WithDefaults()
	if err != nil {
		return err
	}
	if h == nil {
		return errors.New("broker/nats: Consume: nil handler")
	}
	if err := checkTopic(topic); err != nil {
		return err
	}
	if b.closed() {
		return ErrClosed
	}
	c := &consumer{
		b:      b,
		topic:  topic,
		stream: b.streamName(topic),
		name:   safeName(opts.Group),
		opts:   opts,
		h:      h,
	}
	c.log = b.log.With(slog.String("topic", topic), slog.String("group", opts.Group))
	// cctx ends with ctx or when the Broker is closed.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-b.done:
			cancel()
		case <-cctx.Done():
		}
	}()
	err = c.consume(cctx)
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case b.closed():
		return ErrClosed
	}
	return err
}

func (c *consumer) consume(ctx context.Context) error {
	cons, err := c.ensure(ctx)
	if err != nil {
		return err
	}
	// The advisory subscription is made before the first pull, so that no
	// advisory of this consumer's deliveries comes before it.
	stopAdvisories, err := c.watchAdvisories(ctx)
	if err != nil {
		return fmt.Errorf("broker/nats: consume %s: subscribe to max-deliveries advisories: %w", c.topic, err)
	}
	defer stopAdvisories()
	return c.run(ctx, cons)
}

// consumer is one Consume call.
type consumer struct {
	b      *Broker
	topic  string
	stream string // the topic's stream
	name   string // the durable consumer, the group's name made safe
	opts   broker.ConsumeOptions
	h      broker.Handler
	log    *slog.Logger
}

// ensure creates the group's durable consumer, or updates it to opts. It
// retries, with backoff, until ctx ends, unless the stream does not exist
// or the server refuses the consumer's configuration.
func (c *consumer) ensure(ctx context.Context) (jetstream.Consumer, error) {
	cfg := jetstream.ConsumerConfig{
		Durable:       c.name,
		Description:   "weir group " + c.opts.Group,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.opts.AckWait,
		MaxDeliver:    c.opts.MaxDeliveries,
	}
	if c.opts.Prefetch > serverMaxAckPending {
		cfg.MaxAckPending = c.opts.Prefetch
	}
	for attempt := 1; ; attempt++ {
		cons, err := request(ctx, func(ctx context.Context) (jetstream.Consumer, error) {
			return c.b.js.CreateOrUpdateConsumer(ctx, c.stream, cfg)
		})
		if err == nil {
			return cons, nil
		}
		var apiErr *jetstream.APIError
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			return nil, fmt.Errorf("broker/nats: consume %s: no stream %s; declare the topic first: %w", c.topic, c.stream, err)
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case c.b.closed():
			return nil, ErrClosed
		case errors.As(err, &apiErr) && apiErr.Code == 400:
			return nil, fmt.Errorf("broker/nats: consume %s: consumer %s: %w", c.topic, c.name, err)
		}
		c.log.Warn("create consumer", slog.Int("attempt", attempt), slog.Any("err", err))
		if err := c.b.sleep(ctx, retryBackoff.Next(attempt, 0)); err != nil {
			return nil, err
		}
	}
}

// apiTimeout bounds one request to the server's JetStream API (a
// consumer's creation, a stream's lookup). A request written to a
// connection the server has just closed, before the client noticed, gets
// no reply: without a bound it would wait as long as its caller's
// context, a consumer started beside a server's restart never pulling.
const apiTimeout = 5 * time.Second

// errNotConnected is a pull's error while the connection is being made
// again.
var errNotConnected = errors.New("not connected to the server; reconnecting")

// serverMaxAckPending is the server's default bound on a consumer's
// unacknowledged deliveries, raised only for a larger Prefetch.
const serverMaxAckPending = 1000

// run pulls messages and hands each to a handler of its own until ctx
// ends.
func (c *consumer) run(ctx context.Context, cons jetstream.Consumer) error {
	slots := make(chan struct{}, c.opts.Prefetch) // one per handler running
	var handlers sync.WaitGroup
	defer handlers.Wait()
	failures := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if c.b.closed() {
			return ErrClosed
		}
		n, err := acquire(ctx, slots)
		if err != nil {
			return err
		}
		started, err := c.pull(ctx, cons, n, slots, &handlers)
		release(slots, n-started)
		if err == nil {
			failures = 0
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if c.b.closed() {
			return ErrClosed
		}
		failures++
		c.log.Warn("pull messages", slog.Int("failures", failures), slog.Any("err", err))
		if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) {
			if cons, err = c.ensure(ctx); err != nil {
				return err
			}
		}
		if err := c.b.sleep(ctx, retryBackoff.Next(failures, 0)); err != nil {
			return err
		}
	}
}

// pull asks for up to n messages, waiting at most pollWait for them, and
// starts a handler for each; it returns how many it started.
func (c *consumer) pull(ctx context.Context, cons jetstream.Consumer, n int, slots chan struct{}, handlers *sync.WaitGroup) (int, error) {
	if !c.b.nc.IsConnected() {
		// Not asked while reconnecting: a pull that cannot be sent would
		// leave its reply subscription behind (nats.go v1.55).
		return 0, errNotConnected
	}
	pctx, cancel := context.WithTimeout(ctx, pollWait)
	defer cancel()
	batch, err := cons.Fetch(n, jetstream.FetchContext(pctx))
	if err != nil {
		return 0, err
	}
	started := 0
	for msg := range batch.Messages() {
		if ctx.Err() != nil {
			continue // came as Consume ends: left unacknowledged
		}
		started++
		handlers.Add(1)
		go func() {
			defer handlers.Done()
			defer release(slots, 1)
			c.handle(ctx, msg)
		}()
	}
	err = batch.Error()
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		err = nil // the poll's end, or Consume's, which run sees
	}
	return started, err
}

// handle runs the handler on msg and settles msg by its result.
func (c *consumer) handle(ctx context.Context, msg jetstream.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		c.log.Error("delivery without JetStream metadata", slog.String("subject", msg.Subject()), slog.Any("err", err))
		return
	}
	d := broker.Delivery{Message: message(msg.Subject(), msg.Headers(), msg.Data()), Attempt: int(meta.NumDelivered)}
	key := seqKey{stream: c.stream, consumer: c.name, seq: meta.Sequence.Stream}
	log := c.log.With(slog.String("msg_id", d.ID), slog.Int("attempt", d.Attempt), slog.Uint64("stream_seq", key.seq))

	c.b.takeOff(key)
	herr := c.h(ctx, d)
	advised := c.b.land(key, herr)

	switch {
	case herr == nil:
		if err := msg.Ack(); err != nil {
			log.Warn("ack (the message will be delivered again)", slog.Any("err", err))
		}
	case ctx.Err() != nil:
		if advised {
			// The server gave up on the message while its handler ran, and
			// left its dead-lettering to this handler, which was stopped.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deadLetterTimeout)
			defer cancel()
			c.deadLetter(dctx, log, msg, d, key, broker.ReasonMaxDeliveries, nil)
		}
	case retry.IsPermanent(herr):
		c.deadLetter(ctx, log, msg, d, key, broker.ReasonPermanent, herr)
	case d.Attempt >= c.opts.MaxDeliveries || advised:
		c.deadLetter(ctx, log, msg, d, key, broker.ReasonMaxDeliveries, herr)
	default:
		log.Debug("handler failed; delivering again", slog.Any("err", herr))
		if err := msg.NakWithDelay(c.b.cfg.NakDelay); err != nil {
			log.Warn("nak (the message will be delivered again after the ack wait)", slog.Any("err", err))
		}
	}
}

// deadLetter hands d to opts.DeadLetter, then terminates msg; if
// DeadLetter fails, msg is delivered again later.
func (c *consumer) deadLetter(ctx context.Context, log *slog.Logger, msg jetstream.Msg, d broker.Delivery, key seqKey, reason string, lastErr error) {
	if c.b.deadLettered(key) {
		log.Info("already dead-lettered through the max-deliveries advisory")
		_ = msg.Term()
		return
	}
	if err := c.opts.DeadLetter(ctx, d, reason, lastErr); err != nil {
		log.Error("dead-letter (the message will be delivered again)", slog.String("reason", reason), slog.Any("err", err))
		if err := msg.NakWithDelay(c.b.cfg.NakDelay); err != nil {
			log.Warn("nak", slog.Any("err", err))
		}
		return
	}
	c.b.markDeadLettered(key)
	log.Info("dead-lettered", slog.String("reason", reason), slog.Any("err", lastErr))
	if err := msg.TermWithReason(reason); err != nil {
		log.Warn("terminate (the message may come again, and is recognised if it comes to this process)", slog.Any("err", err))
	}
}

// acquire takes one slot, waiting for it, then as many more as are free
// without waiting, and returns how many it took.
func acquire(ctx context.Context, slots chan struct{}) (int, error) {
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	n := 1
	for n < cap(slots) {
		select {
		case slots <- struct{}{}:
			n++
			continue
		default:
		}
		break
	}
	return n, nil
}

// release frees n slots.
func release(slots chan struct{}, n int) {
	for range n {
		<-slots
	}
}

// sleep waits d on the Broker's clock, or until ctx ends.
func (b *Broker) sleep(ctx context.Context, d time.Duration) error {
	t := b.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
