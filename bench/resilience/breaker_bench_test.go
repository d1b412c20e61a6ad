package resilience_test

import (
	"context"
	"testing"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/sony/gobreaker/v2"

	"github.com/weirhq/weir/resilience/breaker"
)

// Each sub-benchmark runs the same trivial successful call through a closed
// breaker built with the library's defaults, constructed once outside the
// timed loop. gobreaker's Execute and failsafe's Get return a result
// alongside the error; weir's Do returns only the error, so the gobreaker
// and failsafe funcs return a nil result.

func okWeir(context.Context) error { return nil }
func okAny() (any, error)          { return nil, nil }
func okRun() error                 { return nil }

func newWeir(b *testing.B) *breaker.Breaker {
	b.Helper()
	br, err := breaker.New(breaker.Config{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	return br
}

func newGobreaker() *gobreaker.CircuitBreaker[any] {
	return gobreaker.NewCircuitBreaker[any](gobreaker.Settings{Name: "bench"})
}

func newFailsafe() failsafe.Executor[any] {
	return failsafe.With[any](circuitbreaker.NewBuilder[any]().Build())
}

func BenchmarkBreakerClosed(b *testing.B) {
	ctx := context.Background()
	b.Run("weir", func(b *testing.B) {
		br := newWeir(b)
		b.ReportAllocs()
		for b.Loop() {
			if err := br.Do(ctx, okWeir); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gobreaker", func(b *testing.B) {
		cb := newGobreaker()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := cb.Execute(okAny); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("failsafe", func(b *testing.B) {
		ex := newFailsafe()
		b.ReportAllocs()
		for b.Loop() {
			if err := ex.Run(okRun); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkBreakerClosedParallel(b *testing.B) {
	ctx := context.Background()
	b.Run("weir", func(b *testing.B) {
		br := newWeir(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := br.Do(ctx, okWeir); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("gobreaker", func(b *testing.B) {
		cb := newGobreaker()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := cb.Execute(okAny); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("failsafe", func(b *testing.B) {
		ex := newFailsafe()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := ex.Run(okRun); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
