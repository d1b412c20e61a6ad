package nats

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weirhq/weir/broker"
)

// A message reaches opts.DeadLetter by one of two paths:
//
//   - the handler path (consume.go): its handler failed at its last
//     delivery, or permanently; the message is then terminated, for which
//     the server sends no max-deliveries advisory;
//   - the advisory path (here): the server gave up on the message after
//     opts.MaxDeliveries deliveries that no handler settled (its consumer
//     died each time, or was stopped), and said so in an advisory.
//
// The two meet when a handler at the last delivery runs past AckWait: the
// server gives up and advises while the handler still runs. The Broker
// keeps, in memory, the deliveries whose handler runs (flights) and the
// messages recently dead-lettered or failed (recent); an advisory for a
// delivery in flight is left to its handler, and one for a message
// already dead-lettered is dropped.

// seqKey names a message of a consumer.
type seqKey struct {
	stream, consumer string
	seq              uint64 // in the stream
}

// flight is a delivery whose handler runs.
type flight struct {
	advised bool // the max-deliveries advisory came meanwhile
}

// outcome is what became of a message lately.
type outcome struct {
	at           time.Time
	deadLettered bool
	lastErr      error // its handler's last error, if it failed
}

// recentFor is how long an outcome is kept: longer than an advisory takes
// to arrive after the delivery it follows.
const recentFor = 10 * time.Minute

// takeOff records that key's handler runs.
func (b *Broker) takeOff(key seqKey) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flights[key] = &flight{}
}

// land records that key's handler returned herr, and reports whether the
// max-deliveries advisory came while it ran.
func (b *Broker) land(key seqKey, herr error) (advised bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.flights[key]
	delete(b.flights, key)
	if herr != nil {
		o := b.recent[key]
		o.at, o.lastErr = b.cfg.Clock.Now(), herr
		b.setRecent(key, o)
	}
	return f != nil && f.advised
}

// deadLettered reports whether key was dead-lettered lately.
func (b *Broker) deadLettered(key seqKey) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.recent[key].deadLettered
}

// markDeadLettered records that key was dead-lettered.
func (b *Broker) markDeadLettered(key seqKey) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o := b.recent[key]
	o.at, o.deadLettered = b.cfg.Clock.Now(), true
	b.setRecent(key, o)
}

// claimAdvised decides who dead-letters key, the subject of an advisory:
// its handler, if one runs (false); nobody, if it was dead-lettered
// (false); the caller otherwise (true, with the last handler error known).
func (b *Broker) claimAdvised(key seqKey) (mine bool, lastErr error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if f := b.flights[key]; f != nil {
		f.advised = true
		return false, nil
	}
	o := b.recent[key]
	if o.deadLettered {
		return false, nil
	}
	return true, o.lastErr
}

// setRecent stores o, dropping the outcomes older than recentFor. b.mu is
// held.
func (b *Broker) setRecent(key seqKey, o outcome) {
	b.recent[key] = o
	if len(b.recent)%256 != 0 {
		return // prune now and then, not at every call
	}
	now := b.cfg.Clock.Now()
	for k, v := range b.recent {
		if now.Sub(v.at) > recentFor {
			delete(b.recent, k)
		}
	}
}

// advisory is the part of JetStream's max-deliveries advisory
// (io.nats.jetstream.advisory.v1.max_deliver) that is used here.
type advisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// advisorySubject is where the server announces that the consumer gave up
// on a message after its MaxDeliver deliveries.
func advisorySubject(stream, consumer string) string {
	return "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + stream + "." + consumer
}

// watchAdvisories subscribes to the consumer's max-deliveries advisories
// until the returned stop is called, which waits for the dead-lettering
// they started. The members of a group subscribe as a queue group, so
// that each advisory reaches one of them.
func (c *consumer) watchAdvisories(ctx context.Context) (stop func(), err error) {
	var (
		mu      sync.Mutex
		stopped bool
		work    sync.WaitGroup
	)
	sub, err := c.b.nc.QueueSubscribe(advisorySubject(c.stream, c.name), "weir_"+c.stream+"_"+c.name, func(m *natsgo.Msg) {
		var adv advisory
		if err := json.Unmarshal(m.Data, &adv); err != nil || adv.StreamSeq == 0 {
			c.log.Error("unreadable max-deliveries advisory", slog.String("data", string(m.Data)), slog.Any("err", err))
			return
		}
		key := seqKey{stream: c.stream, consumer: c.name, seq: adv.StreamSeq}
		mine, lastErr := c.b.claimAdvised(key)
		if !mine {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		work.Add(1)
		go func() {
			defer work.Done()
			c.deadLetterAdvised(ctx, key, int(adv.Deliveries), lastErr)
		}()
	})
	if err != nil {
		return nil, err
	}
	return func() {
		if err := sub.Unsubscribe(); err != nil && !errors.Is(err, natsgo.ErrConnectionClosed) {
			c.log.Warn("unsubscribe from advisories", slog.Any("err", err))
		}
		mu.Lock()
		stopped = true
		mu.Unlock()
		work.Wait()
	}, nil
}

// deadLetterAdvised reads the message the server gave up on from the
// stream and hands it to opts.DeadLetter, retrying both with backoff
// until ctx ends. The message stays in the stream, which other groups
// may still be reading; this group will not be given it again.
func (c *consumer) deadLetterAdvised(ctx context.Context, key seqKey, deliveries int, lastErr error) {
	log := c.log.With(slog.Uint64("stream_seq", key.seq), slog.Int("attempt", deliveries))
	for attempt := 1; ; attempt++ {
		err := c.tryDeadLetterAdvised(ctx, log, key, deliveries, lastErr)
		if err == nil {
			return
		}
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			log.Warn("max deliveries reached, but the message is gone from the stream: nothing to dead-letter")
			return
		}
		if ctx.Err() != nil {
			log.Error("max deliveries reached; the consumer stopped before the message was dead-lettered: it stays in the stream, undelivered",
				slog.Any("err", err))
			return
		}
		log.Warn("dead-letter after max deliveries", slog.Int("try", attempt), slog.Any("err", err))
		if c.b.sleep(ctx, retryBackoff.Next(attempt, 0)) != nil {
			log.Error("max deliveries reached; the consumer stopped before the message was dead-lettered: it stays in the stream, undelivered")
			return
		}
	}
}

func (c *consumer) tryDeadLetterAdvised(ctx context.Context, log *slog.Logger, key seqKey, deliveries int, lastErr error) error {
	rctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	s, err := c.b.js.Stream(rctx, c.stream)
	if err != nil {
		return err
	}
	raw, err := s.GetMsg(rctx, key.seq)
	if err != nil {
		return err
	}
	d := broker.Delivery{Message: message(raw.Subject, raw.Header, raw.Data), Attempt: deliveries}
	if err := c.opts.DeadLetter(ctx, d, broker.ReasonMaxDeliveries, lastErr); err != nil {
		return err
	}
	c.b.markDeadLettered(key)
	log.Info("dead-lettered after max deliveries", slog.String("msg_id", d.ID), slog.Any("err", lastErr))
	return nil
}
