// Package tracing is weir's use of OpenTelemetry: a tracer from the
// provider a component's Config names (none: no spans), and the W3C trace
// context carried in message headers, so that a trace goes from the code
// that adds a message to the outbox, through the relay's publish and the
// broker, into the consumer that handles it.
package tracing

import (
	"context"
	"maps"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Name is the instrumentation scope of weir's spans.
const Name = "github.com/weirhq/weir"

// Tracer is tp's tracer for weir, or one that makes no spans when tp is
// nil.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(Name)
}

// propagator writes and reads the W3C traceparent and tracestate headers.
var propagator = propagation.TraceContext{}

// Inject returns headers with the trace context of ctx's span added
// (traceparent, tracestate), or headers itself when ctx has no span. It
// never changes headers.
func Inject(ctx context.Context, headers map[string]string) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return headers
	}
	out := make(map[string]string, len(headers)+2)
	maps.Copy(out, headers)
	propagator.Inject(ctx, propagation.MapCarrier(out))
	return out
}

// Extract returns ctx with the remote span context that headers carry, if
// any: the parent of the consumer's span.
func Extract(ctx context.Context, headers map[string]string) context.Context {
	if len(headers) == 0 {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier(headers))
}

// SpanContext is the span context headers carry; invalid when none.
func SpanContext(headers map[string]string) trace.SpanContext {
	return trace.SpanContextFromContext(Extract(context.Background(), headers))
}

// End records err on span, if any, and ends it; a nil span (none made)
// is nothing to end.
func End(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
