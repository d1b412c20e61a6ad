package ui_test

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/weirhq/weir/ui"
	"github.com/weirhq/weir/weirtype"
)

func newHandler(t *testing.T) http.Handler {
	t.Helper()
	h, err := ui.New()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func get(t *testing.T, h http.Handler, method, path string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestServesFilesWithTypesAndCaching(t *testing.T) {
	t.Parallel()
	h := newHandler(t)
	for _, tc := range []struct {
		path, contentType, contains string
	}{
		{"/ui/", "text/html; charset=utf-8", `<script src="assets/app.js" defer></script>`},
		{"/ui/index.html", "text/html; charset=utf-8", "<title>weir console</title>"},
		{"/ui/assets/app.js", "text/javascript; charset=utf-8", "'use strict';"},
		{"/ui/assets/app.css", "text/css; charset=utf-8", ":root"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			rec := get(t, h, http.MethodGet, tc.path, nil)
			if rec.Code != http.StatusOK {
				t.Fatalf("GET %s: %d %s", tc.path, rec.Code, rec.Body)
			}
			hd := rec.Header()
			if got := hd.Get("Content-Type"); got != tc.contentType {
				t.Errorf("Content-Type %q, want %q", got, tc.contentType)
			}
			if got := hd.Get("Cache-Control"); got != "no-cache" {
				t.Errorf("Cache-Control %q, want no-cache", got)
			}
			if got := hd.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options %q, want nosniff", got)
			}
			if csp := hd.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "connect-src 'self'") {
				t.Errorf("Content-Security-Policy %q does not keep scripts and fetches to the page's origin", csp)
			}
			if !strings.Contains(rec.Body.String(), tc.contains) {
				t.Errorf("body does not contain %q", tc.contains)
			}
			etag := hd.Get("ETag")
			if !regexp.MustCompile(`^"[0-9a-f]{24}"$`).MatchString(etag) {
				t.Fatalf("ETag %q, want a quoted digest", etag)
			}
			// Revalidation: the same ETag answers 304 without a body.
			rec = get(t, h, http.MethodGet, tc.path, map[string]string{"If-None-Match": `"other", ` + etag})
			if rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
				t.Errorf("If-None-Match %s: %d with %d bytes, want 304 and none", etag, rec.Code, rec.Body.Len())
			}
			rec = get(t, h, http.MethodGet, tc.path, map[string]string{"If-None-Match": `"stale"`})
			if rec.Code != http.StatusOK {
				t.Errorf("If-None-Match a stale tag: %d, want 200", rec.Code)
			}
			rec = get(t, h, http.MethodHead, tc.path, nil)
			if rec.Code != http.StatusOK || rec.Body.Len() != 0 || rec.Header().Get("Content-Length") == "" {
				t.Errorf("HEAD: %d with %d bytes, Content-Length %q", rec.Code, rec.Body.Len(), rec.Header().Get("Content-Length"))
			}
		})
	}
}

func TestUnknownPathsAre404(t *testing.T) {
	t.Parallel()
	h := newHandler(t)
	for _, p := range []string{"/ui/assets/nope.js", "/ui/assets/", "/ui/assets", "/ui/nope", "/ui/../ui.go", "/ui/static/index.html", "/other"} {
		if rec := get(t, h, http.MethodGet, p, nil); rec.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, rec.Code)
		}
	}
	rec := get(t, h, http.MethodPost, "/ui/", nil)
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /ui/: %d, Allow %q; want 405 with GET, HEAD", rec.Code, rec.Header().Get("Allow"))
	}
}

func TestRedirect(t *testing.T) {
	t.Parallel()
	rec := get(t, ui.Redirect(), http.MethodGet, "/", nil)
	if rec.Code != http.StatusFound || rec.Header().Get("Location") != ui.Prefix {
		t.Fatalf("GET /: %d to %q, want 302 to %s", rec.Code, rec.Header().Get("Location"), ui.Prefix)
	}
}

// TestNoExternalURLs scans every embedded file: the console loads nothing
// from anywhere but its own origin (no CDN, fonts or scripts), and names
// no other site at all.
func TestNoExternalURLs(t *testing.T) {
	t.Parallel()
	n := 0
	err := fs.WalkDir(ui.Files(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		b, err := fs.ReadFile(ui.Files(), p)
		if err != nil {
			return err
		}
		// URL.createObjectURL( and URL.revokeObjectURL( handle a local
		// blob: URL, not a CSS url(: blanked out (same length, so the
		// offsets hold).
		text := strings.NewReplacer("url.createobjecturl(", "url.createobjecturl_", "url.revokeobjecturl(", "url.revokeobjecturl_").Replace(strings.ToLower(string(b)))
		for _, bad := range []string{"http://", "https://", "//cdn", "@import", "url("} {
			if i := strings.Index(text, bad); i >= 0 {
				t.Errorf("%s names %q at byte %d: %q", p, bad, i, excerpt(string(b), i))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 3 {
		t.Fatalf("%d embedded files, want index.html, app.js and app.css at least", n)
	}
}

// TestNoMarkupFromData guards the rule that data goes into the DOM as
// text: the scripts never assign innerHTML, outerHTML or call
// insertAdjacentHTML or document.write.
func TestNoMarkupFromData(t *testing.T) {
	t.Parallel()
	b, err := fs.ReadFile(ui.Files(), "assets/app.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
		if i := strings.Index(string(b), bad); i >= 0 {
			t.Errorf("app.js uses %s: %q", bad, excerpt(string(b), i))
		}
	}
}

func excerpt(s string, i int) string {
	return s[max(0, i-40):min(len(s), i+40)]
}

// weir run's /metrics takes the token when one is set: the console's
// sample of it sends the token, as its calls of the API do.
func TestConsoleSendsTheTokenToMetrics(t *testing.T) {
	t.Parallel()
	js, err := fs.ReadFile(ui.Files(), "assets/app.js")
	if err != nil {
		t.Fatal(err)
	}
	call := regexp.MustCompile(`fetch\('/metrics',\s*\{([^}]*)\}\)`).FindSubmatch(js)
	if call == nil {
		t.Fatal("app.js does not fetch /metrics")
	}
	if !strings.Contains(string(call[1]), "headers") {
		t.Fatalf("app.js fetches /metrics without headers: {%s}", call[1])
	}
	i := strings.Index(string(js), "fetch('/metrics'")
	before := string(js[max(0, i-400):i])
	if !strings.Contains(before, "headers.Authorization = 'Bearer ' + token") {
		t.Fatalf("app.js does not put the token in the headers of its /metrics fetch:\n%s", before)
	}
}

// The console's reason filter offers every abandon reason the stores keep,
// and no other.
func TestConsoleOffersEveryAbandonReason(t *testing.T) {
	js, err := os.ReadFile("static/assets/app.js")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`const REASONS = \[([^\]]*)\];`).FindSubmatch(js)
	if m == nil {
		t.Fatal("app.js declares no REASONS")
	}
	var got []string
	for _, q := range regexp.MustCompile(`'([a-z_]+)'`).FindAllSubmatch(m[1], -1) {
		got = append(got, string(q[1]))
	}
	var want []string
	for _, r := range weirtype.AbandonReasons() {
		want = append(want, string(r))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the console's reasons are %v, want weirtype's %v", got, want)
	}
}
