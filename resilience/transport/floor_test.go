package transport_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/resilience/transport"
)

// A Retry-After past the limit (10 minutes unless configured) returns that
// response at once: no early retry, no wait.
func TestRetryAfterPastTheLimitReturnsTheResponseAtOnce(t *testing.T) {
	clk := clock.NewFake(t0)
	srv := newServer(t, statuses(http.Header{"Retry-After": {"3600"}}, 503, 200))
	tr := newTransport(t, transport.Config{Base: srv.Client().Transport, Retry: retry.Config{Clock: clk}})
	resp, waits, err := roundTrip(t, clk, tr, newRequest(t, http.MethodGet, srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 503 || readBody(t, resp) != "attempt 1" || len(waits) != 0 || srv.hits.Load() != 1 {
		t.Fatalf("got %v after %d requests and waits %v, want the first 503 at once", resp.Status, srv.hits.Load(), waits)
	}
	gu := transport.GiveUp(resp)
	if gu == nil || gu.Reason != retry.ReasonRetryAfterExceedsLimit || gu.Attempts != 1 || gu.LastStatus != 503 {
		t.Fatalf("GiveUp = %+v, want retry_after_exceeds_limit after 1 attempt", gu)
	}
	re := gaveUp(t, gu)
	if re.RetryAfter != time.Hour || re.MaxRetryAfter != retry.DefaultMaxRetryAfter {
		t.Fatalf("the error tells hint %v and limit %v, want 1h and 10m", re.RetryAfter, re.MaxRetryAfter)
	}
}

func TestMaxRetryAfterIsConfigurable(t *testing.T) {
	for _, tc := range []struct {
		retryAfter int
		hits       int32
	}{{240, 2}, {360, 1}} {
		t.Run(strconv.Itoa(tc.retryAfter), func(t *testing.T) {
			clk := clock.NewFake(t0)
			srv := newServer(t, statuses(http.Header{"Retry-After": {strconv.Itoa(tc.retryAfter)}}, 429, 200))
			tr := newTransport(t, transport.Config{
				Base: srv.Client().Transport, Retry: retry.Config{Clock: clk}, MaxRetryAfter: 5 * time.Minute,
			})
			resp, _, err := roundTrip(t, clk, tr, newRequest(t, http.MethodGet, srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if n := srv.hits.Load(); n != tc.hits {
				t.Fatalf("Retry-After %ds under a 5m limit: %d requests, want %d", tc.retryAfter, n, tc.hits)
			}
		})
	}
	// TestNewValidates checks that a negative limit, or two different
	// ones, are refused.
}

// A 429 says the server did not process the request, and so does a 503
// with a Retry-After: a POST answered so is retried like any request. A
// POST's other failures keep the rule for requests that are not
// idempotent: they are returned, not retried.
func TestPOSTRefusedWith429Or503RetryAfterIsRetried(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string
		code   int
		header http.Header
		hits   int32
		reason retry.Reason
	}{
		{"POST 429", http.MethodPost, 429, nil, 2, ""},
		{"POST 429 with Retry-After", http.MethodPost, 429, http.Header{"Retry-After": {"3"}}, 2, ""},
		{"PATCH 429", http.MethodPatch, 429, nil, 2, ""},
		{"POST 503 with Retry-After", http.MethodPost, 503, http.Header{"Retry-After": {"3"}}, 2, ""},
		{"POST 503 with a date Retry-After", http.MethodPost, 503, http.Header{"Retry-After": {t0.Add(5 * time.Second).Format(http.TimeFormat)}}, 2, ""},
		{"POST 503", http.MethodPost, 503, nil, 1, retry.ReasonNonRetryable},
		{"POST 503 with a bad Retry-After", http.MethodPost, 503, http.Header{"Retry-After": {"soon"}}, 1, retry.ReasonNonRetryable},
		{"POST 500 with Retry-After", http.MethodPost, 500, http.Header{"Retry-After": {"3"}}, 1, retry.ReasonNonRetryable},
		{"POST 502", http.MethodPost, 502, nil, 1, retry.ReasonNonRetryable},
		{"POST 504", http.MethodPost, 504, nil, 1, retry.ReasonNonRetryable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			srv := newServer(t, statuses(tc.header, tc.code, 200))
			// The README's transport, on a fake clock.
			br, err := breaker.New(breaker.Config{Name: "llm", Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			tr := newTransport(t, transport.Config{
				Base: srv.Client().Transport, Breaker: br, AttemptTimeout: 10 * time.Second,
				Retry: retry.Config{Clock: clk},
			})
			req := newRequest(t, tc.method, srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m"}`))
			resp, _, err := roundTrip(t, clk, tr, req)
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if n := srv.hits.Load(); n != tc.hits {
				t.Fatalf("server got %d requests, want %d", n, tc.hits)
			}
			if got := srv.seen(); got[len(got)-1] != `{"model":"m"}` {
				t.Fatalf("the retry sent body %q", got[len(got)-1])
			}
			if tc.reason == "" {
				if resp.StatusCode != 200 || transport.GiveUp(resp) != nil {
					t.Fatalf("got %v, GiveUp %v; want the retry's 200", resp.Status, transport.GiveUp(resp))
				}
				return
			}
			gu := transport.GiveUp(resp)
			if resp.StatusCode != tc.code || gu == nil || gu.Reason != tc.reason || !strings.Contains(gu.Detail, "not idempotent") {
				t.Fatalf("got %v, GiveUp %+v; want the %d, %s, not idempotent", resp.Status, gu, tc.code, tc.reason)
			}
		})
	}
}

// What spec 01 asks of every call to the LLM API: 429, 500, 502, 503 and
// 504 retried, five retries, waits from 1 s doubling to 60 s with ±20%
// jitter, and a breaker. A chat completion changes nothing but the bill,
// so the LLM's transport retries its POSTs like idempotent requests.
func TestLLMTransportRetriesEveryStatusTheSpecNames(t *testing.T) {
	for _, code := range []int{429, 500, 502, 503, 504} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			clk := clock.NewFake(t0)
			srv := newServer(t, statuses(nil, code))
			br, err := breaker.New(breaker.Config{Name: "llm", Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			tr := newTransport(t, transport.Config{
				Breaker: br, AttemptTimeout: 10 * time.Second, RetryNonIdempotent: true,
				Base: srv.Client().Transport, Retry: retry.Config{Clock: clk, Rand: func() float64 { return 0.5 }},
			})
			resp, waits, err := roundTrip(t, clk, tr, newRequest(t, http.MethodPost, srv.URL, strings.NewReader("{}")))
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			// The breaker (5 failures in 30 s) opens at the fifth failure,
			// before the sixth attempt: the call ends there.
			want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}
			if n := srv.hits.Load(); n != 5 || fmt.Sprint(waits) != fmt.Sprint(want) {
				t.Fatalf("%d requests, waits %v; want 5 requests and waits %v", n, waits, want)
			}
			if gu := transport.GiveUp(resp); gu == nil || gu.Reason != retry.ReasonNonRetryable || !strings.Contains(gu.Detail, "breaker") {
				t.Fatalf("GiveUp = %+v, want non_retryable: the breaker opened", gu)
			}
		})
	}
}
