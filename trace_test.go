package weir_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/internal/eventually"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/weirtype"
)

// With a TracerProvider each attempt is a span: the failed one marked as
// an error, the next one not, each with the job's id, kind and attempt.
func TestEachAttemptIsASpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	s := openSQLite(t)
	ws := weir.NewWorkers()
	var calls atomic.Int32
	err := weir.AddWorker(ws, weir.WorkFunc(func(ctx context.Context, j *weir.Job[task]) error {
		if calls.Add(1) == 1 {
			return errors.New("first attempt fails")
		}
		return nil
	}), weir.KindConfig{Backoff: backoff.Constant(10 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := weir.NewClient(weir.Config{Store: s, Workers: ws, PollEvery: 10 * time.Millisecond, Logger: testLogger(), TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := c.Insert(ctx, task{Name: "traced"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	eventually.True(t, "the job completed after two spans", waitLimit, func() (bool, string) {
		j, err := s.Executor().GetJob(ctx, res.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		return j.State == weirtype.StateCompleted && len(rec.Ended()) == 2, fmt.Sprintf("job %s, %d spans ended", j.State, len(rec.Ended()))
	})
	spans := rec.Ended()
	for i, sp := range spans {
		attrs := map[attribute.Key]attribute.Value{}
		for _, kv := range sp.Attributes() {
			attrs[kv.Key] = kv.Value
		}
		if sp.Name() != "weir.job task" || attrs["weir.job.id"].AsInt64() != res.Job.ID || attrs["weir.job.attempt"].AsInt64() != int64(i+1) || attrs["weir.job.kind"].AsString() != "task" {
			t.Fatalf("span %d: %s %v", i, sp.Name(), attrs)
		}
		wantErr := i == 0
		if got := sp.Status().Code == codes.Error; got != wantErr {
			t.Fatalf("span %d (attempt %d): error status %v, want %v", i, i+1, got, wantErr)
		}
	}
}

// Without a TracerProvider no span is made: an attempt's context holds no
// span that records, and none of the caller's (the client's attempts do
// not run in the context it was started with), as with a tracer that
// makes no spans.
func TestWithoutATracerProviderAttemptsMakeNoSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	// A recording span of the caller's, which an attempt must not write to.
	ctx, callerSpan := tp.Tracer("caller").Start(context.Background(), "caller")
	defer callerSpan.End()
	s := openSQLite(t)
	ws := weir.NewWorkers()
	type seen struct {
		sc        trace.SpanContext
		recording bool
	}
	got := make(chan seen, 1)
	err := weir.AddWorker(ws, weir.WorkFunc(func(ctx context.Context, j *weir.Job[task]) error {
		sp := trace.SpanFromContext(ctx)
		sp.AddEvent("from the handler")
		got <- seen{sp.SpanContext(), sp.IsRecording()}
		return nil
	}), weir.KindConfig{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := weir.NewClient(weir.Config{Store: s, Workers: ws, PollEvery: 10 * time.Millisecond, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Insert(ctx, task{Name: "untraced"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(context.Background())
	var g seen
	select {
	case g = <-got:
	case <-time.After(waitLimit):
		t.Fatal("the job did not run")
	}
	if g.recording {
		t.Fatal("the attempt's span records: the handler writes to the caller's span")
	}
	if g.sc.IsValid() {
		t.Fatalf("the attempt's context holds the span context %v %v", g.sc.TraceID(), g.sc.SpanID())
	}
	callerSpan.End()
	if ended := rec.Ended(); len(ended) != 1 || len(ended[0].Events()) != 0 {
		t.Fatalf("spans ended %d (want the caller's alone), events on the first %v", len(ended), ended[0].Events())
	}
}
