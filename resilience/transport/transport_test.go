package transport_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/resilience/retry"
	"github.com/weirhq/weir/resilience/timeout"
	"github.com/weirhq/weir/resilience/transport"
)

// server is an httptest server that counts its requests and keeps the body
// of each.
type server struct {
	*httptest.Server
	hits   atomic.Int32
	mu     sync.Mutex
	bodies []string
}

// newServer starts a server whose handler h gets the number of the request,
// from 1, after the request's body has been read.
func newServer(t *testing.T, h func(n int, w http.ResponseWriter, r *http.Request)) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		s.mu.Lock()
		s.bodies = append(s.bodies, string(b))
		s.mu.Unlock()
		h(int(s.hits.Add(1)), w, r)
	}))
	s.Config.ErrorLog = discardLog()
	t.Cleanup(s.Close)
	return s
}

// statuses answers the n-th request with codes[n-1] (the last code once
// they run out), a body "attempt n", and header h if given.
func statuses(h http.Header, codes ...int) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, _ *http.Request) {
		for k, v := range h {
			w.Header()[k] = v
		}
		w.WriteHeader(codes[min(n, len(codes))-1])
		fmt.Fprintf(w, "attempt %d", n)
	}
}

func (s *server) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies...)
}

// hangUp is a handler that drops the connection without answering.
func hangUp() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	})
}

func discardLog() *log.Logger { return log.New(io.Discard, "", 0) }

// closedAddr returns a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// quick is a retry config with no wait between attempts.
func quick(attempts int) retry.Config {
	return retry.Config{MaxAttempts: attempts, Backoff: backoff.Constant(0)}
}

func newTransport(t *testing.T, cfg transport.Config) *transport.Transport {
	t.Helper()
	tr, err := transport.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func newRequest(t *testing.T, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// plainReader hides the type of its reader, so that http.NewRequest sets
// no GetBody and no ContentLength.
type plainReader struct{ io.Reader }

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return string(b)
}

// roundTrip runs tr.RoundTrip on its own goroutine and, each time the retry
// policy starts to wait, moves the fake clock to the end of the wait. It
// returns RoundTrip's results and the waits in order. Nothing sleeps.
func roundTrip(t *testing.T, clk *clock.Fake, tr http.RoundTripper, req *http.Request) (*http.Response, []time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	running, finished := context.WithCancel(ctx)
	var (
		resp *http.Response
		err  error
	)
	go func() {
		defer finished()
		resp, err = tr.RoundTrip(req)
	}()
	var waits []time.Duration
	for clk.WaitForTimers(running, 1) == nil {
		waits = append(waits, clk.AdvanceToNextTimer())
	}
	if ctx.Err() != nil {
		t.Fatal("RoundTrip did not return within 30s of real time")
	}
	return resp, waits, err
}

// cancelWhileWaiting runs tr.RoundTrip(req) on its own goroutine, cancels
// the request once the retry policy starts to wait on clk, and returns
// RoundTrip's error (an error of its own if a response came instead). It
// fails the test if the wait never starts or RoundTrip does not return
// within 10 s of real time after the cancellation.
func cancelWhileWaiting(t *testing.T, clk *clock.Fake, tr http.RoundTripper, req *http.Request) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req = req.WithContext(ctx)
	errc := make(chan error, 1)
	go func() {
		resp, err := tr.RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
			err = fmt.Errorf("got a response %v", resp.Status)
		}
		errc <- err
	}()
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if err := clk.WaitForTimers(wctx, 1); err != nil {
		t.Fatal("RoundTrip never started to wait")
	}
	cancel()
	select {
	case err := <-errc:
		return err
	case <-wctx.Done():
		t.Fatal("RoundTrip did not return after the caller cancelled")
		return nil
	}
}

func gaveUp(t *testing.T, err error) *retry.Error {
	t.Helper()
	re, ok := errors.AsType[*retry.Error](err)
	if !ok {
		t.Fatalf("error %v (%T) is not a *retry.Error", err, err)
	}
	return re
}

