// Package outbox publishes messages in the same transaction as the data
// they are about. Add writes them to the store's outbox through the
// caller's transaction (an Executor bound to it), so the message commits
// or rolls back with the data; a Relay then claims pending messages in
// batches, publishes them to a broker with confirms, and marks them
// published. A crash between the publish and the mark publishes the
// message again with the same id, which consumers (an inbox) and brokers
// that dedupe absorb.
//
// Messages with one key go out in commit order: the store hands a relay a
// key's messages only in order, and the relay publishes them in rounds,
// at most one message of each key per round, so a key's next message is
// sent only once the previous one was confirmed; when one fails, it and
// the later ones of its key are retried after a backoff, in order.
// Messages without a key are all published in the first round.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// Add adds msgs to the outbox through ex, at now, and returns their ids.
// Bind ex to the caller's transaction (sqlite.Store.Tx, postgres.Store.Tx)
// so that the messages commit with the caller's data.
func Add(ctx context.Context, ex store.Executor, now time.Time, msgs ...store.OutboxMessage) ([]int64, error) {
	ids, err := ex.AddOutbox(ctx, now, msgs)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return ids, nil
}

// Defaults of Config.
const (
	DefaultSource       = "weir"
	DefaultBatch        = 100
	DefaultPollEvery    = time.Second
	DefaultLeaseFor     = time.Minute
	DefaultRetention    = 24 * time.Hour
	DefaultCleanupEvery = time.Minute
	cleanupBatch        = 1000
)

// Config configures a Relay.
type Config struct {
	// Store holds the outbox. Required.
	Store store.Store
	// Broker receives the messages; their topics must be declared.
	// Required.
	Broker broker.Broker
	// Source prefixes each message's broker id ("<Source>-<outbox id>"),
	// so that outboxes of several databases publishing to one broker do
	// not share ids. Keep it stable. Default "weir".
	Source string
	// ID names the relay as the holder of the messages it claims. Two
	// relays running at once must have different IDs. Default
	// hostname-pid.
	ID string
	// Batch is how many messages one round claims. Default 100.
	Batch int
	// PollEvery is how long the relay waits when the outbox is empty.
	// Default 1 s.
	PollEvery time.Duration
	// LeaseFor is how long a claimed message is held before another relay
	// may take it (this one having died). Default 1 min.
	LeaseFor time.Duration
	// Backoff is the wait before a message whose publish failed is tried
	// again, by its attempt count. Default 1 s ×2 up to 60 s, ±20%.
	Backoff backoff.Backoff
	// Breaker guards the broker: while it is open the relay publishes
	// nothing and waits until its next probe. Default a breaker that
	// opens on 5 failed publishes in 30 s, for 60 s.
	Breaker *breaker.Breaker
	// Retention is how long published messages are kept before the relay
	// deletes them, in batches of 1000 every CleanupEvery. Default 24 h.
	Retention time.Duration
	// CleanupEvery is how often published messages past Retention are
	// deleted. Default 1 min.
	CleanupEvery time.Duration
	// Clock and Logger. Defaults clock.Real and slog.Default().
	Clock  clock.Clock
	Logger *slog.Logger
}

// Relay publishes the outbox's messages.
type Relay struct {
	cfg Config
	ex  store.Executor
	log *slog.Logger
}

