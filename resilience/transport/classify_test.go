package transport_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/resilience/timeout"
	"github.com/weirhq/weir/resilience/transport"
)

func TestRetryableStatus(t *testing.T) {
	retryable := map[int]bool{429: true, 500: true, 502: true, 503: true, 504: true}
	for code := 100; code < 600; code++ {
		if got := transport.RetryableStatus(code); got != retryable[code] {
			t.Errorf("RetryableStatus(%d) = %v, want %v", code, got, retryable[code])
		}
	}
}

func TestIdempotent(t *testing.T) {
	for _, tc := range []struct {
		method string
		header string
		want   bool
	}{
		{"", "", true},
		{http.MethodGet, "", true},
		{http.MethodHead, "", true},
		{http.MethodOptions, "", true},
		{http.MethodTrace, "", true},
		{http.MethodPut, "", true},
		{http.MethodDelete, "", true},
		{http.MethodPost, "", false},
		{http.MethodPatch, "", false},
		{http.MethodConnect, "", false},
		{"get", "", false}, // methods are case-sensitive
		{http.MethodPost, "Idempotency-Key", true},
		{http.MethodPatch, "X-Idempotency-Key", true},
		{http.MethodPost, "X-Request-Id", false},
	} {
		req := &http.Request{Method: tc.method, Header: http.Header{}}
		if tc.header != "" {
			req.Header.Set(tc.header, "k-1")
		}
		if got := transport.Idempotent(req); got != tc.want {
			t.Errorf("Idempotent(%q with %q) = %v, want %v", tc.method, tc.header, got, tc.want)
		}
	}
}

// netErr is a net.Error that is a timeout or not.
type netErr struct{ timeout bool }

func (e netErr) Error() string   { return "net error" }
func (e netErr) Timeout() bool   { return e.timeout }
func (e netErr) Temporary() bool { return false }

func TestRetryableError(t *testing.T) {
	dial := func(err error) error { return &net.OpError{Op: "dial", Net: "tcp", Err: err} }
	read := func(err error) error { return &net.OpError{Op: "read", Net: "tcp", Err: err} }
	urlErr := func(err error) error { return &url.Error{Op: "Post", URL: "http://x", Err: err} }
	const (
		never      = iota // retried for no request
		idempotent        // retried for idempotent requests only
		always            // retried for every request
	)
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, never},
		{"unknown error", errors.New("something"), never},

		{"caller cancelled", context.Canceled, never},
		{"caller deadline", context.DeadlineExceeded, never},
		{"cancelled dial", dial(fmt.Errorf("operation was canceled: %w", context.Canceled)), never},
		{"breaker open", &breaker.OpenError{State: breaker.Open}, never},
		{"attempt timeout", &timeout.Error{After: time.Second, Err: context.DeadlineExceeded}, idempotent},
		{"attempt timeout in url.Error", urlErr(&timeout.Error{After: time.Second, Err: context.Canceled}), idempotent},

		{"unknown authority", urlErr(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), never},
		{"bare unknown authority", x509.UnknownAuthorityError{}, never},
		{"hostname mismatch", x509.HostnameError{Host: "x"}, never},
		{"expired certificate", x509.CertificateInvalidError{Reason: x509.Expired}, never},
		{"not TLS", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, never},
		{"TLS alert", tls.AlertError(40), never},
		{"dial wrapping a TLS error", dial(x509.UnknownAuthorityError{}), never},
		{"no such host", dial(&net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}), never},
		{"missing port", dial(&net.AddrError{Err: "missing port in address", Addr: "x"}), never},
		{"unknown network", dial(net.UnknownNetworkError("tcp9")), never},

		{"dial refused", dial(os.NewSyscallError("connect", syscall.ECONNREFUSED)), always},
		{"refused in url.Error", urlErr(dial(os.NewSyscallError("connect", syscall.ECONNREFUSED))), always},
		{"bare ECONNREFUSED", syscall.ECONNREFUSED, always},
		{"dial unreachable", dial(os.NewSyscallError("connect", syscall.EHOSTUNREACH)), always},
		{"dial timeout", dial(netErr{timeout: true}), always},
		{"temporary DNS", dial(&net.DNSError{Err: "server misbehaving", Name: "x", IsTemporary: true}), always},
		{"DNS timeout", &net.DNSError{Err: "i/o timeout", Name: "x", IsTimeout: true}, always},

		{"read timeout", read(netErr{timeout: true}), idempotent},
		{"i/o deadline", read(os.ErrDeadlineExceeded), idempotent},
		{"reset", read(os.NewSyscallError("read", syscall.ECONNRESET)), idempotent},
		{"broken pipe", &net.OpError{Op: "write", Err: os.NewSyscallError("write", syscall.EPIPE)}, idempotent},
		{"EOF", fmt.Errorf("transport connection broken: %w", io.EOF), idempotent},
		{"unexpected EOF", urlErr(io.ErrUnexpectedEOF), idempotent},
		{"net error, not a timeout", read(netErr{}), never},
	} {
		for _, idem := range []bool{false, true} {
			want := tc.want == always || (tc.want == idempotent && idem)
			if got := transport.RetryableError(tc.err, idem); got != want {
				t.Errorf("%s: RetryableError(%v, idempotent=%v) = %v, want %v", tc.name, tc.err, idem, got, want)
			}
		}
	}
}

// The same rules hold for the errors a real http.Transport returns.
func TestRetryableErrorFromRealTransport(t *testing.T) {
	rt := func(t *testing.T, base http.RoundTripper, method, u string) error {
		t.Helper()
		req, err := http.NewRequest(method, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := base.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("%s %s succeeded", method, u)
		}
		return err
	}

	t.Run("connection refused", func(t *testing.T) {
		err := rt(t, &http.Transport{}, http.MethodPost, "http://"+closedAddr(t)+"/")
		if !transport.RetryableError(err, false) {
			t.Fatalf("RetryableError(%v, false) = false, want true: nothing was sent", err)
		}
	})
	t.Run("untrusted certificate", func(t *testing.T) {
		srv := httptest.NewTLSServer(http.NotFoundHandler())
		defer srv.Close()
		srv.Config.ErrorLog = discardLog()
		err := rt(t, &http.Transport{}, http.MethodGet, srv.URL)
		if transport.RetryableError(err, true) {
			t.Fatalf("RetryableError(%v, true) = true, want false", err)
		}
	})
	t.Run("unsupported scheme", func(t *testing.T) {
		err := rt(t, &http.Transport{}, http.MethodGet, "ftp://example.com/")
		if transport.RetryableError(err, true) {
			t.Fatalf("RetryableError(%v, true) = true, want false", err)
		}
	})
	t.Run("connection dropped", func(t *testing.T) {
		srv := httptest.NewServer(hangUp())
		defer srv.Close()
		err := rt(t, srv.Client().Transport, http.MethodGet, srv.URL)
		if !transport.RetryableError(err, true) || transport.RetryableError(err, false) {
			t.Fatalf("%v: want retryable for idempotent requests only", err)
		}
	})
}
