package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
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
	for _, listen := range []string{"0.0.0.0:8080", ":8080", "[::]:8080", "192.168.1.10:80", "example.com:80", "nonsense"} {
		code, stdout, stderr := run("run", "-data", data, "-listen", listen)
		want(t, "run -listen "+listen, code, 2, stdout+stderr, "is not a loopback address", "-admin-token", "WEIR_ADMIN_TOKEN")
	}
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
	code, stdout, stderr := run("run", "-data", data, "-listen", "0.0.0.0:0", "-max-attempts", "0")
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
// token (reindex among it), the rest of the API open.
func TestRunHandlerMountsTheAdminAPI(t *testing.T) {
	t.Parallel()
	var f serviceFlags
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	f.declare(fs)
	if err := fs.Parse([]string{"-data", filepath.Join(t.TempDir(), "data"), "-reindex-schedule", "never"}); err != nil {
		t.Fatal(err)
	}
	logger := newLogger(io.Discard, 0)
	svc, err := f.open(context.Background(), true, logger, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.close()
	h, err := runHandler(svc, "s3cret", nil, logger)
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
		{http.MethodGet, "/api/status", "", http.StatusOK},
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
