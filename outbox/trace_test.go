package outbox_test

import (
	"context"
	"database/sql"
	"log/slog"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/inbox"
	"github.com/weirhq/weir/outbox"
	"github.com/weirhq/weir/store"
)

// A trace goes from the transaction that adds a message, through the
// relay's publish (linked to it) and the broker's headers, into the
// consumer's span (its child).
func TestTraceContextCrossesTheBroker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())

	const topic = "traced"
	b := openEmbedded(ctx, t, topic)
	producer := openSQLite(t, "producer.db")
	consumer := openSQLite(t, "consumer.db")

	// The request that adds the message, in a span of its own.
	reqCtx, req := tp.Tracer("test").Start(ctx, "request")
	err := producer.RunTx(reqCtx, func(_ *sql.Tx, ex store.Executor) error {
		_, err := outbox.Add(reqCtx, ex, time.Now(), store.OutboxMessage{Topic: topic, Key: "k", Payload: []byte("hello"),
			Headers: map[string]string{"Own": "header"}})
		return err
	})
	req.End()
	if err != nil {
		t.Fatal(err)
	}
	relay, err := outbox.New(outbox.Config{Store: producer, Broker: b, ID: "relay", PollEvery: 10 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	relayCtx, stopRelay := context.WithCancel(ctx)
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Run(relayCtx) }()
	defer stopRelay()

	got := make(chan broker.Delivery, 1)
	var handlerSpan trace.SpanContext
	h := inbox.Handle(consumer.RunTx, func(ctx context.Context, _ *sql.Tx, d broker.Delivery) error {
		handlerSpan = trace.SpanContextFromContext(ctx)
		got <- d
		return nil
	}, inbox.Config{Logger: slog.New(slog.DiscardHandler), TracerProvider: tp})
	consumeCtx, stopConsumer := context.WithCancel(ctx)
	defer stopConsumer()
	consumeDone := make(chan error, 1)
	go func() {
		consumeDone <- b.Consume(consumeCtx, topic, broker.ConsumeOptions{DeadLetter: func(context.Context, broker.Delivery, string, error) error { return nil }}, h)
	}()
	var d broker.Delivery
	select {
	case d = <-got:
	case <-ctx.Done():
		t.Fatal("the message was not consumed")
	}
	stopConsumer()
	<-consumeDone
	stopRelay()
	<-relayDone

	if d.Headers["Own"] != "header" || d.Headers["traceparent"] == "" {
		t.Fatalf("delivered headers %v: want the message's own and a traceparent", d.Headers)
	}
	reqSC := req.SpanContext()
	if handlerSpan.TraceID() != reqSC.TraceID() {
		t.Fatalf("the handler ran in trace %s, want the request's %s", handlerSpan.TraceID(), reqSC.TraceID())
	}
	var publish, consume sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "weir.outbox.publish":
			publish = s
		case "weir.consume " + topic:
			consume = s
		}
	}
	if publish == nil || consume == nil {
		t.Fatalf("spans ended: %d; want a publish and a consume span", len(rec.Ended()))
	}
	if len(publish.Links()) != 1 || publish.Links()[0].SpanContext.SpanID() != reqSC.SpanID() {
		t.Fatalf("the publish span's links %v: want one, to the request's span", publish.Links())
	}
	if consume.Parent().SpanID() != reqSC.SpanID() || consume.SpanContext().TraceID() != reqSC.TraceID() {
		t.Fatalf("the consume span's parent %s, trace %s: want the request's span %s", consume.Parent().SpanID(), consume.SpanContext().TraceID(), reqSC.SpanID())
	}
}
