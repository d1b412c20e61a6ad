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
// key's messages only in order, and none while an earlier one is held or
// waits out a backoff; the relay publishes a batch in rounds, at most one
// message of each key per round, so a key's next message is sent only
// once the previous one was confirmed; when one fails, it and the later
// ones of its key are retried after a backoff, in order. Messages without
// a key are all published in the first round.
//
// A message's broker id is "<Source>-<store id>-<outbox id>": the store id
// is the store's own random identity (store.OutboxIdentity), so that two
// stores publishing to one broker, or a store made again in place of a
// deleted one, never give two messages one id, which the broker's dedupe
// window or a consumer's inbox would drop as a duplicate.
//
// The relay's breaker pauses it while the broker is down. Once the breaker
// has opened, the relay lets a probe through after a wait that starts
// short and grows with the opens in a row (Config.ProbeAfter), and at once
// when the broker reports that it has connected again
// (broker.Connectivity). Each change of the breaker's state is logged.
//
// On PostgreSQL several relays can run at once, each holding the messages
// it claimed. On SQLite, whose single writer they could not share, one
// relay at a time holds the whole outbox and the others wait to take over
// (store.Features.ConcurrentRelays); its claims then write nothing, and it
// records a published batch with one row, a watermark, rather than a
// write per message.
package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/internal/crashpoint"
	"github.com/weirhq/weir/internal/defaults"
	"github.com/weirhq/weir/internal/tracing"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// Add adds msgs to the outbox through ex, at now, and returns their ids.
// Bind ex to the caller's transaction (sqlite.Store.Tx, postgres.Store.Tx:
// a store.Executor is a store.Outbox) so that the messages commit with
// the caller's data.
//
// The trace context of ctx's span, if any, goes with each message in its
// headers (traceparent), so that the consumer's span continues the trace.
func Add(ctx context.Context, ex store.Outbox, now time.Time, msgs ...store.OutboxMessage) ([]int64, error) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		msgs = slices.Clone(msgs)
		for i := range msgs {
			msgs[i].Headers = tracing.Inject(ctx, msgs[i].Headers)
		}
	}
	ids, err := ex.AddOutbox(ctx, now, msgs)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return ids, nil
}

