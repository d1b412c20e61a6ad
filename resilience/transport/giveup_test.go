package transport_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/resilience/transport"
)

// When the transport stops on a response it would otherwise retry, the
// caller gets that response and can read why it was not retried, through
// an http.Client too.
func TestGiveUpTellsWhyTheLastResponseWasNotRetried(t *testing.T) {
	srv := newServer(t, statuses(nil, 503))
	tr := newTransport(t, transport.Config{Base: srv.Client().Transport, Retry: quick(3)})
	client := &http.Client{Transport: tr}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if got := readBody(t, resp); resp.StatusCode != 503 || got != "attempt 3" {
		t.Fatalf("got %v %q, want the third 503", resp.Status, got)
	}
	gu := transport.GiveUp(resp)
	if gu == nil {
		t.Fatal("GiveUp(resp) is nil for a 503 the transport stopped retrying")
	}
	if gu.Reason != retry.ReasonMaxAttempts || gu.Attempts != 3 || gu.LastStatus != 503 {
		t.Fatalf("GiveUp = %+v, want max_attempts_exceeded after 3 attempts, last status 503", gu)
	}
	if transport.GiveUpReason(resp) != retry.ReasonMaxAttempts {
		t.Fatalf("GiveUpReason = %q", transport.GiveUpReason(resp))
	}
	if se, ok := errors.AsType[*transport.StatusError](gu); !ok || se.StatusCode != 503 || !errors.Is(gu, retry.ErrGaveUp) {
		t.Fatalf("%v does not unwrap to the last status and retry.ErrGaveUp", gu)
	}
	for _, s := range []string{"max_attempts_exceeded", "3 attempts", "503"} {
		if !strings.Contains(gu.Error(), s) {
			t.Errorf("message %q lacks %q", gu, s)
		}
	}

	// A response that was not retried because it needs no retry has no
	// give-up, nor has a response another RoundTripper made.
	for _, code := range []int{200, 404} {
		srv := newServer(t, statuses(nil, code))
		tr := newTransport(t, transport.Config{Base: srv.Client().Transport, Retry: quick(3)})
		resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, srv.URL, nil))
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, resp)
		if gu := transport.GiveUp(resp); gu != nil || transport.GiveUpReason(resp) != "" {
			t.Fatalf("%d: GiveUp = %v, want nil", code, gu)
		}
	}
	plain, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, plain)
	if transport.GiveUp(plain) != nil || transport.GiveUp(nil) != nil {
		t.Fatal("GiveUp found a give-up on a response the transport did not make")
	}
}

// A give-up is not inherited by a later request made with the context of
// an earlier response's request.
func TestGiveUpBelongsToItsResponse(t *testing.T) {
	srv := newServer(t, statuses(nil, 503, 503, 200))
	tr := newTransport(t, transport.Config{Base: srv.Client().Transport, Retry: quick(2)})
	first, err := tr.RoundTrip(newRequest(t, http.MethodGet, srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, first)
	if transport.GiveUp(first) == nil {
		t.Fatal("no give-up on the first response")
	}
	second, err := tr.RoundTrip(newRequest(t, http.MethodGet, srv.URL, nil).WithContext(first.Request.Context()))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, second)
	if second.StatusCode != 200 || transport.GiveUp(second) != nil {
		t.Fatalf("got %v with GiveUp %v, want a 200 without one", second.Status, transport.GiveUp(second))
	}
}

// When RoundTrip returns an error, it is a *transport.Error with the
// reason, the attempts and the last status any attempt got, which unwraps
// to the *retry.Error and the last attempt's error.
func TestRoundTripErrorTellsReasonAttemptsAndLastStatus(t *testing.T) {
	t.Run("transport errors", func(t *testing.T) {
		tr := newTransport(t, transport.Config{Base: &http.Transport{}, Retry: quick(3)})
		_, err := tr.RoundTrip(newRequest(t, http.MethodGet, "http://"+closedAddr(t), nil))
		te, ok := errors.AsType[*transport.Error](err)
		if !ok || te.Reason != retry.ReasonMaxAttempts || te.Attempts != 3 || te.LastStatus != 0 {
			t.Fatalf("got %#v, want a *transport.Error: max_attempts_exceeded, 3 attempts, no status", err)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) || gaveUp(t, err).Attempts != 3 {
			t.Fatalf("%v does not unwrap to the last error and the *retry.Error", err)
		}
	})
	t.Run("a status, then a transport error", func(t *testing.T) {
		errReset := fmt.Errorf("read: %w", syscall.ECONNRESET)
		base := &fakeBase{script: []func(*http.Request) (*http.Response, error){
			answer(503, "busy"),
			func(*http.Request) (*http.Response, error) { return nil, errReset },
		}}
		tr := newTransport(t, transport.Config{Base: base, Retry: quick(2)})
		_, err := tr.RoundTrip(newRequest(t, http.MethodGet, "http://api.test/x", nil))
		te, ok := errors.AsType[*transport.Error](err)
		if !ok || te.Reason != retry.ReasonMaxAttempts || te.Attempts != 2 || te.LastStatus != 503 || !errors.Is(err, errReset) {
			t.Fatalf("got %v, want max_attempts_exceeded after 2 attempts, last status 503, unwrapping to the reset", err)
		}
		if !strings.Contains(err.Error(), "last status 503") {
			t.Fatalf("message %q does not tell the last status", err)
		}
	})
	t.Run("cancelled while waiting to retry a 503", func(t *testing.T) {
		clk := clock.NewFake(t0)
		srv := newServer(t, statuses(nil, 503))
		tr := newTransport(t, transport.Config{Base: srv.Client().Transport, Retry: retry.Config{Clock: clk}})
		err := cancelWhileWaiting(t, clk, tr, newRequest(t, http.MethodGet, srv.URL, nil))
		te, ok := errors.AsType[*transport.Error](err)
		if !ok || te.Reason != retry.ReasonCancelled || te.LastStatus != 503 || !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want cancelled with last status 503", err)
		}
	})
	t.Run("the breaker refuses", func(t *testing.T) {
		b := newBreaker(t, breaker.Consecutive(1))
		tr := newTransport(t, transport.Config{Base: &http.Transport{}, Retry: quick(3), Breaker: b})
		addr := "http://" + closedAddr(t)
		tr.RoundTrip(newRequest(t, http.MethodGet, addr, nil))
		_, err := tr.RoundTrip(newRequest(t, http.MethodGet, addr, nil))
		te, ok := errors.AsType[*transport.Error](err)
		if !ok || te.Reason != retry.ReasonNonRetryable || te.Attempts != 1 || !errors.Is(err, breaker.ErrOpen) {
			t.Fatalf("got %v, want non_retryable after 1 attempt, matching breaker.ErrOpen", err)
		}
	})
}

// A wait that would end past the caller's deadline is not started: the
// transport returns the response it has, and says why.
func TestRetryAfterPastTheDeadlineReturnsTheResponseAtOnce(t *testing.T) {
	srv := newServer(t, statuses(http.Header{"Retry-After": {"120"}}, 429, 200))
	tr := newTransport(t, transport.Config{Base: srv.Client().Transport})
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	start := time.Now()
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if resp.StatusCode != 429 || srv.hits.Load() != 1 || time.Since(start) > 10*time.Second {
		t.Fatalf("got %v after %d requests in %v, want the 429 at once", resp.Status, srv.hits.Load(), time.Since(start))
	}
	if gu := transport.GiveUp(resp); gu == nil || gu.Reason != retry.ReasonDeadline {
		t.Fatalf("GiveUp = %+v, want deadline_exceeded", gu)
	}
}
