package transport_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/resilience/transport"
)

// fakeBase is a RoundTripper that answers from a script and records the
// context of each attempt and whether each response body was closed.
type fakeBase struct {
	mu     sync.Mutex
	script []func(*http.Request) (*http.Response, error)
	ctxs   []context.Context
	bodies []*trackedBody
}

type trackedBody struct {
	io.Reader
	closed atomic.Bool
}

func (b *trackedBody) Close() error { b.closed.Store(true); return nil }

func (f *fakeBase) RoundTrip(req *http.Request) (*http.Response, error) {
	f.mu.Lock()
	n := len(f.ctxs)
	f.ctxs = append(f.ctxs, req.Context())
	step := f.script[min(n, len(f.script)-1)]
	f.mu.Unlock()
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	resp, err := step(req)
	if resp != nil {
		f.mu.Lock()
		f.bodies = append(f.bodies, resp.Body.(*trackedBody))
		f.mu.Unlock()
	}
	return resp, err
}

func answer(code int, body string) func(*http.Request) (*http.Response, error) {
	return func(req *http.Request) (*http.Response, error) {
		return &http.Response{
			StatusCode: code, Status: http.StatusText(code), Header: http.Header{},
			Body: &trackedBody{Reader: strings.NewReader(body)}, Request: req,
		}, nil
	}
}

func fail(err error) func(*http.Request) (*http.Response, error) {
	return func(*http.Request) (*http.Response, error) { return nil, err }
}

func done(ctx context.Context) bool { return ctx.Err() != nil }

// Every attempt's context ends: a discarded response's when it is discarded,
// a failed attempt's when it fails, the returned response's when the caller
// closes its body (or reads it to the end), and not before.
func TestAttemptContextsEnd(t *testing.T) {
	errDropped := errors.New("dropped")
	for _, tc := range []struct {
		name  string
		close func(*http.Response)
	}{
		{"closed", func(r *http.Response) { r.Body.Close() }},
		{"read to the end", func(r *http.Response) { io.ReadAll(r.Body) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := &fakeBase{script: []func(*http.Request) (*http.Response, error){
				answer(503, "busy"),
				fail(&timeoutErr{}),
				answer(200, "done"),
			}}
			tr := newTransport(t, transport.Config{Base: base, Retry: quick(3), AttemptTimeout: time.Hour})
			resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, "http://example.test/", nil))
			if err != nil {
				t.Fatal(err)
			}
			if len(base.ctxs) != 3 {
				t.Fatalf("%d attempts, want 3", len(base.ctxs))
			}
			if !done(base.ctxs[0]) || !base.bodies[0].closed.Load() {
				t.Fatal("the retried 503 was not closed and its context not ended")
			}
			if !done(base.ctxs[1]) {
				t.Fatal("the failed attempt's context did not end")
			}
			if done(base.ctxs[2]) {
				t.Fatal("the returned response's context ended before its body was read")
			}
			tc.close(resp)
			if !done(base.ctxs[2]) {
				t.Fatal("the returned response's context did not end with its body")
			}
		})
	}
	t.Run("exhausted", func(t *testing.T) {
		base := &fakeBase{script: []func(*http.Request) (*http.Response, error){answer(503, "busy")}}
		tr := newTransport(t, transport.Config{Base: base, Retry: quick(2), AttemptTimeout: time.Hour})
		resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, "http://example.test/", nil))
		if err != nil {
			t.Fatal(err)
		}
		if !done(base.ctxs[0]) || done(base.ctxs[1]) || base.bodies[1].closed.Load() {
			t.Fatal("want the first attempt ended and the returned one alive")
		}
		if got := readBody(t, resp); got != "busy" || !done(base.ctxs[1]) {
			t.Fatalf("body %q; want it readable, then the context ended", got)
		}
	})
	t.Run("transport error", func(t *testing.T) {
		base := &fakeBase{script: []func(*http.Request) (*http.Response, error){fail(errDropped)}}
		tr := newTransport(t, transport.Config{Base: base, Retry: quick(2), AttemptTimeout: time.Hour})
		if _, err := tr.RoundTrip(newRequest(t, http.MethodGet, "http://example.test/", nil)); !errors.Is(err, errDropped) {
			t.Fatalf("got %v", err)
		}
		if len(base.ctxs) != 1 || !done(base.ctxs[0]) {
			t.Fatal("the failed attempt's context did not end")
		}
	})
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// closeCounter is a request body that counts its Close calls.
type closeCounter struct {
	io.Reader
	closes atomic.Int32
}

func (c *closeCounter) Close() error { c.closes.Add(1); return nil }

