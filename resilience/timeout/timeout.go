package timeout

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrTimeout matches every *Error with errors.Is.
var ErrTimeout = errors.New("timeout")

// Error is returned when a call outlives its timeout. It unwraps to the error
// the function returned.
type Error struct {
	// After is the timeout that passed.
	After time.Duration
	// Err is what the function returned once its context ended.
	Err error
}

func (e *Error) Error() string {
	return fmt.Sprintf("timed out after %v: %v", e.After, e.Err)
}

// Unwrap returns the function's error.
func (e *Error) Unwrap() error { return e.Err }

// Is matches ErrTimeout.
func (e *Error) Is(target error) bool { return target == ErrTimeout }

// Policy gives each call a deadline. It is safe for concurrent use.
type Policy struct {
	d time.Duration
}

// New returns a policy that allows each call d, which must be positive.
func New(d time.Duration) (*Policy, error) {
	if d <= 0 {
		return nil, fmt.Errorf("timeout: duration %v must be positive", d)
	}
	return &Policy{d: d}, nil
}

// Duration returns the time each call is allowed.
func (p *Policy) Duration() time.Duration { return p.d }

// Do runs fn with a context that ends after the policy's duration.
func (p *Policy) Do(ctx context.Context, fn func(context.Context) error) error {
	tctx, cancel := context.WithTimeout(ctx, p.d)
	defer cancel()
	err := fn(tctx)
	if err != nil && ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded) {
		return &Error{After: p.d, Err: err}
	}
	return err
}