func TestRetriesRetryableStatusesUntilSuccess(t *testing.T) {
	const payload = `{"doc":"quarterly report"}`
	for _, tc := range []struct {
		name string
		body func() io.Reader
	}{
		{"body with GetBody", func() io.Reader { return strings.NewReader(payload) }},
		{"plain reader without GetBody", func() io.Reader { return plainReader{strings.NewReader(payload)} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, statuses(nil, 503, 503, 200))
			tr := newTransport(t, transport.Config{Base: srv.Client().Transport, Retry: quick(6)})
			req := newRequest(t, http.MethodPut, srv.URL, tc.body())
			hadGetBody := req.GetBody != nil
			body := req.Body
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 200 || readBody(t, resp) != "attempt 3" {
				t.Fatalf("got %v, want the third attempt's 200", resp.Status)
			}
			if got := srv.seen(); len(got) != 3 || got[0] != payload || got[1] != payload || got[2] != payload {
				t.Fatalf("server saw bodies %q, want the payload 3 times", got)
			}
			if req.Body != body || (req.GetBody != nil) != hadGetBody || len(req.Header) != 0 {
				t.Fatal("RoundTrip changed the caller's request")
			}
		})
	}
}

// A Retry-After is waited in full, whatever the backoff: a floor over
// its jitter, longer than its cap, or until the date it names.
func TestRetryAfterIsWaitedInFull(t *testing.T) {
	date := t0.Add(30 * time.Second).Format(http.TimeFormat)
	for _, tc := range []struct {
		name, retryAfter string
		code             int
		backoff          backoff.Backoff
		rand             func() float64
		want             time.Duration
	}{
		{"seconds over full jitter drawing a zero wait", "7", 429,
			backoff.Exponential(time.Second, 2, time.Minute).WithJitter(backoff.JitterFull), func() float64 { return 0 }, 7 * time.Second},
		{"an HTTP date", date, 503,
			backoff.Exponential(time.Second, 2, time.Minute).WithJitter(backoff.JitterNone), nil, 30 * time.Second},
		// The transport never calls the server again before the server allows.
		{"longer than the backoff's cap", "120", 429,
			backoff.Exponential(time.Second, 2, 30*time.Second), nil, 120 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			srv := newServer(t, statuses(http.Header{"Retry-After": {tc.retryAfter}}, tc.code, 200))
			tr := newTransport(t, transport.Config{
				Base:  srv.Client().Transport,
				Retry: retry.Config{Backoff: tc.backoff, Rand: tc.rand, Clock: clk},
			})
			resp, waits, err := roundTrip(t, clk, tr, newRequest(t, http.MethodGet, srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 200 || readBody(t, resp) != "attempt 2" {
				t.Fatalf("got %v, want the retry's 200", resp.Status)
			}
			if len(waits) != 1 || waits[0] != tc.want {
				t.Fatalf("Retry-After %s: waits %v, want exactly [%v]", tc.retryAfter, waits, tc.want)
			}
		})
	}
}

func TestBadRetryAfterIsIgnoredAndLogged(t *testing.T) {
	var logs bytes.Buffer
	srv := newServer(t, statuses(http.Header{"Retry-After": {"soon"}}, 503, 200))
	tr := newTransport(t, transport.Config{
		Base:   srv.Client().Transport,
		Retry:  quick(3),
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || readBody(t, resp) != "attempt 2" {
		t.Fatalf("got %v, want the retry's 200", resp.Status)
	}
	if !strings.Contains(logs.String(), "ignoring retry-after") || !strings.Contains(logs.String(), `\"soon\"`) {
		t.Fatalf("log does not report the bad header:\n%s", logs.String())
	}
}

func TestRetryAfterPastTTLStopsAtOnce(t *testing.T) {
	clk := clock.NewFake(t0)
	srv := newServer(t, statuses(http.Header{"Retry-After": {"30"}}, 503, 200))
	tr := newTransport(t, transport.Config{
		Base:  srv.Client().Transport,
		Retry: retry.Config{TTL: 10 * time.Second, Clock: clk},
	})
	resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 503 || readBody(t, resp) != "attempt 1" {
		t.Fatalf("got %v, want the first 503", resp.Status)
	}
	if n := srv.hits.Load(); n != 1 {
		t.Fatalf("server got %d requests, want 1", n)
	}
	if n := clk.Timers(); n != 0 {
		t.Fatalf("%d timers waiting", n)
	}
}

func TestNonRetryableStatusesAreReturnedAtOnce(t *testing.T) {
	for _, code := range []int{200, 201, 204, 301, 304, 400, 401, 403, 404, 409, 422, 501, 505} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			srv := newServer(t, statuses(nil, code, 200))
			tr := newTransport(t, transport.Config{Base: srv.Client().Transport, Retry: quick(6)})
			resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if resp.StatusCode != code {
				t.Fatalf("got %d, want %d", resp.StatusCode, code)
			}
			if n := srv.hits.Load(); n != 1 {
				t.Fatalf("server got %d requests, want 1", n)
			}
		})
	}
}

