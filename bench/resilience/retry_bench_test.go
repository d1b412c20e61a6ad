package resilience_test

import (
	"context"
	"testing"

	"github.com/cenkalti/backoff/v5"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/retrypolicy"

	"github.com/weirhq/weir/resilience/retry"
)

// A call that succeeds the first time, run through each library's retry
// with its defaults, built once outside the timed loop where the library
// allows it (cenkalti/backoff's Retry builds its backoff per call by design).

func okStruct() (struct{}, error) { return struct{}{}, nil }

func BenchmarkRetrySuccess(b *testing.B) {
	ctx := context.Background()
	b.Run("weir", func(b *testing.B) {
		p, err := retry.New(retry.Config{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if err := p.Do(ctx, okWeir); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("backoff", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := backoff.Retry(ctx, okStruct); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("failsafe", func(b *testing.B) {
		ex := failsafe.With[any](retrypolicy.NewWithDefaults[any]())
		b.ReportAllocs()
		for b.Loop() {
			if err := ex.Run(okRun); err != nil {
				b.Fatal(err)
			}
		}
	})
}
