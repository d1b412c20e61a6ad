package api_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weirhq/weir/ingest/api"
	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/ingest/search"
)

// guardedAPI is the API with metrics, an admin handler that answers 200,
// and tokens.
func guardedAPI(t *testing.T, tokens ...string) http.Handler {
	t.Helper()
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"weir_up": 1}`)
	})
	admin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"admin": true}`)
	})
	svc := &fakeService{quiet: true, document: func(id string) (pipeline.Document, error) {
		return pipeline.Document{ID: id, Title: "the full text"}, nil
	}}
	h, err := api.New(api.Config{Service: svc, Metrics: metrics, Admin: admin,
		Tokens: tokens, TokenHint: "WEIR_READ_TOKEN", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// readEndpoints are every endpoint of the API but the probes and the
// admin API, with the status each answers when let through.
var readEndpoints = []struct {
	method, target string
	code           int
}{
	{http.MethodGet, "/api/search?q=river", http.StatusOK},
	{http.MethodGet, "/api/documents/" + docID, http.StatusOK},
	{http.MethodGet, "/api/status", http.StatusOK},
	{http.MethodGet, "/metrics", http.StatusOK},
	{http.MethodHead, "/api/status", http.StatusOK},
	{http.MethodPost, "/api/search", http.StatusMethodNotAllowed},
	{http.MethodGet, "/api/nothing", http.StatusNotFound},
	{http.MethodGet, "/", http.StatusNotFound},
}

func request(method, target, host, token string) *http.Request {
	req := httptest.NewRequest(method, target, nil)
	req.Host = host
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req
}

// Without a token, a page that rebinds its name to 127.0.0.1 sends its own
// name as the Host: every endpoint but the probes refuses it, so that no
// document, search or status reaches the page.
func TestReadAPIRefusesAForeignHostWithoutToken(t *testing.T) {
	t.Parallel()
	h := guardedAPI(t)
	for _, host := range []string{"evil.example", "evil.example:8080", "127.0.0.1.evil.example", "10.0.0.1:8080", ""} {
		for _, ep := range readEndpoints {
			res := serve(t, h, request(ep.method, ep.target, host, ""))
			if res.code != http.StatusForbidden {
				t.Errorf("%s %s with Host %q: status %d, want 403: %s", ep.method, ep.target, host, res.code, res.raw)
			}
			if ep.method != http.MethodHead && !strings.Contains(res.errorMessage(), "loopback host") {
				t.Errorf("%s %s with Host %q: error %q does not say why", ep.method, ep.target, host, res.errorMessage())
			}
		}
	}
	for _, host := range []string{"127.0.0.1:8080", "localhost:8080", "[::1]:8080", "127.0.0.1", "LOCALHOST"} {
		for _, ep := range readEndpoints {
			if res := serve(t, h, request(ep.method, ep.target, host, "")); res.code != ep.code {
				t.Errorf("%s %s with Host %q: status %d, want %d: %s", ep.method, ep.target, host, res.code, ep.code, res.raw)
			}
		}
	}
}

// With tokens, the read API answers any Host that carries one of them,
// and 401 to a request without one or with another.
func TestTokensProtectTheReadAPI(t *testing.T) {
	t.Parallel()
	h := guardedAPI(t, "read-token-0123456789", "admin-token-0123456789")
	for _, host := range []string{"evil.example", "127.0.0.1:8080", "weir.internal:8080"} {
		for _, ep := range readEndpoints {
			for _, token := range []string{"", "wrong", "read-token-0123456789x"} {
				res := serve(t, h, request(ep.method, ep.target, host, token))
				if res.code != http.StatusUnauthorized || res.header.Get("WWW-Authenticate") == "" {
					t.Errorf("%s %s, Host %q, token %q: status %d, want 401 with WWW-Authenticate: %s", ep.method, ep.target, host, token, res.code, res.raw)
				}
				if ep.method != http.MethodHead && !strings.Contains(res.errorMessage(), "WEIR_READ_TOKEN") {
					t.Errorf("%s %s: error %q does not say where the token is set", ep.method, ep.target, res.errorMessage())
				}
			}
			for _, token := range []string{"read-token-0123456789", "admin-token-0123456789"} {
				if res := serve(t, h, request(ep.method, ep.target, host, token)); res.code != ep.code {
					t.Errorf("%s %s, Host %q, token %q: status %d, want %d: %s", ep.method, ep.target, host, token, res.code, ep.code, res.raw)
				}
			}
		}
	}
}

// /healthz and /readyz answer any Host, with or without tokens, so that a
// load balancer can probe the service by its address; the admin API is
// left to its own guard.
func TestProbesAnswerAnyHost(t *testing.T) {
	t.Parallel()
	for _, tokens := range [][]string{nil, {"read-token-0123456789"}} {
		h := guardedAPI(t, tokens...)
		for _, host := range []string{"evil.example", "10.1.2.3:8080", "127.0.0.1:8080"} {
			for _, target := range []string{"/healthz", "/readyz", "/api/admin/jobs"} {
				if res := serve(t, h, request(http.MethodGet, target, host, "")); res.code != http.StatusOK {
					t.Errorf("GET %s, Host %q, tokens %v: status %d, want 200: %s", target, host, tokens, res.code, res.raw)
				}
			}
		}
	}
}

// A client that goes away mid-request is no failure of the server's: it
// is logged at debug level, never at error level.
func TestClientGoneIsNotAnError(t *testing.T) {
	t.Parallel()
	svc := &fakeService{search: func(string, int) ([]search.Hit, error) { return nil, context.Canceled }}
	var logs bytes.Buffer
	h, err := api.New(api.Config{Service: svc, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := request(http.MethodGet, "/api/search?q=x", "127.0.0.1:8080", "").WithContext(ctx)
	h.ServeHTTP(httptest.NewRecorder(), req)
	if strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "level=DEBUG") {
		t.Errorf("a request cancelled by its client was logged as: %s", logs.String())
	}
	// A real failure still is an error.
	logs.Reset()
	svc.search = func(string, int) ([]search.Hit, error) { return nil, errors.New("disk on fire") }
	h.ServeHTTP(httptest.NewRecorder(), request(http.MethodGet, "/api/search?q=x", "127.0.0.1:8080", ""))
	if !strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("a failure of the service was logged as: %s", logs.String())
	}
}