func TestNonIdempotentRequestsAndStatuses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		method   string
		header   string
		retryAll bool
		want     int // server hits
	}{
		{"POST", http.MethodPost, "", false, 1},
		{"PATCH", http.MethodPatch, "", false, 1},
		{"POST with RetryNonIdempotent", http.MethodPost, "", true, 3},
		{"POST with Idempotency-Key", http.MethodPost, "Idempotency-Key", false, 3},
		{"PATCH with X-Idempotency-Key", http.MethodPatch, "X-Idempotency-Key", false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, statuses(nil, 503, 503, 200))
			tr := newTransport(t, transport.Config{
				Base: srv.Client().Transport, Retry: quick(6), RetryNonIdempotent: tc.retryAll,
			})
			req := newRequest(t, tc.method, srv.URL, strings.NewReader("payload"))
			if tc.header != "" {
				req.Header.Set(tc.header, "key-1")
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
			if n := int(srv.hits.Load()); n != tc.want {
				t.Fatalf("server got %d requests, want %d", n, tc.want)
			}
			want := 200
			if tc.want == 1 {
				want = 503
			}
			if resp.StatusCode != want {
				t.Fatalf("got %d, want %d", resp.StatusCode, want)
			}
		})
	}
}

// A dropped connection leaves it unknown whether the server acted: an
// idempotent request is retried, a POST is not.
func TestDroppedConnectionRetriedOnlyWhenIdempotent(t *testing.T) {
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		t.Run(method, func(t *testing.T) {
			var hits atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if hits.Add(1) == 1 {
					hangUp().ServeHTTP(w, r)
					return
				}
				io.WriteString(w, "ok")
			}))
			defer srv.Close()
			tr := newTransport(t, transport.Config{Base: srv.Client().Transport, Retry: quick(3)})
			resp, err := tr.RoundTrip(newRequest(t, method, srv.URL, strings.NewReader("x")))
			if method == http.MethodGet {
				if err != nil || readBody(t, resp) != "ok" || hits.Load() != 2 {
					t.Fatalf("got %v after %d requests, want ok after 2", err, hits.Load())
				}
				return
			}
			if re := gaveUp(t, err); re.Reason != retry.ReasonNonRetryable || re.Attempts != 1 || hits.Load() != 1 {
				t.Fatalf("got %v after %d requests, want a non_retryable error after 1", err, hits.Load())
			}
		})
	}
}

