package ingest

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirhq/weir/ingest/pipeline"
)

// newTestService opens a service on a data directory of the test's own,
// without its periodic reindex, closed at the test's end.
func newTestService(t *testing.T) *Service {
	t.Helper()
	svc, err := New(context.Background(), Config{DataDir: filepath.Join(t.TempDir(), "data"),
		Pipeline: pipeline.Config{ReindexSchedule: pipeline.NoSchedule},
		Logger:   slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	return svc
}

func TestLoopback(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.8.9.10:1": true, "[::1]:80": true, "localhost:80": true, "LOCALHOST:80": true,
		"0.0.0.0:80": false, ":80": false, "[::]:80": false, "10.0.0.1:80": false, "host:80": false, "127.0.0.1": false, "": false,
	} {
		if got := Loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// The handler the service serves (weir run's): the admin API under /api/admin/ behind the
// token (reindex among it), the read API behind it too, the probes open.
func TestHandlerMountsTheAdminAPI(t *testing.T) {
	t.Parallel()
	svc := newTestService(t)
	h, err := newHandler(svc, "s3cret", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path, token string
		code                int
	}{
		{http.MethodGet, "/api/admin/jobs", "", http.StatusUnauthorized},
		{http.MethodPost, "/api/admin/reindex", "", http.StatusUnauthorized},
		{http.MethodGet, "/api/admin/nope", "wrong", http.StatusUnauthorized},
		{http.MethodGet, "/api/admin/jobs", "s3cret", http.StatusOK},
		{http.MethodGet, "/api/admin/outbox", "s3cret", http.StatusOK},
		{http.MethodGet, "/api/admin/breakers", "s3cret", http.StatusOK},
		{http.MethodPost, "/api/admin/reindex", "s3cret", http.StatusAccepted},
		{http.MethodGet, "/api/admin/reindex", "s3cret", http.StatusOK},
		{http.MethodGet, "/api/status", "", http.StatusUnauthorized},
		{http.MethodGet, "/api/status", "s3cret", http.StatusOK},
		{http.MethodGet, "/healthz", "", http.StatusOK},
	} {
		req := httptest.NewRequest(tc.method, tc.path, nil)
		if tc.method == http.MethodPost {
			req.Header.Set("Content-Type", "application/json")
		}
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.code || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s %s (token %q): status %d, %s; want %d, JSON", tc.method, tc.path, tc.token, rec.Code, rec.Body, tc.code)
		}
	}
}

// Every endpoint of the service but the probes refuses a page that reaches it
// through DNS rebinding (a Host that is not loopback) when no token is
// set, and takes a token, admin or read, when one is; the probes answer
// any Host.
func TestHandlerGuardsEveryEndpoint(t *testing.T) {
	t.Parallel()
	svc := newTestService(t)
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "weir_up 1\n") })
	doc := strings.Repeat("ab", 32)
	endpoints := []string{"/api/search?q=bees", "/api/documents/" + doc, "/api/status", "/metrics", "/ui/", "/ui/assets/app.js", "/", "/api/nothing"}
	const adminTok, readTok = "admin-0123456789abcdef", "read-0123456789abcdef"
	serve := func(h http.Handler, path, host, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Host = host
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, tc := range []struct {
		name              string
		adminTok, readTok string
	}{{"no token", "", ""}, {"admin token", adminTok, ""}, {"read token", "", readTok}, {"both", adminTok, readTok}} {
		h, err := newHandler(svc, tc.adminTok, tc.readTok, metrics)
		if err != nil {
			t.Fatal(err)
		}
		tokenless := tc.adminTok == "" && tc.readTok == ""
		for _, path := range endpoints {
			rec := serve(h, path, "evil.example", "")
			switch {
			case tokenless && rec.Code != http.StatusForbidden:
				t.Errorf("%s: GET %s with Host evil.example: %d, want 403: %s", tc.name, path, rec.Code, rec.Body)
			case !tokenless && strings.HasPrefix(path, "/ui/") && rec.Code != http.StatusOK:
				t.Errorf("%s: GET %s (public files once a token guards the data): %d, want 200", tc.name, path, rec.Code)
			case !tokenless && !strings.HasPrefix(path, "/ui/") && path != "/" && rec.Code != http.StatusUnauthorized:
				t.Errorf("%s: GET %s with Host evil.example and no token: %d, want 401: %s", tc.name, path, rec.Code, rec.Body)
			}
			if strings.Contains(rec.Body.String(), "weir_up") || strings.Contains(rec.Body.String(), `"documents"`) {
				t.Errorf("%s: GET %s with Host evil.example answered data: %s", tc.name, path, rec.Body)
			}
			if tokenless {
				if rec := serve(h, path, "127.0.0.1:8080", ""); rec.Code == http.StatusForbidden || rec.Code == http.StatusUnauthorized {
					t.Errorf("%s: GET %s from loopback: %d: %s", tc.name, path, rec.Code, rec.Body)
				}
				continue
			}
			for _, tok := range []string{tc.adminTok, tc.readTok} {
				if tok == "" {
					continue
				}
				if rec := serve(h, path, "evil.example", tok); rec.Code == http.StatusForbidden || rec.Code == http.StatusUnauthorized {
					t.Errorf("%s: GET %s with a token: %d: %s", tc.name, path, rec.Code, rec.Body)
				}
			}
		}
		for _, path := range []string{"/healthz", "/readyz"} {
			if rec := serve(h, path, "evil.example", ""); rec.Code != http.StatusOK {
				t.Errorf("%s: GET %s with Host evil.example: %d, want 200: %s", tc.name, path, rec.Code, rec.Body)
			}
		}
		// The read token opens the read API, not the admin API.
		if tc.readTok != "" {
			if rec := serve(h, "/api/admin/jobs", "127.0.0.1:8080", tc.readTok); tc.adminTok != "" && rec.Code != http.StatusUnauthorized {
				t.Errorf("%s: the read token opened the admin API: %d", tc.name, rec.Code)
			}
		}
	}
}
