package transport_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/resilience/transport"
)

// A client whose requests are retried: the server is unavailable twice, then
// answers.
func Example() {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) <= 2 {
			w.Header().Set("Retry-After", "0")
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "indexed")
	}))
	defer srv.Close()

	tr, err := transport.New(transport.Config{
		Retry:          retry.Config{MaxAttempts: 4, Backoff: backoff.Constant(10 * time.Millisecond)},
		AttemptTimeout: 5 * time.Second,
	})
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: tr}

	resp, err := client.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status, string(body), "after", hits.Load(), "requests")
	// Output:
	// 200 OK indexed after 3 requests
}

func ExampleParseRetryAfter() {
	now := time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)
	for _, v := range []string{"120", "Wed, 21 Jan 2026 15:30:45 GMT", "Wed, 21 Jan 2026 15:00:00 GMT", "1.5"} {
		d, err := transport.ParseRetryAfter(v, now)
		fmt.Println(d, err)
	}
	// Output:
	// 2m0s <nil>
	// 45s <nil>
	// 0s <nil>
	// 0s transport: parse retry-after "1.5": not a whole number of seconds: invalid retry-after value
}

// The transport of the calls to an LLM's API, as weir's resilience spec
// asks: a breaker, and its POSTs retried on 429, 500, 502, 503 and 504.
// Here the API is rate-limited once, then answers.
func Example_llm() {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			http.Error(w, "rate limited", http.StatusTooManyRequests)
			return
		}
		fmt.Fprint(w, `{"choices":[]}`)
	}))
	defer srv.Close()

	br, _ := breaker.New(breaker.Config{Name: "llm"}) // 5 failures in 30 s open it for 60 s
	tr, err := transport.New(transport.Config{
		Breaker:            br,
		AttemptTimeout:     10 * time.Second,
		RetryNonIdempotent: true,                                                           // a completion changes nothing but the bill
		Retry:              retry.Config{Backoff: backoff.Constant(10 * time.Millisecond)}, // short, for the example
	})
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: tr}
	resp, err := client.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m"}`))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	fmt.Println(resp.Status, "after", hits.Load(), "requests")
	// Output:
	// 200 OK after 2 requests
}

// GiveUp tells why the transport returned a response it retries without
// retrying it again.
func ExampleGiveUp() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	tr, err := transport.New(transport.Config{
		Retry: retry.Config{MaxAttempts: 3, Backoff: backoff.Constant(0)},
	})
	if err != nil {
		panic(err)
	}
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	if gu := transport.GiveUp(resp); gu != nil {
		fmt.Println(resp.StatusCode, gu.Reason, gu.Attempts, gu.LastStatus)
	}
	// Output:
	// 503 max_attempts_exceeded 3 503
}
