package transport

import (
	"context"
	"net/http"
	"strconv"

	"github.com/weirhq/weir/internal/redact"
	"github.com/weirhq/weir/resilience/retry"
)

// Error tells why the transport stopped retrying a call. RoundTrip returns
// one when it has no response to return (the last attempt failed with a
// transport error, the breaker refused, the caller's context ended), and
// GiveUp reads one from a response it returned after giving up on a status
// it retries. It unwraps to the retry policy's *retry.Error, which unwraps
// to the last attempt's error (a *StatusError for a response). Its message
// has the request's credentials removed.
type Error struct {
	// Reason is the retry policy's: max_attempts_exceeded, ttl_exceeded,
	// deadline_exceeded, retry_after_exceeds_limit, budget_exhausted,
	// non_retryable or cancelled.
	Reason retry.Reason
	// Attempts is how many attempts were sent.
	Attempts int
	// LastStatus is the status code of the last response an attempt got,
	// 0 when none got one.
	LastStatus int
	// Detail says more about the reason: how far a wait would have passed
	// the TTL, why a status was not retried ("POST is not idempotent ..."),
	// that the breaker opened.
	Detail string
	// Err is the retry policy's error, a *retry.Error.
	Err error
}

func (e *Error) Error() string {
	msg := "transport: "
	if e.LastStatus != 0 {
		msg += "last status " + strconv.Itoa(e.LastStatus) + "; "
	}
	if e.Err != nil {
		msg += e.Err.Error()
	} else {
		msg += "gave up (" + string(e.Reason) + ")"
	}
	return redact.String(msg)
}

// Unwrap returns the retry policy's error.
func (e *Error) Unwrap() error { return e.Err }

// giveUpKey keys the give-up attached to a returned response's request
// context.
type giveUpKey struct{}

// giveUp is what attach stores: the response, so that a later request
// made with that context does not inherit it, and the error.
type giveUp struct {
	resp *http.Response
	err  *Error
}

// attach records e on resp, for GiveUp. It replaces resp.Request with a
// shallow copy whose context carries e; the URL, headers and the rest are
// the same.
func attach(resp *http.Response, req *http.Request, e *Error) {
	r := resp.Request
	if r == nil {
		r = req
	}
	resp.Request = r.WithContext(context.WithValue(r.Context(), giveUpKey{}, giveUp{resp, e}))
}

// GiveUp returns why the transport stopped retrying when it returned resp:
// non-nil only for a response with a status the transport retries (429,
// 500, 502, 503, 504) that it returned without retrying it again, because
// its attempts ran out, a wait would have passed the TTL, the context's
// deadline or the Retry-After limit, the retry budget or the breaker
// refused, or the request could not be sent again (a body too long to
// replay, a method that is not idempotent). It reads resp.Request's
// context, where RoundTrip puts it; GiveUp(nil) is nil.
func GiveUp(resp *http.Response) *Error {
	if resp == nil || resp.Request == nil {
		return nil
	}
	g, ok := resp.Request.Context().Value(giveUpKey{}).(giveUp)
	if !ok || g.resp != resp {
		return nil
	}
	return g.err
}

// GiveUpReason is GiveUp's reason, or "" when there is none.
func GiveUpReason(resp *http.Response) retry.Reason {
	if e := GiveUp(resp); e != nil {
		return e.Reason
	}
	return ""
}