func TestPOSTRetriedAfterDialError(t *testing.T) {
	t.Run("every attempt refused", func(t *testing.T) {
		tr := newTransport(t, transport.Config{Base: &http.Transport{}, Retry: quick(3)})
		resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, "http://"+closedAddr(t), strings.NewReader("x")))
		if resp != nil {
			t.Fatalf("got a response %v", resp.Status)
		}
		re := gaveUp(t, err)
		if re.Reason != retry.ReasonMaxAttempts || re.Attempts != 3 || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("got %v, want connection refused 3 times", err)
		}
	})
	t.Run("server comes up", func(t *testing.T) {
		addr := closedAddr(t)
		var (
			bodies  = make(chan string, 10)
			started = make(chan bool, 1)
		)
		handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			bodies <- string(b)
			io.WriteString(w, "created")
		})
		tr := newTransport(t, transport.Config{Base: &http.Transport{}, Retry: retry.Config{
			MaxAttempts: 3,
			Backoff:     backoff.Constant(0),
			OnRetry: func(ev retry.Event) {
				if ev.Attempt != 1 {
					return
				}
				// Start the server where the first attempt found nothing.
				ln, err := net.Listen("tcp", addr)
				if err != nil {
					started <- false
					return
				}
				srv := httptest.NewUnstartedServer(handler)
				srv.Listener.Close()
				srv.Listener = ln
				srv.Start()
				t.Cleanup(srv.Close)
				started <- true
			},
		}})
		resp, err := tr.RoundTrip(newRequest(t, http.MethodPost, "http://"+addr, plainReader{strings.NewReader("payload")}))
		if !<-started {
			t.Skipf("could not listen on %s again", addr)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := readBody(t, resp); got != "created" {
			t.Fatalf("got %q", got)
		}
		close(bodies)
		var got []string
		for b := range bodies {
			got = append(got, b)
		}
		if len(got) != 1 || got[0] != "payload" {
			t.Fatalf("server saw %q, want the payload once", got)
		}
	})
}

func TestBodyLongerThanMaxBufferedBodyIsSentOnce(t *testing.T) {
	long := strings.Repeat("0123456789", 100)
	for _, tc := range []struct {
		name   string
		length int64
	}{
		{"unknown length", 0},
		{"declared length", int64(len(long))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, statuses(nil, 503, 200))
			tr := newTransport(t, transport.Config{Base: srv.Client().Transport, Retry: quick(3), MaxBufferedBody: 16})
			req := newRequest(t, http.MethodPut, srv.URL, plainReader{strings.NewReader(long)})
			req.ContentLength = tc.length
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 503 || readBody(t, resp) != "attempt 1" {
				t.Fatalf("got %v, want the 503, unretried", resp.Status)
			}
			if got := srv.seen(); len(got) != 1 || got[0] != long {
				t.Fatalf("server saw %d bodies (first %d bytes), want the whole body once", len(got), len(got[0]))
			}
		})
	}
	t.Run("fits exactly", func(t *testing.T) {
		srv := newServer(t, statuses(nil, 503, 200))
		tr := newTransport(t, transport.Config{Base: srv.Client().Transport, Retry: quick(3), MaxBufferedBody: int64(len(long))})
		resp, err := tr.RoundTrip(newRequest(t, http.MethodPut, srv.URL, plainReader{strings.NewReader(long)}))
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || readBody(t, resp) != "attempt 2" {
			t.Fatalf("got %v, want the retry's 200", resp.Status)
		}
		if got := srv.seen(); len(got) != 2 || got[1] != long {
			t.Fatalf("server saw %d bodies, want the whole body twice", len(got))
		}
	})
}

func TestExhaustedRetriesReturnTheLastResponse(t *testing.T) {
	srv := newServer(t, statuses(http.Header{"X-Reason": {"overloaded"}}, 503))
	tr := newTransport(t, transport.Config{Base: srv.Client().Transport, Retry: quick(3)})
	resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, srv.URL, nil))
	if err != nil {
		t.Fatalf("got error %v, want the last response", err)
	}
	if resp.StatusCode != 503 || resp.Header.Get("X-Reason") != "overloaded" {
		t.Fatalf("got %v %v", resp.Status, resp.Header)
	}
	if got := readBody(t, resp); got != "attempt 3" {
		t.Fatalf("body %q, want the third attempt's", got)
	}
	if n := srv.hits.Load(); n != 3 {
		t.Fatalf("server got %d requests, want 3", n)
	}
}

