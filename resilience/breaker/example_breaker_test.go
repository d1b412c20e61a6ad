package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/resilience/breaker"
)

// The default breaker opens on the 5th failure within 30 s, refuses calls
// for 60 s, then lets one probe through.
func Example() {
	clk := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	b, err := breaker.New(breaker.Config{Name: "search", Clock: clk})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	unavailable := errors.New("503 service unavailable")
	for range 5 {
		b.Do(ctx, func(context.Context) error { return unavailable })
	}
	fmt.Println(b.State())

	clk.Advance(45 * time.Second)
	err = b.Do(ctx, func(context.Context) error { return nil })
	fmt.Println(err)
	fmt.Println(errors.Is(err, breaker.ErrOpen))

	clk.Advance(15 * time.Second)
	err = b.Do(ctx, func(context.Context) error { return nil }) // the probe
	fmt.Println(err, b.State())
	// Output:
	// open
	// circuit breaker "search" is open: next probe in 15s
	// true
	// <nil> closed
}

// Allow and Done suit callers that decide the outcome themselves, here
// from an HTTP status code.
func ExampleBreaker_Allow() {
	b, _ := breaker.New(breaker.Config{Strategy: breaker.Consecutive(2)})
	for _, status := range []int{200, 503, 404, 503, 503, 200} {
		ticket, err := b.Allow()
		if err != nil {
			fmt.Println(status, "refused fast:", errors.Is(err, breaker.ErrOpen))
			continue
		}
		outcome := breaker.Success
		if status >= 500 {
			outcome = breaker.Failure
		}
		b.Done(ticket, outcome)
		fmt.Println(status, b.State())
	}
	// Output:
	// 200 closed
	// 503 closed
	// 404 closed
	// 503 closed
	// 503 open
	// 200 refused fast: true
}

// Ignore marks an error that says nothing about the dependency's health.
func ExampleIgnore() {
	b, _ := breaker.New(breaker.Config{Strategy: breaker.Consecutive(1)})
	errInvalid := errors.New("invalid document")
	err := b.Do(context.Background(), func(context.Context) error {
		return breaker.Ignore(fmt.Errorf("index: %w", errInvalid))
	})
	fmt.Println(err)
	fmt.Println(errors.Is(err, errInvalid), breaker.IsIgnored(err), b.State())
	// Output:
	// index: invalid document
	// true true closed
}

// FailureRateConfig is the spec's breaker for LLM and speech-to-text calls:
// more than half of at least 10 calls in 30 s, open for 30 s.
func ExampleFailureRateConfig() {
	clk := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := breaker.FailureRateConfig("stt")
	cfg.Clock = clk
	b, _ := breaker.New(cfg)
	ctx := context.Background()
	call := func(err error) { b.Do(ctx, func(context.Context) error { return err }) }

	for range 5 {
		call(nil)
		call(errors.New("timeout"))
	}
	fmt.Println("5 of 10 failed:", b.State())
	call(errors.New("timeout"))
	fmt.Println("6 of 11 failed:", b.State())
	fmt.Println("probe at:", b.Snapshot().NextProbeAt.Format(time.TimeOnly))
	// Output:
	// 5 of 10 failed: closed
	// 6 of 11 failed: open
	// probe at: 00:00:30
}

// OnStateChange sees every change, in order, outside the breaker's lock.
func ExampleConfig_onStateChange() {
	clk := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	b, _ := breaker.New(breaker.Config{
		Name:     "payments",
		Strategy: breaker.Consecutive(1),
		Clock:    clk,
		OnStateChange: func(tr breaker.Transition) {
			fmt.Printf("%s %s: %v → %v, %d failures\n",
				tr.At.Format(time.TimeOnly), tr.Name, tr.From, tr.To, tr.Snapshot.Counts.Failures)
		},
	})
	b.Do(context.Background(), func(context.Context) error { return errors.New("declined by gateway") })
	clk.Advance(time.Minute)
	b.Do(context.Background(), func(context.Context) error { return nil })
	// Output:
	// 00:00:00 payments: closed → open, 1 failures
	// 00:01:00 payments: open → half-open, 0 failures
	// 00:01:00 payments: half-open → closed, 0 failures
}
