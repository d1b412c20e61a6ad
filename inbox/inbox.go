// Package inbox makes a consumer handle each message once. The handler's
// effects and an inbox record of the message's id commit in one database
// transaction, and only then is the message acknowledged; a message
// delivered again, or published twice with one id, finds its record and is
// acknowledged without running the handler.
//
// Records are kept for Retention (7 days by default), which must be longer
// than the window in which the broker may deliver a message again: the
// broker's own dedupe window, and the time a message can wait unacked.
package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/internal/crashpoint"
	"github.com/weirhq/weir/internal/tracing"
	"github.com/weirhq/weir/store"
)

// DefaultRetention is how long inbox records are kept by default.
const DefaultRetention = 7 * 24 * time.Hour

// RunTx runs fn in a transaction of the consumer's database, with an
// Executor bound to it, and commits if fn returned nil:
// sqlite.Store.RunTx and postgres.Store.RunTx have this shape.
type RunTx[T any] func(ctx context.Context, fn func(tx T, ex store.Executor) error) error

// Handler is a consumer's handler whose effects are written in tx.
type Handler[T any] func(ctx context.Context, tx T, d broker.Delivery) error

// Config configures Handle.
type Config struct {
	// Clock and Logger. Defaults clock.Real and slog.Default().
	Clock  clock.Clock
	Logger *slog.Logger
	// TracerProvider, when set, makes a span of each delivery handled
	// ("weir.consume <topic>"), the child of the span whose trace context
	// the message carries (outbox.Add puts it there). Default none.
	TracerProvider trace.TracerProvider
}

// Handle returns a broker.Handler that runs h for each delivery in a
// transaction of runTx together with the delivery's inbox record, and
// skips a delivery whose record exists. h's error rolls the transaction
// back, record included, and goes to the broker (which delivers the
// message again, or dead-letters it).
func Handle[T any](runTx RunTx[T], h Handler[T], cfg Config) broker.Handler {
	clk := clock.Or(cfg.Clock)
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	tracer := tracing.Tracer(cfg.TracerProvider)
	return func(ctx context.Context, d broker.Delivery) (err error) {
		ctx, span := tracer.Start(tracing.Extract(ctx, d.Headers), "weir.consume "+d.Topic, trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(attribute.String("weir.message.id", d.ID), attribute.String("weir.message.topic", d.Topic), attribute.Int("weir.message.attempt", d.Attempt)))
		defer func() { tracing.End(span, err) }()
		var duplicate bool
		err = runTx(ctx, func(tx T, ex store.Executor) error {
			first, err := ex.RecordInbox(ctx, clk.Now(), d.Topic, d.ID)
			if err != nil {
				return fmt.Errorf("inbox: record %s/%s: %w", d.Topic, d.ID, err)
			}
			if !first {
				duplicate = true
				return nil
			}
			return h(ctx, tx, d)
		})
		if err != nil {
			return err
		}
		crashpoint.Hit(crashpoint.ConsumerBeforeAck)
		if duplicate {
			log.Info("message handled before; acknowledged without handling it again", "topic", d.Topic, "message_id", d.ID, "attempt", d.Attempt)
		}
		return nil
	}
}

// Purge deletes the inbox records older than retention (DefaultRetention
// when zero), in batches, and returns how many it deleted. It refuses a
// retention not longer than the broker's dedupe window (f, the consuming
// broker's Features): past the window the broker no longer drops a
// republished message, and the inbox must still know it.
func Purge(ctx context.Context, ex store.Inbox, now time.Time, retention time.Duration, f broker.Features) (int, error) {
	if retention < 0 {
		return 0, errors.New("inbox: retention is negative")
	}
	if retention == 0 {
		retention = DefaultRetention
	}
	if retention <= f.DedupeWindow {
		return 0, fmt.Errorf("inbox: retention %v is not longer than the %s broker's dedupe window %v", retention, f.Name, f.DedupeWindow)
	}
	const batch = 1000
	total := 0
	for {
		n, err := ex.PurgeInbox(ctx, now.Add(-retention), batch)
		total += n
		if err != nil {
			return total, fmt.Errorf("inbox: purge: %w", err)
		}
		if n < batch {
			return total, nil
		}
	}
}