func newBreaker(t *testing.T, s breaker.Strategy) *breaker.Breaker {
	t.Helper()
	b, err := breaker.New(breaker.Config{Name: "api", Strategy: s, Clock: clock.NewFake(t0)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBreakerOpensAndFailsFast(t *testing.T) {
	t.Run("on statuses", func(t *testing.T) {
		srv := newServer(t, statuses(nil, 503))
		b := newBreaker(t, breaker.Consecutive(3))
		tr := newTransport(t, transport.Config{Base: srv.Client().Transport, Retry: quick(6), Breaker: b})

		// The third failed attempt opens the breaker, which ends the call
		// at once with that response.
		resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, srv.URL, nil))
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 503 || readBody(t, resp) != "attempt 3" || b.State() != breaker.Open {
			t.Fatalf("got %v with the breaker %v, want the third 503 and an open breaker", resp.Status, b.State())
		}
		for range 3 {
			resp, err = tr.RoundTrip(newRequest(t, http.MethodGet, srv.URL, nil))
			if resp != nil || !errors.Is(err, breaker.ErrOpen) {
				t.Fatalf("got %v, %v; want breaker.ErrOpen", resp, err)
			}
			if re := gaveUp(t, err); re.Reason != retry.ReasonNonRetryable || re.Attempts != 1 {
				t.Fatalf("got %v, want non_retryable after 1 attempt", err)
			}
		}
		if n := srv.hits.Load(); n != 3 {
			t.Fatalf("server got %d requests, want 3: an open breaker must not reach it", n)
		}
	})
	t.Run("on transport errors", func(t *testing.T) {
		b := newBreaker(t, breaker.Consecutive(2))
		tr := newTransport(t, transport.Config{Base: &http.Transport{}, Retry: quick(6), Breaker: b})
		_, err := tr.RoundTrip(newRequest(t, http.MethodGet, "http://"+closedAddr(t), nil))
		if !errors.Is(err, breaker.ErrOpen) || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("got %v, want connection refused and breaker.ErrOpen", err)
		}
		if re := gaveUp(t, err); re.Attempts != 2 {
			t.Fatalf("got %d attempts, want 2", re.Attempts)
		}
	})
	t.Run("4xx is a success", func(t *testing.T) {
		srv := newServer(t, statuses(nil, 404))
		b := newBreaker(t, breaker.Consecutive(1))
		tr := newTransport(t, transport.Config{Base: srv.Client().Transport, Retry: quick(6), Breaker: b})
		for range 5 {
			resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
		}
		if s := b.State(); s != breaker.Closed {
			t.Fatalf("breaker is %v after five 404s, want closed", s)
		}
	})
}

