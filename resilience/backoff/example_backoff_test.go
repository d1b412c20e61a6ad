package backoff_test

import (
	"fmt"
	"time"

	"github.com/weirhq/weir/resilience/backoff"
)

// The event-retry schedule: 250 ms doubling to a 60 s cap. Without jitter the
// delays are the schedule itself.
func ExampleExponential() {
	b := backoff.Exponential(250*time.Millisecond, 2, time.Minute).WithJitter(backoff.JitterNone)
	for n := 1; n <= 10; n++ {
		fmt.Print(b.Delay(n, 0, 0), " ")
	}
	fmt.Println()
	// Output: 250ms 500ms 1s 2s 4s 8s 16s 32s 1m0s 1m0s
}

// Full jitter spreads the wait uniformly over [0, d]; u is the random draw.
func ExampleBackoff_Delay() {
	b := backoff.Exponential(time.Second, 2, time.Minute).WithJitter(backoff.JitterFull)
	for _, u := range []float64{0, 0.25, 0.5, 0.75} {
		fmt.Println(b.Delay(4, 0, u))
	}
	// Output:
	// 0s
	// 2s
	// 4s
	// 6s
}

// The zero value is the default: 1 s doubling to 60 s with ±20% jitter.
func ExampleBackoff_zeroValue() {
	var b backoff.Backoff
	lo, hi := b.Delay(3, 0, 0), b.Delay(3, 0, 0.999999999)
	fmt.Println(b.Scheduled(3), lo, hi.Round(time.Millisecond))
	// Output: 4s 3.2s 4.8s
}
