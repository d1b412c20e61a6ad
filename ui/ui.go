package ui

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var static embed.FS

// Prefix is the path the UI is served under.
const Prefix = "/ui/"

// contentTypes are the types of the embedded files, by extension; a file
// of another extension is not served.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
}

// csp allows the page its own origin only: scripts, styles, fetches and
// images (data: for none but the browser's own use).
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// file is an embedded file ready to serve.
type file struct {
	body        []byte
	contentType string
	etag        string
}

// Files returns the embedded files, rooted at the UI's top (index.html,
// assets/...). Tests read it.
func Files() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // "static" is embedded above: cannot fail
	}
	return sub
}

// handler serves the embedded files.
type handler struct {
	files map[string]file // by path under Prefix: "" for index.html
}

// New returns the UI's handler, for the paths under Prefix: /ui/ is
// index.html, /ui/assets/... the assets; any other path is 404.
func New() (http.Handler, error) {
	h := &handler{files: map[string]file{}}
	err := fs.WalkDir(Files(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ct, ok := contentTypes[path.Ext(p)]
		if !ok {
			return fmt.Errorf("ui: embedded file %s has no known content type", p)
		}
		b, err := fs.ReadFile(Files(), p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		key := p
		if p == "index.html" {
			key = ""
		}
		h.files[key] = file{body: b, contentType: ct, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if _, ok := h.files[""]; !ok {
		return nil, fmt.Errorf("ui: no index.html embedded")
	}
	return h, nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if rest == "index.html" {
		rest = ""
	}
	f, found := h.files[rest]
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if !ok || !found {
		http.Error(w, "404 not found: "+r.URL.Path, http.StatusNotFound)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "405 method not allowed: use GET", http.StatusMethodNotAllowed)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", f.contentType)
	hd.Set("Cache-Control", "no-cache")
	hd.Set("ETag", f.etag)
	hd.Set("Content-Security-Policy", csp)
	hd.Set("Referrer-Policy", "no-referrer")
	if match := r.Header.Get("If-None-Match"); match != "" && etagMatch(match, f.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hd.Set("Content-Length", fmt.Sprint(len(f.body)))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(f.body)
}

// etagMatch reports whether an If-None-Match header names etag.
func etagMatch(header, etag string) bool {
	for c := range strings.SplitSeq(header, ",") {
		c = strings.TrimPrefix(strings.TrimSpace(c), "W/")
		if c == "*" || c == etag {
			return true
		}
	}
	return false
}

// Redirect answers "GET /" with a redirect to Prefix.
func Redirect() http.Handler {
	return http.RedirectHandler(Prefix, http.StatusFound)
}