func TestAttemptTimeout(t *testing.T) {
	const attemptTimeout = 100 * time.Millisecond

	t.Run("retried, and the body outlives the timer", func(t *testing.T) {
		release := make(chan struct{})
		srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
			if n == 1 {
				<-r.Context().Done() // no headers: the attempt times out
				return
			}
			io.WriteString(w, "first-")
			http.NewResponseController(w).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			io.WriteString(w, "second")
		})
		b := newBreaker(t, breaker.Consecutive(5))
		tr := newTransport(t, transport.Config{
			Base: srv.Client().Transport, Retry: quick(3), Breaker: b, AttemptTimeout: attemptTimeout,
		})
		resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, srv.URL, nil))
		if err != nil {
			t.Fatal(err)
		}
		if n := srv.hits.Load(); n != 2 {
			t.Fatalf("server got %d requests, want 2", n)
		}
		// A timer of AttemptTimeout started now fires after the attempt's
		// own timer would have: only then does the server send the rest.
		<-time.NewTimer(attemptTimeout).C
		close(release)
		if got := readBody(t, resp); got != "first-second" {
			t.Fatalf("body %q, want it whole", got)
		}
	})

	t.Run("counts as a breaker failure", func(t *testing.T) {
		srv := newServer(t, func(_ int, _ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		b := newBreaker(t, breaker.Consecutive(1))
		tr := newTransport(t, transport.Config{
			Base: srv.Client().Transport, Retry: quick(3), Breaker: b, AttemptTimeout: attemptTimeout,
		})
		_, err := tr.RoundTrip(newRequest(t, http.MethodGet, srv.URL, nil))
		if !errors.Is(err, timeout.ErrTimeout) || !errors.Is(err, breaker.ErrOpen) {
			t.Fatalf("got %v, want a timeout that opened the breaker", err)
		}
		if errors.Is(err, context.Canceled) {
			t.Fatalf("%v matches context.Canceled: the caller did not cancel", err)
		}
		if n := srv.hits.Load(); n != 1 || b.State() != breaker.Open {
			t.Fatalf("%d requests, breaker %v; want 1 and open", n, b.State())
		}
	})

	t.Run("POST is not retried", func(t *testing.T) {
		srv := newServer(t, func(_ int, _ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		tr := newTransport(t, transport.Config{Base: srv.Client().Transport, Retry: quick(3), AttemptTimeout: attemptTimeout})
		_, err := tr.RoundTrip(newRequest(t, http.MethodPost, srv.URL, strings.NewReader("x")))
		if re := gaveUp(t, err); re.Reason != retry.ReasonNonRetryable || !errors.Is(err, timeout.ErrTimeout) {
			t.Fatalf("got %v, want a non_retryable timeout", err)
		}
		if n := srv.hits.Load(); n != 1 {
			t.Fatalf("server got %d requests, want 1", n)
		}
	})
}

func TestCallerCancelDuringWaitReturnsPromptly(t *testing.T) {
	clk := clock.NewFake(t0)
	srv := newServer(t, statuses(nil, 503))
	b := newBreaker(t, breaker.Consecutive(2))
	tr := newTransport(t, transport.Config{
		Base: srv.Client().Transport, Breaker: b, Retry: retry.Config{Clock: clk},
	})
	err := cancelWhileWaiting(t, clk, tr, newRequest(t, http.MethodGet, srv.URL, nil))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if se, ok := errors.AsType[*transport.StatusError](err); !ok || se.StatusCode != 503 {
		t.Fatalf("got %v, want it to name the 503 it was waiting to retry", err)
	}
	if n := srv.hits.Load(); n != 1 {
		t.Fatalf("server got %d requests, want 1", n)
	}
}

func TestCallerCancelDuringAttemptIsIgnoredByTheBreaker(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := newServer(t, func(_ int, _ http.ResponseWriter, r *http.Request) {
		cancel()
		<-r.Context().Done()
	})
	b := newBreaker(t, breaker.Consecutive(1))
	tr := newTransport(t, transport.Config{Base: srv.Client().Transport, Retry: quick(3), Breaker: b})
	_, err := tr.RoundTrip(newRequest(t, http.MethodGet, srv.URL, nil).WithContext(ctx))
	if re := gaveUp(t, err); re.Reason != retry.ReasonCancelled || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want cancelled", err)
	}
	if s := b.State(); s != breaker.Closed {
		t.Fatalf("breaker is %v, want closed: the caller's cancellation says nothing about the server", s)
	}
}

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  transport.Config
		want string
	}{
		{"negative AttemptTimeout", transport.Config{AttemptTimeout: -time.Second}, "AttemptTimeout"},
		{"negative MaxBufferedBody", transport.Config{MaxBufferedBody: -1}, "MaxBufferedBody"},
		{"bad retry config", transport.Config{Retry: retry.Config{MaxAttempts: -1}}, "Retry"},
		{"bad backoff", transport.Config{Retry: retry.Config{Backoff: backoff.Backoff{Factor: 0.5}}}, "factor"},
		{"negative MaxRetryAfter", transport.Config{MaxRetryAfter: -time.Second}, "MaxRetryAfter"},
		{"two different MaxRetryAfter limits", transport.Config{MaxRetryAfter: time.Minute, Retry: retry.Config{MaxRetryAfter: time.Hour}}, "MaxRetryAfter"},
	} {
		if _, err := transport.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New returned %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
	if _, err := transport.New(transport.Config{}); err != nil {
		t.Fatalf("the zero Config does not work: %v", err)
	}
}