// New returns a Relay, or an error naming the bad field.
func New(cfg Config) (*Relay, error) {
	bad := func(format string, args ...any) (*Relay, error) {
		return nil, fmt.Errorf("outbox: Config."+format, args...)
	}
	switch {
	case cfg.Store == nil:
		return bad("Store is nil")
	case cfg.Broker == nil:
		return bad("Broker is nil")
	case cfg.Batch < 0:
		return bad("Batch %d is negative", cfg.Batch)
	case cfg.PollEvery < 0, cfg.LeaseFor < 0, cfg.Retention < 0, cfg.CleanupEvery < 0:
		return bad("PollEvery, LeaseFor, Retention and CleanupEvery must not be negative")
	}
	if err := cfg.Backoff.Validate(); err != nil {
		return bad("Backoff: %w", err)
	}
	if cfg.Source == "" {
		cfg.Source = DefaultSource
	}
	if cfg.ID == "" {
		host, _ := os.Hostname()
		cfg.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&cfg.PollEvery, DefaultPollEvery)
	def(&cfg.LeaseFor, DefaultLeaseFor)
	def(&cfg.Retention, DefaultRetention)
	def(&cfg.CleanupEvery, DefaultCleanupEvery)
	if cfg.Batch == 0 {
		cfg.Batch = DefaultBatch
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Breaker == nil {
		br, err := breaker.New(breaker.Config{Name: "outbox broker", Clock: cfg.Clock})
		if err != nil {
			return nil, fmt.Errorf("outbox: default breaker: %w", err)
		}
		cfg.Breaker = br
	}
	cfg.Backoff = cfg.Backoff.Normalized()
	return &Relay{cfg: cfg, ex: cfg.Store.Executor(), log: cfg.Logger.With("relay", cfg.ID)}, nil
}

// BrokerID is the id the relay gives the broker for outbox message id.
func (r *Relay) BrokerID(id int64) string { return r.cfg.Source + "-" + strconv.FormatInt(id, 10) }

// Run relays until ctx ends, then returns ctx's error. It works as a
// pipeline: while one batch is being published, the previous batch's
// outcome is written and the next batch claimed (a key's later messages
// wait in the store until its earlier ones are marked). It waits
// PollEvery when the outbox is empty, and while the breaker is open until
// its next probe; it deletes published messages past Retention every
// CleanupEvery. When ctx ends it records the batch being published; a
// batch claimed but not yet sent waits out its lease (LeaseFor) before a
// relay takes it again.
func (r *Relay) Run(ctx context.Context) error {
	batches := make(chan []*weirtype.OutboxMessage)
	results := make(chan outcome)
	go func() {
		defer close(results)
		for b := range batches {
			results <- r.publish(ctx, b, nil)
		}
	}()
	inFlight := false
	defer func() {
		close(batches)
		if inFlight {
			r.record(ctx, <-results)
		}
		for range results {
		}
	}()
	nextCleanup := r.cfg.Clock.Now()
	var next []*weirtype.OutboxMessage
	for {
		if now := r.cfg.Clock.Now(); !now.Before(nextCleanup) {
			if n, err := r.Cleanup(ctx); err != nil && ctx.Err() == nil {
				r.log.Error("delete published messages", "err", err.Error())
			} else if n > 0 {
				r.log.Info("deleted published messages past their retention", "messages", n)
			}
			nextCleanup = now.Add(r.cfg.CleanupEvery)
		}
		if next != nil {
			batches <- next
			inFlight, next = true, nil
		}
		// Claim the next batch while this one is published.
		var wait time.Duration
		if r.cfg.Breaker.State() == breaker.Open {
			wait = r.cfg.PollEvery
		} else {
			var err error
			next, err = r.claim(ctx)
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case err != nil:
				r.log.Error("claim from the outbox", "err", err.Error())
				wait = r.cfg.PollEvery
			}
		}
		if inFlight {
			o := <-results
			inFlight = false
			var open *breaker.OpenError
			if errors.As(o.err, &open) {
				wait = max(wait, open.RetryIn, r.cfg.PollEvery)
			}
			if err := r.record(ctx, o); err != nil && ctx.Err() == nil {
				r.log.Error("record the outcome of a publish", "err", err.Error())
			}
			if next == nil && wait == 0 && o.claimed > 0 {
				continue // the outbox may hold more: claim again at once
			}
		}
		if next == nil && wait == 0 {
			wait = r.cfg.PollEvery
		}
		if wait > 0 {
			t := r.cfg.Clock.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C():
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// RelayOnce claims one batch, publishes it and records the outcome, and
// returns how many messages it claimed. While the breaker is open it
// claims nothing and returns the breaker's *breaker.OpenError.
func (r *Relay) RelayOnce(ctx context.Context) (int, error) {
	ticket, err := r.cfg.Breaker.Allow()
	if err != nil {
		return 0, err
	}
	msgs, err := r.claim(ctx)
	if err != nil || len(msgs) == 0 {
		r.cfg.Breaker.Done(ticket, breaker.Ignored)
		return 0, err
	}
	return len(msgs), r.record(ctx, r.publish(ctx, msgs, &ticket))
}

// claim takes the next batch for this relay.
func (r *Relay) claim(ctx context.Context) ([]*weirtype.OutboxMessage, error) {
	msgs, err := r.ex.ClaimOutbox(ctx, store.OutboxClaimParams{Now: r.cfg.Clock.Now(), Limit: r.cfg.Batch, Owner: r.cfg.ID, LeaseFor: r.cfg.LeaseFor})
	if err != nil {
		return nil, fmt.Errorf("outbox: claim: %w", err)
	}
	return msgs, nil
}

// outcome is what publishing a batch did.
type outcome struct {
	claimed   int
	published []int64
	// failed are the messages not confirmed, and those behind them in
	// their keys; attempts is the most attempts among the first failed
	// ones, for the backoff; err is the last publish error.
	failed   []int64
	attempts int
	err      error
}

// publish publishes msgs, in rounds of at most one message per key,
// through the breaker, with ticket when the caller took one already.
func (r *Relay) publish(ctx context.Context, msgs []*weirtype.OutboxMessage, ticket *breaker.Ticket) outcome {
	o := outcome{claimed: len(msgs)}
	if ticket == nil {
		t, err := r.cfg.Breaker.Allow()
		if err != nil {
			o.err = err
			for _, m := range msgs {
				o.failed = append(o.failed, m.ID)
			}
			return o
		}
		ticket = &t
	}
	failedKeys := map[string]bool{}
	for _, round := range rounds(msgs) {
		var send []*weirtype.OutboxMessage
		for _, m := range round {
			if m.Key != "" && failedKeys[m.Key] {
				o.failed = append(o.failed, m.ID) // behind a failed one of its key: retried after it
				continue
			}
			send = append(send, m)
		}
		if len(send) == 0 {
			continue
		}
		bm := make([]broker.Message, len(send))
		for i, m := range send {
			bm[i] = broker.Message{ID: r.BrokerID(m.ID), Topic: m.Topic, Key: m.Key, Body: m.Payload, Headers: m.Headers}
		}
		err := r.cfg.Broker.Publish(ctx, bm)
		var pe *broker.PublishError
		for i, m := range send {
			var merr error
			switch {
			case err == nil:
			case errors.As(err, &pe) && i < len(pe.Errs):
				merr = pe.Errs[i]
			default:
				merr = err
			}
			if merr == nil {
				o.published = append(o.published, m.ID)
				continue
			}
			o.err = merr
			o.failed = append(o.failed, m.ID)
			o.attempts = max(o.attempts, m.Attempts)
			if m.Key != "" {
				failedKeys[m.Key] = true
			}
		}
	}
	if o.err != nil {
		r.cfg.Breaker.Done(*ticket, breaker.Failure)
	} else {
		r.cfg.Breaker.Done(*ticket, breaker.Success)
	}
	return o
}

// record marks o's published messages and schedules its failed ones.
func (r *Relay) record(ctx context.Context, o outcome) error {
	wctx := context.WithoutCancel(ctx)
	done := r.cfg.Clock.Now()
	if len(o.published) > 0 {
		if _, err := r.ex.MarkPublished(wctx, done, r.cfg.ID, o.published); err != nil {
			// The messages go again when their leases pass: duplicates,
			// which their ids make harmless.
			return fmt.Errorf("outbox: mark %d messages published: %w", len(o.published), err)
		}
	}
	if len(o.failed) > 0 {
		retryAt := done.Add(r.cfg.Backoff.Next(o.attempts+1, 0))
		var open *breaker.OpenError
		if errors.As(o.err, &open) {
			retryAt = done // not tried: due again once the breaker lets it
		}
		msg := "not published"
		if o.err != nil {
			msg = o.err.Error()
		}
		if _, err := r.ex.RetryOutbox(wctx, done, r.cfg.ID, o.failed, msg, retryAt); err != nil {
			return fmt.Errorf("outbox: record %d failed publishes: %w", len(o.failed), err)
		}
		if open == nil {
			r.log.Warn("publish failed; will retry", "messages", len(o.failed), "retry_at", retryAt, "err", msg)
		}
	}
	return nil
}

// rounds splits msgs, in id order, into publish rounds: round k holds the
// k-th message of each key, and the first round every message without a
// key.
func rounds(msgs []*weirtype.OutboxMessage) [][]*weirtype.OutboxMessage {
	seen := map[string]int{}
	var out [][]*weirtype.OutboxMessage
	for _, m := range msgs {
		k := 0
		if m.Key != "" {
			k = seen[m.Key]
			seen[m.Key]++
		}
		for len(out) <= k {
			out = append(out, nil)
		}
		out[k] = append(out[k], m)
	}
	return out
}

// Cleanup deletes the messages published more than Retention ago, in
// batches, and returns how many it deleted.
func (r *Relay) Cleanup(ctx context.Context) (int, error) {
	before := r.cfg.Clock.Now().Add(-r.cfg.Retention)
	total := 0
	for {
		n, err := r.ex.PurgeOutbox(ctx, before, cleanupBatch)
		total += n
		if err != nil {
			return total, fmt.Errorf("outbox: cleanup: %w", err)
		}
		if n < cleanupBatch {
			return total, nil
		}
	}
}
