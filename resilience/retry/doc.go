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
//   - deadline_exceeded: the next wait would end past the caller's context
//     deadline (the policy stops at once instead of waiting to fail; the
//     error matches context.DeadlineExceeded);
//   - retry_after_exceeds_limit: the error's retry-after hint asks for a
//     longer wait than Config.MaxRetryAfter (default 10 minutes);
//   - non_retryable: the classifier called the error permanent;
//   - cancelled: the caller's context ended, which ends a wait at once;
//   - budget_exhausted: a shared retry [budget.Budget] refused the retry.
//
// The *Error unwraps to the last error the function returned and tells the
// attempts made and the time spent. Its message, and the policy's log
// lines, have credentials removed (a URL's password, an Authorization or
// API-key header an upstream echoed back): the error it unwraps to is the
// function's own, unchanged.
//
// A function marks an error permanent with [Permanent] and attaches a server's
// retry-after hint with [After]. The hint is a floor on the next wait: the
// next attempt never starts sooner, whatever the jitter draws and however
// short the backoff's Cap. A hint that cannot be honoured ends the policy at
// once, never after a wait and never with an early retry: past
// Config.MaxRetryAfter with retry_after_exceeds_limit, past the TTL with
// ttl_exceeded, past the context's deadline with deadline_exceeded.
//
// The context's deadline is a wall-clock time, so it is compared with the
// waits only when the policy runs on the real clock (Config.Clock nil or
// clock.Real, which testing/synctest's fake time also drives); on another
// clock the TTL bounds the waits.
//
// The success path does not allocate: a function that succeeds the first time
// costs one reading of the monotonic clock and one call.
package retry
