package transport_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/resilience/backoff"
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
