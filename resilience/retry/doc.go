// Package retry runs a function again when it fails with an error worth
// retrying, waiting a backoff between attempts, until it succeeds or the
// policy gives up.
//
// A [Policy] gives up, returning an [*Error], for exactly one of these
// reasons:
//
//   - max_attempts_exceeded: the function failed MaxAttempts times;
//   - ttl_exceeded: the next wait would end past the policy's TTL, counted
//     from the start of the first attempt (the policy never sleeps past it);
//   - non_retryable: the classifier called the error permanent;
//   - cancelled: the caller's context ended, which ends a wait at once;
//   - budget_exhausted: a shared retry [budget.Budget] refused the retry.
//
// The *Error unwraps to the last error the function returned and tells the
// attempts made and the time spent.
//
// A function marks an error permanent with [Permanent] and attaches a server's
// retry-after hint with [After]. The hint is a floor on the next wait that
// jitter never undercuts, capped by the backoff's Cap; when it would pass the
// TTL the policy stops at once with ttl_exceeded instead of waiting. A
// constant backoff's Cap is its delay, so a policy that must honour long
// Retry-After values needs an exponential or linear backoff with a Cap long
// enough for them.
//
// The success path does not allocate: a function that succeeds the first time
// costs one reading of the monotonic clock and one call.
package retry