// RoundTrip closes the caller's body on every path, as a RoundTripper must,
// including those where no attempt sends it.
func TestRequestBodyIsAlwaysClosed(t *testing.T) {
	ok := &fakeBase{script: []func(*http.Request) (*http.Response, error){answer(200, "")}}
	open := newBreaker(t, breaker.Consecutive(1))
	open.Trip()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		cfg  transport.Config
		ctx  context.Context
	}{
		{"sent", transport.Config{Base: ok}, context.Background()},
		{"buffered", transport.Config{Base: ok, Retry: quick(3)}, context.Background()},
		{"too long to buffer", transport.Config{Base: ok, Retry: quick(3), MaxBufferedBody: 2}, context.Background()},
		{"breaker refuses", transport.Config{Base: ok, Breaker: open}, context.Background()},
		{"cancelled before the first attempt", transport.Config{Base: ok}, cancelled},
	} {
		for _, getBody := range []bool{false, true} {
			body := &closeCounter{Reader: strings.NewReader("payload")}
			req := newRequest(t, http.MethodPut, "http://example.test/", body).WithContext(tc.ctx)
			if getBody {
				req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("payload")), nil }
			}
			resp, _ := newTransport(t, tc.cfg).RoundTrip(req)
			if resp != nil {
				resp.Body.Close()
			}
			if n := body.closes.Load(); n < 1 {
				t.Errorf("%s (GetBody %v): the caller's body was not closed", tc.name, getBody)
			}
		}
	}
}

func TestGetBodyFailureIsNotRetried(t *testing.T) {
	errGone := errors.New("gone")
	base := &fakeBase{script: []func(*http.Request) (*http.Response, error){answer(503, "")}}
	tr := newTransport(t, transport.Config{Base: base, Retry: quick(3)})
	req := newRequest(t, http.MethodPut, "http://example.test/", strings.NewReader("x"))
	req.GetBody = func() (io.ReadCloser, error) { return nil, errGone }
	_, err := tr.RoundTrip(req)
	if !errors.Is(err, errGone) || len(base.ctxs) != 1 {
		t.Fatalf("got %v after %d attempts, want GetBody's error after 1", err, len(base.ctxs))
	}
}

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

func TestBodyReadFailureBeforeTheFirstAttempt(t *testing.T) {
	errDisk := errors.New("disk")
	base := &fakeBase{script: []func(*http.Request) (*http.Response, error){answer(200, "")}}
	body := &closeCounter{Reader: failingReader{errDisk}}
	_, err := newTransport(t, transport.Config{Base: base}).RoundTrip(newRequest(t, http.MethodPut, "http://example.test/", body))
	if !errors.Is(err, errDisk) || len(base.ctxs) != 0 || body.closes.Load() != 1 {
		t.Fatalf("got %v, %d attempts, %d closes; want the read error, no attempt, the body closed", err, len(base.ctxs), body.closes.Load())
	}
}

// rwBody is the body of a 101 Switching Protocols response: it can be
// written to.
type rwBody struct {
	trackedBody
	written strings.Builder
}

func (b *rwBody) Write(p []byte) (int, error) { return b.written.Write(p) }

func TestSwitchingProtocolsBodyStaysWritable(t *testing.T) {
	body := &rwBody{}
	body.Reader = strings.NewReader("")
	base := roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 101, Header: http.Header{}, Body: body}, nil
	})
	tr := newTransport(t, transport.Config{Base: base, AttemptTimeout: time.Hour})
	resp, err := tr.RoundTrip(newRequest(t, http.MethodGet, "http://example.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	w, ok := resp.Body.(io.Writer)
	if !ok {
		t.Fatalf("body %T is not an io.Writer", resp.Body)
	}
	io.WriteString(w, "hello")
	resp.Body.Close()
	if body.written.String() != "hello" || !body.closed.Load() {
		t.Fatal("writes or Close did not reach the connection")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestPanickingBaseCountsAsBreakerFailure(t *testing.T) {
	b := newBreaker(t, breaker.Consecutive(1))
	tr := newTransport(t, transport.Config{
		Breaker: b,
		Base:    roundTripFunc(func(*http.Request) (*http.Response, error) { panic("boom") }),
	})
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic did not go on")
			}
		}()
		tr.RoundTrip(newRequest(t, http.MethodGet, "http://example.test/", nil))
	}()
	if s := b.State(); s != breaker.Open {
		t.Fatalf("breaker is %v, want open", s)
	}
}

type idleCloser struct {
	roundTripFunc
	closed bool
}

func (c *idleCloser) CloseIdleConnections() { c.closed = true }

func TestCloseIdleConnectionsReachesTheBase(t *testing.T) {
	base := &idleCloser{}
	(&http.Client{Transport: newTransport(t, transport.Config{Base: base})}).CloseIdleConnections()
	if !base.closed {
		t.Fatal("CloseIdleConnections did not reach the base transport")
	}
}
