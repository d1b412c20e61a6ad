// Package transport is an [http.RoundTripper] that gives any [http.Client]
// retries, a circuit breaker and a per-attempt timeout:
//
//	tr, err := transport.New(transport.Config{Breaker: b, AttemptTimeout: 10 * time.Second})
//	client := &http.Client{Transport: tr}
//
// For calls to an LLM's API, which are POSTs that are safe to send again,
// add RetryNonIdempotent: true (see What is retried).
//
// It also exports the pieces it is built from: [ParseRetryAfter] reads a
// Retry-After header, [RetryableStatus], [RetryableError] and [Idempotent]
// classify responses, transport errors and requests.
//
// # Order
//
// The retry policy is outermost, each attempt goes through the breaker, and
// the per-attempt timeout is innermost:
//
//	retry( breaker( timeout( Base.RoundTrip ) ) )
//
// So the breaker sees every attempt, not just every call; a per-attempt
// timeout is a failure for the breaker and is retried like any other
// timeout; and a breaker that refuses an attempt ends the call at once: its
// [*breaker.OpenError] is never retried, and RoundTrip returns an [*Error]
// with reason non_retryable that matches [breaker.ErrOpen]. When an
// attempt's own failure opens the breaker, the call ends at once too,
// without waiting for a retry the breaker would refuse: a response is
// returned as it is (see Responses and errors), a transport error comes
// back in an *Error that matches both the error and breaker.ErrOpen.
//
// # What the breaker counts
//
// A transport error, a 429 and a retryable 5xx (500, 502, 503, 504) count
// as failures, including a per-attempt timeout. Any other status, 4xx and
// 501 included, counts as a success: the dependency answered. An attempt
// that ends because the caller's context ended is not counted at all.
//
// # What is retried
//
// The statuses 429, 500, 502, 503 and 504 are retried, and no other. A
// transport error is retried as [RetryableError] says:
//
//   - never the caller's own cancellation or deadline, an error that will
//     fail the same way again (a TLS certificate error, an unsupported
//     scheme, a malformed request, a DNS name that does not exist), or an
//     error RetryableError does not know;
//   - always an error that proves the request was not sent: a failed dial,
//     a refused connection, a temporary DNS failure;
//   - for idempotent requests only, an error after which the server may or
//     may not have acted on the request: a timeout (the per-attempt timeout
//     included), a reset connection, a connection that ended early (io.EOF,
//     io.ErrUnexpectedEOF).
//
// A request is idempotent when its method is GET, HEAD, OPTIONS, TRACE, PUT
// or DELETE, or when it has an Idempotency-Key or X-Idempotency-Key header
// ([Idempotent]). A request that is not (a POST or PATCH without such a
// header) is retried only when nothing was done with it: after a dial
// error, because then nothing was sent, and after a 429, or a 503 with a
// Retry-After, because those statuses say the server did not process it.
// Its 500, 502, 504, a 503 without a Retry-After, a timeout or a reset are
// returned, not retried, unless Config.RetryNonIdempotent is set; GiveUp
// then tells reason non_retryable and why.
//
// Calls to an LLM's API are POSTs that change nothing but what they cost,
// and weir's resilience spec asks that all of them be retried on 429, 500,
// 502, 503 and 504, with a breaker: give their transport a breaker and
// RetryNonIdempotent.
//
// # Retry-After
//
// A retryable response's Retry-After header, in either form, is passed to
// the retry policy with [retry.After]. It is a floor on the next wait: the
// next attempt never starts sooner, even when the Retry-After is longer than
// the backoff's Cap. A Retry-After that cannot be honoured ends the call at
// once with that response, never after a wait: longer than
// Config.MaxRetryAfter (default 10 minutes; reason
// retry_after_exceeds_limit), past the policy's TTL (ttl_exceeded), or past
// the request context's deadline, such as an http.Client's Timeout
// (deadline_exceeded). A Retry-After that cannot be parsed is ignored, and
// logged when Config.Logger is set.
//
// # Responses and errors
//
// A response with a status that is not retried is returned at once. When
// the transport stops while the last attempt got a retryable status
// (attempts exhausted, a wait past the TTL, the deadline or the Retry-After
// limit, the retry budget, the breaker opening, a request that cannot be
// sent again), RoundTrip returns that last response, with its body intact,
// and a nil error, as any RoundTripper does: the caller sees the 503 or
// the 429, and [GiveUp] (or [GiveUpReason]) on that response tells why it
// was not retried, how many attempts were made and the last status. A
// response that needed no retry has no give-up.
//
// When RoundTrip returns an error after sending any attempt (the last
// attempt failed with a transport error, the breaker refused, the caller's
// context ended), it is an [*Error] with the same reason, attempts and last
// status, which unwraps to the policy's [*retry.Error] and through it to
// the last attempt's error. When the caller's context ends, the error
// matches the context's error.
//
// A response that is retried is drained (up to 64 KiB) and closed before the
// wait, so that its connection can be reused.
//
// # Credentials
//
// The request's credentials (its Authorization, Proxy-Authorization,
// Api-Key, X-Api-Key and Cookie headers, and its URL's password) are
// removed from every error the transport returns or attaches and every line
// it or its retry policy logs, in whatever form an upstream echoes them back
// (a status line, a Retry-After, a base transport's error quoting the URL);
// so are credentials in the shapes internal/redact knows. The transport
// never quotes a response body in an error. Responses reach the caller
// unchanged.
//
// # Request bodies
//
// The caller's request is never changed: each attempt sends a clone. A body
// is replayed with the request's GetBody when it has one (as requests made
// by [http.NewRequest] from a bytes.Buffer, bytes.Reader or strings.Reader
// do). Otherwise the body is read into memory before the first attempt, up
// to Config.MaxBufferedBody; a longer body is sent once, without retries,
// whole and unchanged.
//
// # The per-attempt timeout
//
// Config.AttemptTimeout is the time each attempt has to get its response
// headers. Once the headers arrive the timer stops, and the attempt's context
// stays alive while the caller reads the body; closing the body (or reading
// it to its end) ends that context. A timed-out attempt fails with a
// [*timeout.Error] that matches [timeout.ErrTimeout]. The timer runs on the
// real clock (time.AfterFunc), not on Config.Retry.Clock: it bounds real
// network I/O, which a fake clock cannot make wait.
package transport
