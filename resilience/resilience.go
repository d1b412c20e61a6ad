package resilience

import (
	"context"

	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/resilience/timeout"
)

// Policy runs a function under some rule: retry, breaker, timeout, or one of
// the caller's own.
type Policy interface {
	Do(ctx context.Context, fn func(context.Context) error) error
}

// PolicyFunc adapts a function to Policy, for policies of the caller's own.
type PolicyFunc func(ctx context.Context, fn func(context.Context) error) error

// Do calls f.
func (f PolicyFunc) Do(ctx context.Context, fn func(context.Context) error) error { return f(ctx, fn) }

var (
	_ Policy = (*retry.Policy)(nil)
	_ Policy = (*breaker.Breaker)(nil)
	_ Policy = (*timeout.Policy)(nil)
	_ Policy = Pipeline{}
	_ Policy = PolicyFunc(nil)
)

// Pipeline is a stack of policies, the first outermost. Its zero value runs
// the function directly. It is safe for concurrent use when its policies
// are.
type Pipeline struct {
	policies []Policy
}

// Compose returns a Pipeline of policies, the first outermost. Nil policies
// are skipped, so optional ones can be passed as they are.
func Compose(policies ...Policy) Pipeline {
	ps := make([]Policy, 0, len(policies))
	for _, p := range policies {
		if p != nil && !isNilPointer(p) {
			ps = append(ps, p)
		}
	}
	return Pipeline{policies: ps}
}

// Do runs fn under the pipeline's policies.
func (p Pipeline) Do(ctx context.Context, fn func(context.Context) error) error {
	return run(ctx, p.policies, fn)
}

// Len returns the number of policies in the pipeline.
func (p Pipeline) Len() int { return len(p.policies) }

func run(ctx context.Context, ps []Policy, fn func(context.Context) error) error {
	if len(ps) == 0 {
		return fn(ctx)
	}
	return ps[0].Do(ctx, func(ctx context.Context) error { return run(ctx, ps[1:], fn) })
}

// Do runs fn under policies, the first outermost. It is
// Compose(policies...).Do(ctx, fn).
func Do(ctx context.Context, fn func(context.Context) error, policies ...Policy) error {
	return Compose(policies...).Do(ctx, fn)
}

// DoValue is Do for a function that returns a value with its error.
func DoValue[T any](ctx context.Context, p Policy, fn func(context.Context) (T, error)) (T, error) {
	var v T
	err := p.Do(ctx, func(ctx context.Context) error {
		var err error
		v, err = fn(ctx)
		return err
	})
	return v, err
}

// isNilPointer reports whether p is a typed nil of one of weir's policies,
// as when an optional *breaker.Breaker field is passed unset.
func isNilPointer(p Policy) bool {
	switch v := p.(type) {
	case *retry.Policy:
		return v == nil
	case *breaker.Breaker:
		return v == nil
	case *timeout.Policy:
		return v == nil
	case PolicyFunc:
		return v == nil
	}
	return false
}
