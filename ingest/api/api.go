// Package api is the HTTP interface of weir's ingestion service: search,
// documents, status, health and metrics, as a plain http.Handler, with the
// admin API (package admin) mounted under /api/admin/.
//
//	GET  /api/search?q=QUERY[&limit=N]  hits, best first
//	GET  /api/documents/{id}            a document as SQL keeps it
//	GET  /api/status                    counts by state, breakers, stuck work, dead letters
//	*    /api/admin/...                 the admin API (Config.Admin), reindex included
//	GET  /healthz                       liveness: the process answers
//	GET  /readyz                        readiness: Service.Ready (weir run: the store and index answer, writes succeed)
//	GET  /metrics                       Prometheus metrics
//
// Every endpoint but /healthz and /readyz is guarded against other sites
// (admin.Protect): with Config.Tokens, a request must carry one as a
// bearer token; without, only a request whose Host is a loopback IP or
// localhost is answered (DNS rebinding). The probes answer any Host.
//
// Errors are JSON, {"error": "..."}, with a 4xx status that names the
// problem for a bad request: 400 for a bad parameter, 404 for an unknown
// path or document, 405 (with an Allow header) for a known path asked with
// another method. A failure on the server's side is a 500 whose body says
// only "internal error"; the error itself goes to Config.Logger, so that
// SQL or file system details do not reach clients.
//
// No endpoint of this package reads a request body. The admin API, which
// does, bounds its bodies itself, and authenticates its requests with its
// own token: every path under /api/admin/ is its, so that no operator
// endpoint is served unauthenticated from here.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weirhq/weir/admin"
	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/ingest/search"
)

// Service is what the API serves.
type Service interface {
	Search(ctx context.Context, query string, limit int) ([]search.Hit, error)
	Document(ctx context.Context, id string) (pipeline.Document, error)
	Status(ctx context.Context, stuckAfter time.Duration) (pipeline.Status, error)
	Ready(ctx context.Context) error
}

// Config configures the handler.
type Config struct {
	// Service is served. Required.
	Service Service
	// Metrics serves /metrics. Default: 404 there.
	Metrics http.Handler
	// Admin serves every path under /api/admin/ (admin.New's handler).
	// Default: 404 there.
	Admin http.Handler
	// Logger receives the errors of requests that failed on the server's
	// side. Default slog.Default().
	Logger *slog.Logger
	// Tokens are the bearer tokens that open the read endpoints (search,
	// documents, status, metrics, and the answers to unknown paths): a
	// request to them must carry one ("Authorization: Bearer <token>"), or
	// gets 401. Default none: then they answer only a request whose Host
	// is a loopback IP or localhost, and 403 to any other, so that a page
	// that rebinds its own name to a loopback address cannot read them.
	// /healthz and /readyz are open to any Host without a token, for load
	// balancers and probes; they say nothing but whether the service is
	// up and ready. The admin API (Config.Admin) has its own guard.
	Tokens []string
	// TokenHint ends the answer to a request without a token, saying where
	// the token is configured ("WEIR_READ_TOKEN"). Default none.
	TokenHint string
}

// Limits of a search.
const (
	DefaultSearchLimit = 20
	MaxSearchLimit     = 100
	maxQueryLen        = 1000
)

// New returns the API's handler.
func New(cfg Config) (http.Handler, error) {
	if cfg.Service == nil {
		return nil, errors.New("api: Config.Service is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &handler{svc: cfg.Service, log: cfg.Logger}
	type route struct {
		method, path string
		h            http.Handler
	}
	routes := []route{
		{http.MethodGet, "/api/search", http.HandlerFunc(h.search)},
		{http.MethodGet, "/api/documents/{id}", http.HandlerFunc(h.document)},
		{http.MethodGet, "/api/status", http.HandlerFunc(h.status)},
		{http.MethodGet, "/healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		})},
		{http.MethodGet, "/readyz", http.HandlerFunc(h.ready)},
	}
	if cfg.Metrics != nil {
		routes = append(routes, route{http.MethodGet, "/metrics", cfg.Metrics})
	}
	// Every path but the probes is behind the guard, the answers to other
	// methods and unknown paths included: a page on another site learns
	// nothing from them.
	guarded := func(path string, h http.Handler) http.Handler {
		if path == "/healthz" || path == "/readyz" {
			return h
		}
		return admin.Protect(h, cfg.TokenHint, cfg.Tokens...)
	}
	mux := http.NewServeMux()
	var paths []string
	allowed := map[string][]string{}
	for _, rt := range routes {
		mux.Handle(rt.method+" "+rt.path, guarded(rt.path, rt.h))
		if _, ok := allowed[rt.path]; !ok {
			paths = append(paths, rt.path)
		}
		allowed[rt.path] = append(allowed[rt.path], rt.method)
		if rt.method == http.MethodGet {
			allowed[rt.path] = append(allowed[rt.path], http.MethodHead) // a GET pattern serves HEAD too
		}
	}
	// A pattern without a method for each path answers the other methods.
	// ServeMux would answer them 405 itself, but in plain text, and not at
	// all once "/" is registered: the catch-all below would take them.
	for _, p := range paths {
		methods := allowed[p]
		slices.Sort(methods)
		allow := strings.Join(methods, ", ")
		mux.Handle(p, guarded(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s: use %s", r.Method, r.URL.Path, allow))
		})))
	}
	if cfg.Admin != nil {
		mux.Handle("/api/admin/", cfg.Admin)
	}
	mux.Handle("/", guarded("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path))
	})))
	return mux, nil
}

type handler struct {
	svc Service
	log *slog.Logger
}

func (h *handler) search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query().Get("q")
	switch {
	case q == "":
		writeError(w, http.StatusBadRequest, "missing query: add ?q=words")
		return
	case len(q) > maxQueryLen:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("query too long: %d bytes, at most %d", len(q), maxQueryLen))
		return
	}
	limit := DefaultSearchLimit
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxSearchLimit {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit %q: want a whole number from 1 to %d", v, MaxSearchLimit))
			return
		}
		limit = n
	}
	hits, err := h.svc.Search(r.Context(), q, limit)
	if errors.Is(err, search.ErrInvalid) {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if hits == nil {
		hits = []search.Hit{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"query": q, "hits": hits})
}

func (h *handler) document(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !validID(id) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("document id %q: want 64 lower-case hex digits", id))
		return
	}
	d, err := h.svc.Document(r.Context(), id)
	if errors.Is(err, pipeline.ErrNotFound) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no document %s", id))
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func validID(id string) bool {
	if len(id) != 64 {
		return false
	}
	for _, c := range id {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func (h *handler) status(w http.ResponseWriter, r *http.Request) {
	st, err := h.svc.Status(r.Context(), 0)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (h *handler) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if err := h.svc.Ready(ctx); err != nil {
		writeError(w, http.StatusServiceUnavailable, "not ready: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// fail answers 500 for an error on the server's side, and logs it. The
// answer does not carry the error, which may hold SQL or paths. A request
// whose client went away (its context cancelled, the connection broken)
// is no failure of the server's: it is logged at debug level, and not
// answered.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	if admin.ClientGone(r, err) {
		h.log.Debug("request ended by the client", "method", r.Method, "path", r.URL.Path, "err", err)
		return
	}
	h.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	writeError(w, http.StatusInternalServerError, "internal error")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
