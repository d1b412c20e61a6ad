// Package resilience runs a function under several resilience policies at
// once, in an order the caller states.
//
// The policies themselves live in subpackages, each usable alone:
//
//   - backoff: how long to wait before a retry (schedules and jitter);
//   - retry: run again on a retryable error, up to a maximum of attempts
//     and a time-to-live, honouring retry-after hints;
//   - budget: a retry budget shared between policies;
//   - breaker: circuit breakers that fail fast while a dependency is down;
//   - timeout: a deadline for each call;
//   - transport: all of the above as an http.RoundTripper.
//
// [Compose] stacks policies; the first is the outermost. The order matters,
// and is the caller's choice:
//
//	resilience.Compose(retryPolicy, breaker, timeoutPolicy)
//
// is the order weir uses for calls to a dependency: every attempt gets its
// own timeout, every attempt is counted by the breaker (so a burst of failed
// retries opens it), and once the breaker is open the retry policy stops at
// once, since an open-circuit error is not worth retrying.
//
//	resilience.Compose(breaker, retryPolicy, timeoutPolicy)
//
// puts the breaker outside the retries: the whole retried call counts as one
// outcome, and an open breaker rejects it before the first attempt. It suits
// a breaker that guards a unit of work rather than a single request.
//
// Whatever the order, a timeout belongs innermost, so that it bounds one
// attempt and not the waits between them; for a bound on the whole, give the
// retry policy a TTL.
package resilience