// publishTraced publishes msgs in a span of its own ("weir.outbox.publish"),
// linked to the span that added each message. Without a TracerProvider
// it only publishes: the links would be read from each message's headers
// for a span that records nothing.
func (r *Relay) publishTraced(ctx context.Context, msgs []broker.Message) error {
	if r.cfg.TracerProvider == nil {
		return r.cfg.Broker.Publish(ctx, msgs)
	}
	var links []trace.Link
	for _, m := range msgs {
		if sc := tracing.SpanContext(m.Headers); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	ctx, span := r.tracer.Start(ctx, "weir.outbox.publish", trace.WithSpanKind(trace.SpanKindProducer), trace.WithLinks(links...),
		trace.WithAttributes(attribute.Int("weir.outbox.messages", len(msgs)), attribute.String("weir.outbox.relay", r.cfg.ID)))
	err := r.cfg.Broker.Publish(ctx, msgs)
	tracing.End(span, err)
	return err
}

// Defaults of Config.
const (
	DefaultSource       = "weir"
	DefaultBatch        = 100
	DefaultPollEvery    = time.Second
	DefaultLeaseFor     = time.Minute
	DefaultRetention    = 24 * time.Hour
	DefaultCleanupEvery = time.Minute
	// DefaultProbeFirst is the default breaker's open delay, and the
	// relay's first wait before a probe (DefaultProbeAfter's base).
	DefaultProbeFirst = 2 * time.Second
	// DefaultProbeMax is DefaultProbeAfter's cap.
	DefaultProbeMax = time.Minute
	cleanupBatch    = 1000
	// maxQueued is how many batches Run holds at most: one published, one
	// waiting to be, one being recorded.
	maxQueued = 3
	// declareLogEvery is how many failed declares of Config.Topics, the
	// broker not connected, make one warning.
	declareLogEvery = 30
	// releaseTimeout bounds the write that gives back what a stopping
	// relay holds.
	releaseTimeout = 10 * time.Second
)

// DefaultProbeAfter is Config.ProbeAfter's default: 2 s, doubling at each
// open in a row, up to 60 s, without jitter.
var DefaultProbeAfter = backoff.Exponential(DefaultProbeFirst, 2, DefaultProbeMax).WithJitter(backoff.JitterNone)

// Config configures a Relay.
type Config struct {
	// Store holds the outbox. Required.
	Store store.Store
	// Broker receives the messages; their topics must be declared.
	// Required.
	Broker broker.Broker
	// Source begins each message's broker id,
	// "<Source>-<store id>-<outbox id>", where the store id is the store's
	// own random identity (store.OutboxIdentity): the ids of two stores,
	// or of a store made again after its database was deleted, never
	// meet. It names what publishes, for those who read the ids; keep it
	// stable, since a message published again must keep its id. Messages
	// added before the store had an identity (by an earlier weir) keep
	// the id it gave them, "<Source>-<outbox id>". Default "weir".
	Source string
	// ID names the relay as the holder of the messages it claims. Two
	// relays running at once must have different IDs. Default
	// hostname-pid. On a store whose Features().ConcurrentRelays is false
	// (SQLite) one relay at a time holds the outbox; another waits,
	// polling, to take over once the holder's lease has ended.
	ID string
	// Batch is how many messages one round claims. Default 100.
	Batch int
	// PollEvery is how long the relay waits when the outbox is empty.
	// Default 1 s.
	PollEvery time.Duration
	// LeaseFor is how long a claimed message (on SQLite: the outbox) is
	// held before another relay may take it, this one having died; each
	// claim renews it. Default 1 min.
	LeaseFor time.Duration
	// Backoff is the wait before a message whose publish failed is tried
	// again, by its attempt count. A message that failed because the
	// broker was not connected (broker.ErrNotConnected) is due again at
	// once, the breaker pacing the retries. Default 1 s ×2 up to 60 s,
	// ±20%.
	Backoff backoff.Backoff
	// Breaker guards the broker: while it is open the relay publishes
	// nothing. Once it has opened, the relay lets a probe through after
	// ProbeAfter, or at once when the broker reports that it has
	// reconnected (broker.Connectivity), and never before the breaker's
	// own open delay has passed. The relay logs each change of its state
	// (opened, with the error; half-open; closed). Default a breaker that
	// opens on 5 failed publishes in 30 s, whose open delay is
	// ProbeAfter's first (2 s by default).
	Breaker *breaker.Breaker
	// ProbeAfter is how long the relay waits, once the breaker has
	// opened, before it lets a probe through, by how many times in a row
	// the breaker opened (a failed probe opens it again): short for a
	// blip, longer for a broker that stays down. Default 2 s, doubling,
	// up to 60 s, without jitter (DefaultProbeAfter).
	ProbeAfter backoff.Backoff
	// Topics are declared (Broker.Declare) by Run before it publishes,
	// and declared again, every PollEvery or up to 2 s after failures,
	// until the broker takes them: a relay started while the broker is
	// unreachable declares them when it is back. Default none.
	Topics []string
	// Retention is how long published messages are kept before the relay
	// deletes them, in batches of 1000 every CleanupEvery. Default 24 h.
	Retention time.Duration
	// CleanupEvery is how often published messages past Retention are
	// deleted. Default 1 min.
	CleanupEvery time.Duration
	// Clock and Logger. Defaults clock.Real and slog.Default().
	Clock  clock.Clock
	Logger *slog.Logger
	// TracerProvider, when set, makes a span of each publish
	// ("weir.outbox.publish"), linked to the spans that added its
	// messages. Default none: no spans.
	TracerProvider trace.TracerProvider
}

// Relay publishes the outbox's messages.
type Relay struct {
	cfg    Config
	ex     store.Outbox
	log    *slog.Logger
	tracer trace.Tracer
	guard  *guard
	// ids makes the broker ids, once the store's identity was read.
	ids atomic.Pointer[brokerIDs]
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
	}
	const field = "outbox: Config."
	if err := cmp.Or(
		defaults.Set(field+"Batch", &cfg.Batch, DefaultBatch),
		defaults.Set(field+"PollEvery", &cfg.PollEvery, DefaultPollEvery),
		defaults.Set(field+"LeaseFor", &cfg.LeaseFor, DefaultLeaseFor),
		defaults.Set(field+"Retention", &cfg.Retention, DefaultRetention),
		defaults.Set(field+"CleanupEvery", &cfg.CleanupEvery, DefaultCleanupEvery),
	); err != nil {
		return nil, err
	}
	if err := cfg.Backoff.Validate(); err != nil {
		return bad("Backoff: %w", err)
	}
	if cfg.ProbeAfter == (backoff.Backoff{}) {
		cfg.ProbeAfter = DefaultProbeAfter
	}
	if err := cfg.ProbeAfter.Validate(); err != nil {
		return bad("ProbeAfter: %w", err)
	}
	for i, t := range cfg.Topics {
		if t == "" {
			return bad("Topics[%d] is empty", i)
		}
	}
	cfg.Source = cmp.Or(cfg.Source, DefaultSource)
	if cfg.ID == "" {
		host, _ := os.Hostname()
		cfg.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	cfg.Clock = clock.Or(cfg.Clock)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.Breaker == nil {
		br, err := breaker.New(breaker.Config{Name: "outbox broker", OpenDelay: cfg.ProbeAfter.Scheduled(1), Clock: cfg.Clock})
		if err != nil {
			return nil, fmt.Errorf("outbox: default breaker: %w", err)
		}
		cfg.Breaker = br
	}
	cfg.Backoff = cfg.Backoff.Normalized()
	log := cfg.Logger.With("relay", cfg.ID)
	return &Relay{cfg: cfg, ex: cfg.Store.Executor(), log: log, tracer: tracing.Tracer(cfg.TracerProvider),
		guard: newGuard(cfg.Breaker, cfg.Broker, cfg.Clock, log, cfg.ProbeAfter)}, nil
}

// BrokerID returns the id the relay gives the broker for outbox message
// id: "<Source>-<store id>-<id>", or "<Source>-<id>" for a message added
// before the store had an identity. It reads the store's identity the
// first time (Run and RelayOnce read it before they claim).
func (r *Relay) BrokerID(ctx context.Context, id int64) (string, error) {
	ids, err := r.brokerIDs(ctx)
	if err != nil {
		return "", err
	}
	return ids.id(id), nil
}

// brokerIDs makes the broker ids of one store's messages.
type brokerIDs struct {
	prefix        string // "<Source>-<store id>-"
	legacyPrefix  string // "<Source>-"
	legacyThrough int64
}

// id returns the broker id of outbox message id.
func (b *brokerIDs) id(id int64) string {
	p := b.prefix
	if id <= b.legacyThrough {
		p = b.legacyPrefix
	}
	var buf [64]byte // on the stack unless Source is long
	return string(strconv.AppendInt(append(buf[:0], p...), id, 10))
}

// brokerIDs returns what makes the broker ids, reading the store's
// identity the first time.
func (r *Relay) brokerIDs(ctx context.Context) (*brokerIDs, error) {
	if b := r.ids.Load(); b != nil {
		return b, nil
	}
	ident, err := r.ex.OutboxIdentity(ctx)
	if err != nil {
		return nil, fmt.Errorf("outbox: read the store's identity: %w", err)
	}
	if ident.StoreID == "" {
		return nil, errors.New("outbox: the store's identity is empty")
	}
	b := &brokerIDs{prefix: r.cfg.Source + "-" + ident.StoreID + "-", legacyPrefix: r.cfg.Source + "-", legacyThrough: ident.LegacyThrough}
	r.ids.Store(b)
	return b, nil
}

// Run relays until ctx ends, then returns ctx's error.
//
// It works as a pipeline of three stages, so that the broker and the
// store are both kept busy: while one batch is published, the next is
// claimed and queued behind it, and the outcome of the one before is
// recorded. A batch is claimed holding the ids of the batches not yet
// recorded, so it holds no message of a key that they hold, and can go
// out before their outcomes are written.
//
// It first declares Config.Topics, trying again until the broker takes
// them. It waits PollEvery when the outbox is empty; while the breaker is
// open it waits for its probe, looking every PollEvery whether the broker
// has reconnected. It deletes published messages past Retention every
// CleanupEvery.
// When ctx ends it records the outcome of the batch being published, and
// gives back what it holds and did not send (Executor.ReleaseOutbox), so
// that another relay can take over at once.
func (r *Relay) Run(ctx context.Context) error {
	if err := r.declare(ctx); err != nil {
		return err
	}
	batches := make(chan []*weirtype.OutboxMessage, 1)
	outcomes := make(chan outcome, 1)
	recorded := make(chan outcome, maxQueued)
	go func() {
		defer close(outcomes)
		for b := range batches {
			if ctx.Err() != nil {
				outcomes <- outcome{unsent: weirtype.OutboxIDs(b)}
				continue
			}
			outcomes <- r.publish(ctx, b, nil)
		}
	}()
	go func() {
		defer close(recorded)
		for o := range outcomes {
			r.recordUntilDone(ctx, o)
			recorded <- o
		}
	}()
	var (
		queued     [][]int64 // the ids of the batches claimed and not recorded, oldest first
		unsent     []int64   // claimed and not sent, ctx having ended: given back at the end
		claimFails int       // claims failed in a row (the store is down): the relay waits longer
	)
	defer func() {
		close(batches)
		for o := range recorded {
			unsent = append(unsent, o.unsent...)
		}
		r.release(ctx, unsent)
	}()
	nextCleanup := r.cfg.Clock.Now()
	for {
		if now := r.cfg.Clock.Now(); !now.Before(nextCleanup) {
			if n, err := r.Cleanup(ctx); err != nil && ctx.Err() == nil {
				r.log.Error("delete published messages", "err", err.Error())
			} else if n > 0 {
				r.log.Info("deleted published messages past their retention", "messages", n)
			}
			nextCleanup = now.Add(r.cfg.CleanupEvery)
		}
		var wait time.Duration
		took := func(o outcome) {
			queued = queued[1:]
			unsent = append(unsent, o.unsent...)
			var open *breaker.OpenError
			if errors.As(o.err, &open) || errors.Is(o.err, broker.ErrNotConnected) {
				// Refused by the breaker, or the broker is not
				// connected: look again after a poll, and then wait as
				// the guard says.
				wait = max(wait, r.cfg.PollEvery)
			}
		}
	drain:
		for len(queued) > 0 {
			select {
			case o := <-recorded:
				took(o)
			default:
				break drain
			}
		}
		if wait == 0 {
			wait = r.guard.paused(r.cfg.PollEvery)
		}
		switch {
		case wait > 0:
		case len(queued) < maxQueued:
			next, err := r.claim(ctx, slices.Concat(queued...))
			if err == nil && claimFails > 0 {
				r.log.Info("claim from the outbox: the store answers again", "failures_in_a_row", claimFails)
				claimFails = 0
			}
			switch {
			case ctx.Err() != nil:
				unsent = append(unsent, weirtype.OutboxIDs(next)...)
				return ctx.Err()
			case err != nil:
				claimFails++
				r.log.Error("claim from the outbox", "failures_in_a_row", claimFails, "err", err.Error())
				wait = backoff.PollDelay(r.cfg.PollEvery, claimFails)
			case len(next) > 0:
				batches <- next
				queued = append(queued, weirtype.OutboxIDs(next))
				continue
			}
		}
		if len(queued) > 0 {
			select {
			case o := <-recorded:
				took(o)
			case <-ctx.Done():
				return ctx.Err()
			}
			if wait == 0 {
				continue // claim again: the outbox may hold more
			}
		}
		if wait == 0 {
			wait = r.cfg.PollEvery // the outbox is empty
		}
		if err := r.sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// sleep waits d on the relay's clock, or until ctx ends, and then returns
// ctx's error.
func (r *Relay) sleep(ctx context.Context, d time.Duration) error {
	t := r.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// declare declares Config.Topics, trying again while ctx lasts until the
// broker takes them, and returns ctx's error if it ends first.
func (r *Relay) declare(ctx context.Context) error {
	if len(r.cfg.Topics) == 0 {
		return nil
	}
	for attempt := 1; ; attempt++ {
		err := r.cfg.Broker.Declare(ctx, r.cfg.Topics...)
		if err == nil {
			if attempt > 1 {
				r.log.Info("outbox: declared the topics", "topics", r.cfg.Topics, "attempts", attempt)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := backoff.PollDelay(r.cfg.PollEvery, attempt)
		// The first failure is a warning (an error if the broker
		// answered), and then one in declareLogEvery: a broker that
		// stays down does not fill the log.
		level := slog.LevelDebug
		switch {
		case !errors.Is(err, broker.ErrNotConnected):
			level = slog.LevelError
		case attempt%declareLogEvery == 1:
			level = slog.LevelWarn
		}
		r.log.Log(ctx, level, "outbox: declare the topics; will try again", "topics", r.cfg.Topics, "attempt", attempt, "retry_in", wait, "err", err.Error())
		if err := r.sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// recordUntilDone records o, trying again after a backoff while the
// store fails and ctx lasts: until it is recorded its messages stay held,
// so that the relay claims no more behind them and does not publish them
// again. Once ctx has ended it tries once more, for at most
// releaseTimeout; what it cannot record then is published again by the
// next relay (duplicates, which the ids make harmless).
func (r *Relay) recordUntilDone(ctx context.Context, o outcome) {
	for attempt := 1; ; attempt++ {
		stopping := ctx.Err() != nil
		rctx := ctx
		if stopping {
			var cancel context.CancelFunc
			rctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
			defer cancel()
		}
		err := r.record(rctx, o)
		switch {
		case err == nil:
			return
		case stopping:
			r.log.Warn("record the outcome of a publish while stopping; the next relay publishes it again", "err", err.Error())
			return
		case ctx.Err() != nil:
			continue // ended during the write: once more, as stopping
		}
		wait := r.cfg.Backoff.Next(attempt, 0)
		r.log.Error("record the outcome of a publish; will try again", "err", err.Error(), "retry_in", wait)
		_ = r.sleep(ctx, wait) // ended early: the next round records once more, as stopping
	}
}

// RelayOnce claims one batch, publishes it and records the outcome, and
// returns how many messages it claimed. While the breaker is open, or the
// relay waits to probe the broker, it claims nothing and returns a
// *breaker.OpenError. When messages were not published it returns a
// *PublishError, which wraps the broker's error, once it has recorded
// them to be tried again. If ctx ends during the publish, what was not
// sent is given back, and the error wraps ctx's.
func (r *Relay) RelayOnce(ctx context.Context) (int, error) {
	ticket, err := r.guard.allow()
	if err != nil {
		return 0, err
	}
	msgs, err := r.claim(ctx, nil)
	if err != nil || len(msgs) == 0 {
		r.guard.done(ticket, breaker.Ignored, nil)
		return 0, err
	}
	o := r.publish(ctx, msgs, &ticket)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	var errs []error
	if err := r.record(rctx, o); err != nil {
		errs = append(errs, err)
	}
	if len(o.failed) > 0 {
		errs = append(errs, &PublishError{Failed: len(o.failed), Claimed: len(msgs), Err: o.err})
	}
	if len(o.unsent) > 0 {
		r.release(ctx, o.unsent)
		errs = append(errs, fmt.Errorf("outbox: %d of %d messages not sent, given back: %w", len(o.unsent), len(msgs), context.Cause(ctx)))
	}
	if len(errs) == 1 {
		return len(msgs), errs[0]
	}
	return len(msgs), errors.Join(errs...)
}

// PublishError is RelayOnce's error when some of the messages it claimed
// were not published: the broker did not confirm them, or they were held
// back behind a message of their key that it did not confirm. They were
// recorded, unless RelayOnce's error also says the record failed, to be
// tried again after Config.Backoff.
type PublishError struct {
	// Failed is how many of the Claimed messages were not published.
	Failed, Claimed int
	// Err is the broker's error (the last, if several): a
	// *broker.PublishError's part, broker.ErrNotConnected...
	Err error
}

func (e *PublishError) Error() string {
	return fmt.Sprintf("outbox: %d of %d messages not published, to be tried again: %v", e.Failed, e.Claimed, e.Err)
}

// Unwrap returns the broker's error.
func (e *PublishError) Unwrap() error { return e.Err }

// release gives back the messages ids, which this relay claimed and did
// not send, and on a store with one relay at a time its hold on the
// outbox; it only logs a failure, after which they wait out their lease.
func (r *Relay) release(ctx context.Context, ids []int64) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if _, err := r.ex.ReleaseOutbox(wctx, r.cfg.Clock.Now(), r.cfg.ID, ids); err != nil {
		r.log.Warn("give back the messages not sent; they wait out their lease", "messages", len(ids), "err", err.Error())
	}
}

// claim takes the next batch for this relay, which holds the messages
// holding already.
func (r *Relay) claim(ctx context.Context, holding []int64) ([]*weirtype.OutboxMessage, error) {
	if _, err := r.brokerIDs(ctx); err != nil {
		return nil, err
	}
	msgs, err := r.ex.ClaimOutbox(ctx, store.OutboxClaimParams{
		Now: r.cfg.Clock.Now(), Limit: r.cfg.Batch, Owner: r.cfg.ID, LeaseFor: r.cfg.LeaseFor, Holding: holding})
	if err != nil {
		return nil, fmt.Errorf("outbox: claim: %w", err)
	}
	return msgs, nil
}

// outcome is what publishing a batch did.
type outcome struct {
	published []int64
	// failed are the messages not confirmed, and those behind them in
	// their keys; attempts is the most attempts among the first failed
	// ones, for the backoff; err is the last publish error.
	failed   []int64
	attempts int
	err      error
	// unsent are the messages not confirmed because ctx ended: given
	// back, with no attempt counted.
	unsent []int64
}

// publish publishes msgs, in rounds of at most one message per key,
// through the breaker, with ticket when the caller took one already.
func (r *Relay) publish(ctx context.Context, msgs []*weirtype.OutboxMessage, ticket *breaker.Ticket) outcome {
	var o outcome
	if ticket == nil {
		t, err := r.guard.allow()
		if err != nil {
			o.err = err
			for _, m := range msgs {
				o.failed = append(o.failed, m.ID)
			}
			return o
		}
		ticket = &t
	}
	brokerIDs := r.ids.Load() // claim read it
	o.published = make([]int64, 0, len(msgs))
	var failedKeys map[string]bool // made at the first failure of a keyed message
	for _, round := range rounds(msgs) {
		send := round
		if failedKeys != nil {
			send = nil
			for _, m := range round {
				if m.Key != "" && failedKeys[m.Key] {
					o.failed = append(o.failed, m.ID) // behind a failed one of its key: retried after it
					continue
				}
				send = append(send, m)
			}
		}
		if len(send) == 0 {
			continue
		}
		bm := make([]broker.Message, len(send))
		for i, m := range send {
			bm[i] = broker.Message{ID: brokerIDs.id(m.ID), Topic: m.Topic, Key: m.Key, Body: m.Payload, Headers: m.Headers}
		}
		crashpoint.Hit(crashpoint.OutboxBeforePublish)
		err := r.publishTraced(ctx, bm)
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
				if failedKeys == nil {
					failedKeys = map[string]bool{}
				}
				failedKeys[m.Key] = true
			}
		}
	}
	switch {
	case ctx.Err() != nil:
		r.guard.done(*ticket, breaker.Ignored, nil)
		o.unsent, o.failed, o.err = o.failed, nil, nil
	case o.err != nil:
		r.guard.done(*ticket, breaker.Failure, o.err)
	default:
		r.guard.done(*ticket, breaker.Success, nil)
	}
	return o
}

// record marks o's published messages and schedules its failed ones.
func (r *Relay) record(ctx context.Context, o outcome) error {
	done := r.cfg.Clock.Now()
	if len(o.published) > 0 {
		crashpoint.Hit(crashpoint.OutboxAfterPublish)
		if _, err := r.ex.MarkPublished(ctx, done, r.cfg.ID, o.published); err != nil {
			// Unmarked, they are published again (by Run once it gives
			// up recording, or by another relay after this one's lease):
			// duplicates, which their ids make harmless.
			return fmt.Errorf("outbox: mark %d messages published: %w", len(o.published), err)
		}
	}
	if len(o.failed) > 0 {
		retryAt := done.Add(r.cfg.Backoff.Next(o.attempts+1, 0))
		var open *breaker.OpenError
		switch {
		case errors.As(o.err, &open):
			retryAt = done // not tried: due again once the breaker lets it
		case errors.Is(o.err, broker.ErrNotConnected):
			// The broker is down, not the message: due again at once,
			// the breaker pacing the retries, so that the backlog goes
			// out as soon as the broker is back rather than after each
			// message's backoff.
			retryAt = done
		}
		msg := "not published"
		if o.err != nil {
			msg = o.err.Error()
		}
		if _, err := r.ex.RetryOutbox(ctx, done, r.cfg.ID, o.failed, msg, retryAt); err != nil {
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
// key. Messages of distinct keys, or none, make one round: msgs itself.
func rounds(msgs []*weirtype.OutboxMessage) [][]*weirtype.OutboxMessage {
	if distinctKeys(msgs) {
		return [][]*weirtype.OutboxMessage{msgs}
	}
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

// distinctKeys reports whether no two of msgs have one key.
func distinctKeys(msgs []*weirtype.OutboxMessage) bool {
	var seen map[string]bool // made at the first key
	for _, m := range msgs {
		if m.Key == "" {
			continue
		}
		if seen[m.Key] {
			return false
		}
		if seen == nil {
			seen = make(map[string]bool, len(msgs))
		}
		seen[m.Key] = true
	}
	return true
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
