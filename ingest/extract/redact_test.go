package extract_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/weirhq/weir/ingest/extract"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/retry"
)

const echoedKey = "sk-live-Zq8mWx41TnB7"

// recordingHandler keeps every log record, with all its attributes, as
// text.
type recordingHandler struct {
	mu    *sync.Mutex
	lines *[]string
	attrs []slog.Attr
}

func newRecorder() *recordingHandler {
	return &recordingHandler{mu: new(sync.Mutex), lines: new([]string)}
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value.Resolve().Any())
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value.Resolve().Any())
		return true
	})
	h.mu.Lock()
	*h.lines = append(*h.lines, b.String())
	h.mu.Unlock()
	return nil
}

func (h *recordingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &c
}

func (h *recordingHandler) WithGroup(string) slog.Handler { return h }

func (h *recordingHandler) text() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(*h.lines, "\n")
}

// echoHeaders writes the request's headers into the response body, as some
// gateways do in their error pages, and the bare key as a debugging
// endpoint might.
func echoHeaders(w http.ResponseWriter, r *http.Request, status int) {
	var names []string
	for k := range r.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	w.WriteHeader(status)
	fmt.Fprintf(w, "bad request; you sent:\n")
	for _, k := range names {
		fmt.Fprintf(w, "%s: %s\n", k, strings.Join(r.Header[k], ", "))
	}
	_, key, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	fmt.Fprintf(w, "{\"received_token\":\"%s\"}\n", key)
}

// Regression: an endpoint that echoes the request's Authorization header in
// an error body put the API key in the returned error, and from there in
// logs, job errors, dead letters and failed/*/error.json.
func TestLLMEchoedKeyIsRedacted(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		status    int
		permanent bool
	}{
		{http.StatusBadRequest, true},
		{http.StatusInternalServerError, false},
		{http.StatusUnauthorized, true},
	} {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, func(_ int32, w http.ResponseWriter, r *http.Request) { echoHeaders(w, r, tt.status) })
			rec := newRecorder()
			var events []string
			l := newLLM(t, extract.LLMConfig{
				URL:    srv.URL,
				APIKey: echoedKey,
				Retry: retry.Config{MaxAttempts: 2, Backoff: backoff.Constant(0),
					OnRetry: func(ev retry.Event) { events = append(events, ev.Err.Error()) }},
				Logger: slog.New(rec),
			})
			_, err := l.Extract(context.Background(), extract.Input{Text: english})
			if err == nil {
				t.Fatal("no error")
			}
			se, ok := errors.AsType[*extract.StatusError](err)
			if !ok || se.StatusCode != tt.status || retry.IsPermanent(err) != tt.permanent {
				t.Fatalf("err = %v, want a StatusError %d, permanent %v", err, tt.status, tt.permanent)
			}
			for what, s := range map[string]string{"error": err.Error(), "StatusError": se.Error(), "logs": rec.text(), "retry events": strings.Join(events, "\n")} {
				if strings.Contains(s, echoedKey) || strings.Contains(s, "Zq8mWx41") {
					t.Errorf("the key is in the %s: %s", what, s)
				}
			}
			if !strings.Contains(se.Body, "bad request; you sent") || !strings.Contains(se.Body, "[REDACTED]") {
				t.Errorf("Body %q lost what the server said, or shows no mask", se.Body)
			}
		})
	}
}

// An error body cut in the middle of the key shows none of it.
func TestLLMKeyAtTheCutOfTheBodyIsRedacted(t *testing.T) {
	t.Parallel()
	for pad := 490; pad <= 512; pad++ {
		srv := newServer(t, func(_ int32, w http.ResponseWriter, _ *http.Request) {
			http.Error(w, strings.Repeat("x", pad)+" key "+echoedKey+" rejected", http.StatusBadRequest)
		})
		l := newLLM(t, extract.LLMConfig{URL: srv.URL, APIKey: echoedKey})
		_, err := l.Extract(context.Background(), extract.Input{Text: english})
		for n := 4; n <= len(echoedKey); n++ {
			if strings.Contains(err.Error(), echoedKey[:n]) {
				t.Fatalf("pad %d: %d bytes of the key in %q", pad, n, err.Error()[pad:])
			}
		}
	}
}

// keyEchoingTransport fails as a misbehaving proxy might: with an error that
// quotes the request's token.
type keyEchoingTransport struct{}

func (keyEchoingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	_, key, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	return nil, fmt.Errorf("proxy: upstream refused token %s: %w", key, io.ErrUnexpectedEOF)
}

// Regression: a transport error that quotes the key was logged by the
// retries and returned as it was.
func TestLLMTransportErrorKeyIsRedacted(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	l := newLLM(t, extract.LLMConfig{
		URL:       "http://127.0.0.1:1/v1",
		APIKey:    echoedKey,
		Transport: keyEchoingTransport{},
		Retry:     retry.Config{MaxAttempts: 3, Backoff: backoff.Constant(0)},
		Logger:    slog.New(rec).With("component", "extract"),
	})
	_, err := l.Extract(context.Background(), extract.Input{Text: english})
	if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) || retry.IsPermanent(err) {
		t.Fatalf("err = %v, want a retryable error that still matches io.ErrUnexpectedEOF", err)
	}
	logs := rec.text()
	if !strings.Contains(logs, "retrying") || !strings.Contains(logs, "upstream refused token") {
		t.Fatalf("the retries were not logged with their error: %q", logs)
	}
	for what, s := range map[string]string{"error": err.Error(), "logs": logs} {
		if strings.Contains(s, echoedKey) {
			t.Errorf("the key is in the %s: %s", what, s)
		}
	}
}
