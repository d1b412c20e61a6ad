package admin_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/weirhq/weir/admin"
	"github.com/weirhq/weir/weirtype"
)

// A key given twice in a request body is refused with a 400 that names
// it, by every handler that reads a body: a decoder would take the last
// value silently, so that what a proxy or a log checked (the first ids)
// is not what runs.
func TestDuplicateKeysRefused(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "tok")
	for _, tc := range []struct{ target, body, key string }{
		{"/api/admin/jobs/retry", `{"ids": [1], "ids": [2]}`, `"ids"`},
		{"/api/admin/jobs/cancel", `{"ids": [1], "IDS": [2]}`, `"IDS"`},
		{"/api/admin/dead-letters/requeue", `{"ids": [1], "ids": [1]}`, `"ids"`},
		{"/api/admin/dead-letters/purge", `{"filter": {"kind": "a", "kind": "b"}, "confirm": true}`, `"filter.kind"`},
		{"/api/admin/dead-letters/purge", `{"filter": {"kind": "a"}, "confirm": false, "confirm": true}`, `"confirm"`},
		{"/api/admin/dead-letters/requeue", `{"filter": {"queue": "q"}, "Filter": {"queue": "r"}, "confirm": true}`, `"Filter"`},
	} {
		res := fx.do(http.MethodPost, tc.target, tc.body)
		if res.code != http.StatusBadRequest || !strings.Contains(res.errorMessage(), "key "+tc.key+" given twice") {
			t.Errorf("POST %s %s: status %d, %q; want 400 naming %s", tc.target, tc.body, res.code, res.errorMessage(), tc.key)
		}
	}
	// The same key in two objects, or in the objects of an array, is no
	// duplicate; nor is a key that a string value repeats.
	for _, body := range []string{
		`{"filter": {"kind": "ids"}, "confirm": true}`,
		`{"ids": [1, 2, 3]}`,
	} {
		if res := fx.do(http.MethodPost, "/api/admin/dead-letters/requeue", body); res.code != http.StatusOK {
			t.Errorf("POST requeue %s: status %d, %q; want 200", body, res.code, res.errorMessage())
		}
	}
}

// Protect, the guard of the handlers beside the admin API: without a
// token, only a loopback Host; with tokens, any Host that sends one.
func TestProtect(t *testing.T) {
	t.Parallel()
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "data") })
	for _, tc := range []struct {
		tokens      []string
		host, token string
		code        int
	}{
		{nil, "127.0.0.1:8080", "", http.StatusOK},
		{nil, "localhost", "", http.StatusOK},
		{nil, "[::1]:1", "", http.StatusOK},
		{nil, "evil.example", "", http.StatusForbidden},
		{nil, "evil.example", "anything", http.StatusForbidden},
		{[]string{""}, "evil.example:8080", "", http.StatusForbidden},
		{[]string{"read-0123456789abcdef"}, "evil.example", "", http.StatusUnauthorized},
		{[]string{"read-0123456789abcdef"}, "127.0.0.1:8080", "", http.StatusUnauthorized},
		{[]string{"read-0123456789abcdef"}, "evil.example", "read-0123456789abcdeX", http.StatusUnauthorized},
		{[]string{"read-0123456789abcdef"}, "evil.example", "read-0123456789abcdef", http.StatusOK},
		{[]string{"read-0123456789abcdef", "admin-0123456789abcdef"}, "weir.internal", "admin-0123456789abcdef", http.StatusOK},
	} {
		req := httptest.NewRequest(http.MethodGet, "/api/search?q=x", nil)
		req.Host = tc.host
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		rec := httptest.NewRecorder()
		admin.Protect(inner, "WEIR_READ_TOKEN", tc.tokens...).ServeHTTP(rec, req)
		if rec.Code != tc.code {
			t.Errorf("tokens %q, Host %q, token %q: status %d, want %d: %s", tc.tokens, tc.host, tc.token, rec.Code, tc.code, rec.Body)
		}
		if tc.code != http.StatusOK && rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("tokens %q, Host %q: a refusal that is not JSON: %s", tc.tokens, tc.host, rec.Body)
		}
	}
}

// A client that disconnects mid-request is not logged as an error of the
// server's.
func TestClientGoneIsNotAnError(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "tok")
	logs := &bytes.Buffer{}
	h, err := admin.New(admin.Config{Store: fx.ex, Token: "tok", Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	fx.bury("extract", "default", weirtype.AbandonMaxAttempts, 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, target := range []string{"/api/admin/jobs", "/api/admin/dead-letters", "/api/admin/dead-letters/export"} {
		req := httptest.NewRequest(http.MethodGet, target, nil).WithContext(ctx)
		req.Header.Set("Authorization", "Bearer tok")
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	// An export whose client stops reading: the write fails with a broken
	// pipe.
	req := httptest.NewRequest(http.MethodGet, "/api/admin/dead-letters/export", nil)
	req.Header.Set("Authorization", "Bearer tok")
	h.ServeHTTP(brokenPipe{httptest.NewRecorder()}, req)
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("a client that went away was logged as an error:\n%s", logs)
	}
	if !strings.Contains(logs.String(), "level=DEBUG") {
		t.Errorf("a client that went away was not logged at debug level:\n%s", logs)
	}
}

// brokenPipe is a ResponseWriter whose client is gone.
type brokenPipe struct{ *httptest.ResponseRecorder }

func (brokenPipe) Write([]byte) (int, error) {
	return 0, &netOpError{errors.New("write tcp 127.0.0.1:8080->127.0.0.1:5000"), syscall.EPIPE}
}

type netOpError struct {
	op  error
	err error
}

func (e *netOpError) Error() string { return e.op.Error() + ": " + e.err.Error() }
func (e *netOpError) Unwrap() error { return e.err }
