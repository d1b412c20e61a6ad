package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"

	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/resilience/timeout"
)

// RetryableStatus reports whether a response with this status code is worth
// retrying: 429 Too Many Requests, 500 Internal Server Error, 502 Bad
// Gateway, 503 Service Unavailable and 504 Gateway Timeout. No other status
// is: another 4xx will fail the same way again, and 501 Not Implemented or
// 505 HTTP Version Not Supported are answers, not outages.
func RetryableStatus(code int) bool {
	switch code {
	case http.StatusTooManyRequests,
		http.StatusInternalServerError,
		http.StatusBadGateway,
		http.StatusServiceUnavailable,
		http.StatusGatewayTimeout:
		return true
	}
	return false
}

// Idempotent reports whether req may be sent twice without a different
// effect than sending it once: its method is GET (or empty, which means
// GET), HEAD, OPTIONS, TRACE, PUT or DELETE, or it has an Idempotency-Key or
// X-Idempotency-Key header, as net/http's Transport also assumes.
func Idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	_, key := req.Header["Idempotency-Key"]
	_, xkey := req.Header["X-Idempotency-Key"]
	return key || xkey
}

// RetryableError reports whether a transport error (an error from
// RoundTrip, not a status) is worth retrying, for a request that is
// idempotent or not. It is an allow list; the rules, in order:
//
//  1. a per-attempt timeout (an error matching timeout.ErrTimeout) is
//     retryable if the request is idempotent;
//  2. the caller's own cancellation or deadline (context.Canceled,
//     context.DeadlineExceeded) is not, nor an open breaker;
//  3. an error that will fail the same way again is not: a TLS
//     certificate or handshake error, a DNS name that does not exist, a bad
//     address;
//  4. an error that proves the request was not sent is, even if the request
//     is not idempotent: a failed dial (*net.OpError with Op "dial"), a
//     refused connection, a temporary DNS failure;
//  5. for an idempotent request, an error after which the server may have
//     acted is: a timeout (net.Error with Timeout() true), a reset or
//     aborted connection, a broken pipe, io.EOF or io.ErrUnexpectedEOF from
//     a connection that ended early;
//  6. anything else is not, such as an unsupported protocol scheme or a
//     malformed request.
func RetryableError(err error, idempotent bool) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, timeout.ErrTimeout):
		return idempotent
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, breaker.ErrOpen):
		return false
	case failsAgain(err):
		return false
	case notSent(err):
		return true
	}
	return idempotent && ambiguous(err)
}

// failsAgain reports errors that retrying cannot fix.
func failsAgain(err error) bool {
	if has[*tls.CertificateVerificationError](err) ||
		has[x509.UnknownAuthorityError](err) ||
		has[x509.HostnameError](err) ||
		has[x509.CertificateInvalidError](err) ||
		has[x509.SystemRootsError](err) ||
		has[tls.RecordHeaderError](err) || // the server does not speak TLS
		has[tls.AlertError](err) { // the server refused the handshake
		return true
	}
	if dns, ok := errors.AsType[*net.DNSError](err); ok {
		return !dns.IsTemporary && !dns.IsTimeout
	}
	return has[*net.AddrError](err) || has[net.UnknownNetworkError](err) || has[net.InvalidAddrError](err)
}

// has reports whether err's chain holds an error of type T.
func has[T error](err error) bool {
	_, ok := errors.AsType[T](err)
	return ok
}

// notSent reports errors that prove the request never left.
func notSent(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	if dns, ok := errors.AsType[*net.DNSError](err); ok && (dns.IsTemporary || dns.IsTimeout) {
		return true
	}
	op, ok := errors.AsType[*net.OpError](err)
	return ok && op.Op == "dial"
}

// ambiguous reports errors after which the server may or may not have acted
// on the request.
func ambiguous(err error) bool {
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return true
	}
	return errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNABORTED) ||
		errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, net.ErrClosed)
}
