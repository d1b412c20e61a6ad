package retry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/retry"
)

func ExamplePolicy_Do() {
	p := retry.MustNew(retry.Config{
		MaxAttempts: 4,
		Backoff:     backoff.Constant(0), // no wait, for the example
	})
	attempt := 0
	err := p.Do(context.Background(), func(context.Context) error {
		attempt++
		if attempt < 3 {
			return errors.New("search index timed out")
		}
		return nil
	})
	fmt.Println(attempt, err)
	// Output: 3 <nil>
}

// Giving up returns an *Error that says why, how many attempts were made,
// and unwraps to the last error.
func ExampleError() {
	p := retry.MustNew(retry.Config{MaxAttempts: 3, Backoff: backoff.Constant(0)})
	errQuota := errors.New("quota exceeded")
	err := p.Do(context.Background(), func(context.Context) error { return errQuota })

	var re *retry.Error
	if errors.As(err, &re) {
		fmt.Println(re.Reason, re.Attempts, errors.Is(err, errQuota))
	}
	// Output: max_attempts_exceeded 3 true
}

// A permanent error stops the policy at once.
func ExamplePermanent() {
	p := retry.MustNew(retry.Config{})
	calls := 0
	err := p.Do(context.Background(), func(context.Context) error {
		calls++
		return retry.Permanent(errors.New("document is not valid UTF-8"))
	})
	var re *retry.Error
	errors.As(err, &re)
	fmt.Println(calls, re.Reason)
	// Output: 1 non_retryable
}

// A retry-after hint that would pass the TTL stops the policy without
// waiting.
func ExampleAfter() {
	p := retry.MustNew(retry.Config{TTL: 30 * time.Second})
	err := p.Do(context.Background(), func(context.Context) error {
		return retry.After(errors.New("429 Too Many Requests"), 45*time.Second)
	})
	var re *retry.Error
	errors.As(err, &re)
	fmt.Println(re.Reason)
	// The detail ends with the time left, which depends on how long the
	// first attempt took: "... with 29.999s left" on a busy machine.
	detail, _, _ := strings.Cut(re.Detail, " with ")
	fmt.Println(detail)
	// Output:
	// ttl_exceeded
	// retry-after 45s would pass the 30s ttl
}
