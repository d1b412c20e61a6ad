package budget_test

import (
	"fmt"

	"github.com/weirhq/weir/resilience/budget"
)

// A hundred calls in flight may have twenty retries in flight; the
// twenty-first is refused.
func ExampleBudget() {
	b, _ := budget.New(budget.Config{Ratio: 0.2, MinRetries: 3})
	for range 100 {
		b.Begin()
	}
	granted := 0
	for b.TryRetry() {
		granted++
	}
	fmt.Println(granted, b.Snapshot().Refused)
	// Output: 20 1
}
