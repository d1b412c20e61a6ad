package resilience_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/resilience"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/resilience/timeout"
)

func ExampleCompose() {
	br, _ := breaker.New(breaker.Config{Name: "search", Strategy: breaker.Consecutive(2)})
	rp := retry.MustNew(retry.Config{MaxAttempts: 5, Backoff: backoff.Constant(0)})
	to, _ := timeout.New(time.Second)
	// Retry outermost, each attempt through the breaker, each with its own timeout.
	p := resilience.Compose(rp, br, to)

	attempts := 0
	err := p.Do(context.Background(), func(context.Context) error {
		attempts++
		return errDown
	})
	fmt.Println("attempts that reached the dependency:", attempts)
	fmt.Println("breaker:", br.State())
	fmt.Println("open circuit:", errors.Is(err, breaker.ErrOpen))
	// Output:
	// attempts that reached the dependency: 2
	// breaker: open
	// open circuit: true
}
