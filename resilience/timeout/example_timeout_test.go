package timeout_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/resilience/timeout"
)

func ExamplePolicy_Do() {
	p, _ := timeout.New(10 * time.Millisecond)
	err := p.Do(context.Background(), func(ctx context.Context) error {
		<-ctx.Done() // a call that hangs until its deadline
		return ctx.Err()
	})
	fmt.Println(errors.Is(err, timeout.ErrTimeout))
	fmt.Println(err)
	// Output:
	// true
	// timed out after 10ms: context deadline exceeded
}
