package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// weir run refuses to serve the admin API to the network without a token,
// before it opens anything.
func TestRunRefusesNonLoopbackWithoutToken(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	for _, listen := range []string{"0.0.0.0:8080", ":8080", "[::]:8080", "192.168.1.10:80", "example.com:80"} {
		code, stdout, stderr := run("run", "-data", data, "-listen", listen)
		want(t, "run -listen "+listen, code, 2, stdout+stderr, "is not a loopback address", "-admin-token", "WEIR_ADMIN_TOKEN")
	}
	code, stdout, stderr := run("run", "-data", data, "-listen", "nonsense")
	want(t, "run -listen nonsense", code, 2, stdout+stderr, `-listen "nonsense" is not host:port`)
	// With a token, or on loopback, the check passes: the run goes on to
	// the next check, of -max-attempts.
	for _, args := range [][]string{
		{"-listen", "0.0.0.0:0", "-admin-token", "s3cret-0123456789"},
		{"-listen", "127.0.0.1:0", "-admin-token", "short"},
		{"-listen", "127.0.0.1:0"},
		{"-listen", "localhost:0"},
		{"-listen", "[::1]:0"},
	} {
		code, stdout, stderr := run(append(append([]string{"run", "-data", data}, args...), "-max-attempts", "0")...)
		want(t, "run "+strings.Join(args, " "), code, 2, stdout+stderr, "-max-attempts")
	}
	// Off loopback, a token must be long enough, and without surrounding
	// whitespace.
	for token, rule := range map[string]string{
		"s3cret":                "at least 16 bytes",
		"0123456789abcde":       "at least 16 bytes",
		" 0123456789abcdef":     "whitespace",
		"0123456789abcdef\n":    "whitespace",
		"0123456789abcdef\t   ": "whitespace",
	} {
		code, stdout, stderr := run("run", "-data", data, "-listen", "0.0.0.0:0", "-admin-token", token, "-max-attempts", "0")
		want(t, fmt.Sprintf("run -admin-token %q", token), code, 2, stdout+stderr, "is not a loopback address", "-admin-token", rule)
	}
	// The token may come from WEIR_ADMIN_TOKEN, checked alike.
	t.Setenv("WEIR_ADMIN_TOKEN", "s3cret")
	code, stdout, stderr = run("run", "-data", data, "-listen", "0.0.0.0:0", "-max-attempts", "0")
	want(t, "run with a short WEIR_ADMIN_TOKEN", code, 2, stdout+stderr, "at least 16 bytes")
	t.Setenv("WEIR_ADMIN_TOKEN", "s3cret-0123456789")
	code, stdout, stderr = run("run", "-data", data, "-listen", "0.0.0.0:0", "-max-attempts", "0")
	want(t, "run with WEIR_ADMIN_TOKEN", code, 2, stdout+stderr, "-max-attempts")
}

func TestLoopback(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.8.9.10:1": true, "[::1]:80": true, "localhost:80": true, "LOCALHOST:80": true,
		"0.0.0.0:80": false, ":80": false, "[::]:80": false, "10.0.0.1:80": false, "host:80": false, "127.0.0.1": false, "": false,
	} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// The handler weir run serves: the admin API under /api/admin/ behind the
// token (reindex among it), the read API behind it too, the probes open.
func TestRunHandlerMountsTheAdminAPI(t *testing.T) {
	t.Parallel()
	var f serviceFlags
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	f.declare(fs)
	if err := fs.Parse([]string{"-data", filepath.Join(t.TempDir(), "data"), "-reindex-schedule", "never"}); err != nil {
		t.Fatal(err)
	}
	logger := newLogger(io.Discard, 0)
	svc, err := f.open(context.Background(), openCreate, logger, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.close()
	h, err := runHandler(svc, "s3cret", "", nil, logger)
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

// openTestService opens the service on a data directory of the test's own.
func openTestService(t *testing.T) *service {
	t.Helper()
	var f serviceFlags
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	f.declare(fs)
	if err := fs.Parse([]string{"-data", filepath.Join(t.TempDir(), "data"), "-reindex-schedule", "never"}); err != nil {
		t.Fatal(err)
	}
	svc, err := f.open(context.Background(), openCreate, newLogger(io.Discard, slog.LevelError), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.close)
	return svc
}

// Every endpoint of weir run but the probes refuses a page that reaches it
// through DNS rebinding (a Host that is not loopback) when no token is
// set, and takes a token, admin or read, when one is; the probes answer
// any Host.
func TestRunHandlerGuardsEveryEndpoint(t *testing.T) {
	t.Parallel()
	svc := openTestService(t)
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
		h, err := runHandler(svc, tc.adminTok, tc.readTok, metrics, newLogger(io.Discard, slog.LevelError))
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
