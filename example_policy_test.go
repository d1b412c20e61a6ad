package weir_test

import (
	"context"
	"fmt"
	"time"

	"github.com/weirhq/weir"
	"github.com/weirhq/weir/resilience/backoff"
)

type archive struct{}

func (archive) Kind() string { return "archive" }

type chunk struct{}

func (chunk) Kind() string { return "chunk" }

type grading struct{ Skill string }

func (grading) Kind() string { return "grading" }

// The retry policies of the design documents, as KindConfigs: a document
// pipeline's backoff of 5 minutes doubled up to an hour, with 3 attempts
// for archives and 5 for chunks, and a grading SLA of 20 minutes past which
// a success is only kept as a late result.
func ExampleKindConfig() {
	docBackoff := backoff.Exponential(5*time.Minute, 2, time.Hour).WithJitter(backoff.JitterNone)
	ws := weir.NewWorkers()
	noop := func(context.Context, *weir.Job[archive]) error { return nil }
	_ = weir.AddWorker(ws, weir.WorkFunc(noop), weir.KindConfig{MaxAttempts: 3, Backoff: docBackoff})
	_ = weir.AddWorker(ws, weir.WorkFunc(func(context.Context, *weir.Job[chunk]) error { return nil }),
		weir.KindConfig{MaxAttempts: 5, Backoff: docBackoff})
	_ = weir.AddWorker(ws, weir.WorkFunc(func(context.Context, *weir.Job[grading]) error { return nil }),
		weir.KindConfig{SLA: 20 * time.Minute, StuckAfter: 30 * time.Minute})

	for n := 1; n <= 5; n++ {
		fmt.Printf("wait before retry %d: %v\n", n, docBackoff.Scheduled(n))
	}
	// Output:
	// wait before retry 1: 5m0s
	// wait before retry 2: 10m0s
	// wait before retry 3: 20m0s
	// wait before retry 4: 40m0s
	// wait before retry 5: 1h0m0s
}
