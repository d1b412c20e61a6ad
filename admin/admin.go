package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/deadletter"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// Prefix is the path under which the handler serves.
const Prefix = "/api/admin/"

// Limits of lists and bulk operations.
const (
	DefaultLimit = 50
	MaxLimit     = 500
	// MaxBulkIDs is the most ids one bulk request may name.
	MaxBulkIDs = 500
	// DefaultMaxBodyBytes bounds a request body: 1 MiB.
	DefaultMaxBodyBytes = 1 << 20
)

// Reindexer is a reconciliation an application runs over what it keeps
// (the ingestion service's repair of its search index from SQL, say),
// which the admin API starts and reports on under /api/admin/reindex and
// the console shows on its Reindex page. The admin package knows nothing
// of what is reconciled: the application passes itself in Config.Reindex.
type Reindexer interface {
	// StartReindex enqueues a run, with trigger (ReindexTriggerAPI from
	// the admin API) as its cause, or finds the one waiting or running.
	StartReindex(ctx context.Context, trigger string) (ReindexStarted, error)
	// ReindexRuns lists the latest runs, newest first, at most limit.
	ReindexRuns(ctx context.Context, limit int) ([]ReindexRun, error)
}

// ReindexTriggerAPI is the trigger the admin API starts a run with.
const ReindexTriggerAPI = "api"

// ReindexStarted is the job a request to reindex enqueued, or found
// waiting or running (Outcome a duplicate one then).
type ReindexStarted struct {
	JobID   int64                  `json:"job_id"`
	Outcome weirtype.InsertOutcome `json:"outcome"`
}

// ReindexRun is a run of a reconciliation and its progress, as the admin
// API answers it.
type ReindexRun struct {
	ID      int64  `json:"id"`
	Trigger string `json:"trigger"`
	// Status is running, done or failed.
	Status     string     `json:"status"`
	StartedAt  time.Time  `json:"started_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// Total is the number of items to check when the run began; Checked
	// how many it has compared. Missing, Stale and Extra count what it
	// found absent, out of date, and present where it should not be;
	// Repaired what it put right.
	Total    int `json:"total"`
	Checked  int `json:"checked"`
	Missing  int `json:"missing"`
	Stale    int `json:"stale"`
	Extra    int `json:"extra"`
	Repaired int `json:"repaired"`
	// LastID is the key of the last item checked: where a run taken up
	// again goes on.
	LastID string `json:"last_id,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Store is what the admin API reads and changes of weir's store: the
// operator's roles (store.Operator: list and retry jobs; store.DeadLetters;
// store.Sweep: stuck work and counts), a job read or cancelled, and, read
// only, the workflows and the outbox's backlog; and the pauses
// (store.Pauses), listed, made and ended; and the limits across processes
// (store.Limits), listed. A store.Executor is one;
// the admin API claims, completes, inserts and publishes nothing.
type Store interface {
	store.Operator
	store.DeadLetters
	store.Sweep
	GetJob(ctx context.Context, id int64) (*weirtype.Job, error)
	Cancel(ctx context.Context, now time.Time, id int64) (*weirtype.Job, error)
	GetWorkflow(ctx context.Context, id string) (*weirtype.Workflow, error)
	ListWorkflows(ctx context.Context, f store.WorkflowFilter) ([]*weirtype.Workflow, error)
	ListWorkflowTransitions(ctx context.Context, id string, afterVersion int64, limit int) ([]*store.WorkflowTransition, error)
	OutboxBacklog(ctx context.Context) (store.OutboxBacklog, error)
	store.Pauses
	ListLimits(ctx context.Context) ([]*weirtype.Limit, error)
}

var _ Store = store.Executor(nil)

// Config configures the handler.
type Config struct {
	// Store is read and written: a store.Executor, or anything with the
	// few methods Store names. Required.
	Store Store
	// Token, when set, is the bearer token every request must carry.
	// Default empty: no authentication (serve on a loopback address
	// only).
	Token string
	// Breakers are shown, opened and closed by name. Default: none. Two
	// with one name are an error.
	Breakers []*breaker.Breaker
	// Reindex serves /api/admin/reindex. Default nil: those paths are 404
	// (and the console's Reindex page says so).
	Reindex Reindexer
	// Clock dates requeues, retries and cancellations, and measures ages.
	// Default the real clock.
	Clock clock.Clock
	// Logger receives the errors of requests that failed on the server's
	// side. Default slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes bounds a request body, in bytes. Default 1 MiB
	// (DefaultMaxBodyBytes); negative is an error.
	MaxBodyBytes int64
}

// New returns the admin API's handler, or an error naming a bad field of
// cfg.
func New(cfg Config) (http.Handler, error) {
	if cfg.Store == nil {
		return nil, errors.New("admin: Config.Store is required")
	}
	if cfg.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("admin: Config.MaxBodyBytes %d is negative", cfg.MaxBodyBytes)
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &handler{ex: cfg.Store, clock: clock.Or(cfg.Clock), log: cfg.Logger, maxBody: cfg.MaxBodyBytes,
		reindex: cfg.Reindex, breakers: map[string]*breaker.Breaker{}}
	for i, b := range cfg.Breakers {
		if b == nil {
			return nil, fmt.Errorf("admin: Config.Breakers[%d] is nil", i)
		}
		if _, dup := h.breakers[b.Name()]; dup {
			return nil, fmt.Errorf("admin: two breakers are named %q", b.Name())
		}
		h.breakers[b.Name()] = b
		h.breakerNames = append(h.breakerNames, b.Name())
	}
	slices.Sort(h.breakerNames)

	mux := http.NewServeMux()
	routes := map[string]http.HandlerFunc{
		"GET /api/admin/jobs":              h.listJobs,
		"GET /api/admin/jobs/{id}":         byID(h, "job", h.ex.GetJob, jobView),
		"POST /api/admin/jobs/{id}/retry":  h.jobOp(opRetry),
		"POST /api/admin/jobs/{id}/cancel": h.jobOp(opCancel),
		"POST /api/admin/jobs/retry":       h.bulkJobOp(opRetry),
		"POST /api/admin/jobs/cancel":      h.bulkJobOp(opCancel),

		"GET /api/admin/dead-letters":          h.listDeadLetters,
		"GET /api/admin/dead-letters/{id}":     byID(h, "dead letter", h.ex.GetDeadLetter, func(dl *weirtype.DeadLetter) any { return deadletter.RecordOf(dl) }),
		"GET /api/admin/dead-letters/export":   h.exportDeadLetters,
		"POST /api/admin/dead-letters/requeue": h.requeueDeadLetters,
		"POST /api/admin/dead-letters/purge":   h.purgeDeadLetters,

		"GET /api/admin/breakers":               h.listBreakers,
		"GET /api/admin/breakers/{name}":        h.getBreaker,
		"POST /api/admin/breakers/{name}/open":  h.breakerOp(true),
		"POST /api/admin/breakers/{name}/close": h.breakerOp(false),

		"GET /api/admin/workflows":            h.listWorkflows,
		"GET /api/admin/workflows/{workflow}": h.getWorkflow,

		"GET /api/admin/pauses":         h.listPauses,
		"GET /api/admin/limits":         h.listLimits,
		"POST /api/admin/pauses":        h.pause,
		"POST /api/admin/pauses/resume": h.resume,

		"GET /api/admin/outbox": h.outbox,
		"GET /api/admin/stuck":  h.stuck,
	}
	if cfg.Reindex != nil {
		routes["POST /api/admin/reindex"] = h.startReindex
		routes["GET /api/admin/reindex"] = h.reindexRuns
	}
	for pattern, fn := range routes {
		mux.Handle(pattern, fn)
	}
	// What no route takes: 405 when the path is served with another
	// method, 404 otherwise. Probing the mux, rather than registering a
	// method-less pattern per path, keeps patterns such as
	// "GET /jobs/{id}" and "POST /jobs/retry" from conflicting.
	const catchAll = Prefix
	mux.HandleFunc(catchAll, func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost} {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, pattern := mux.Handler(probe); pattern != catchAll && pattern != "" && !(strings.HasSuffix(pattern, "/{id}") && !numericLast(r.URL.Path)) {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s: use %s", r.Method, r.URL.Path, strings.Join(allow, ", ")))
			return
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	return guard(cfg.Token, mux), nil
}

// guard wraps the API in its defences, outermost first: without a token,
// a Host that is not loopback is refused (a DNS-rebinding page reaches a
// loopback server under its own name); a cross-origin browser request
// that changes something is refused (CSRF); the token is checked; a POST
// must say its body is JSON, which no form or simple cross-site request
// can.
func guard(token string, next http.Handler) http.Handler {
	h := requireJSON(next)
	if token != "" {
		h = authenticate(h, "weir admin", "missing or wrong admin token: send Authorization: Bearer <token> (WEIR_ADMIN_TOKEN)", token)
	}
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, "cross-origin request refused: the admin API takes unsafe requests from its own origin only")
	}))
	h = cop.Handler(h)
	if token == "" {
		h = loopbackHost(h, "without an admin token the admin API answers only to a loopback host (127.0.0.1, [::1], localhost)")
	}
	return h
}

// Protect guards next, a handler of weir's data beside the admin API (the
// service's read API, its metrics, the console's files), with the admin
// API's defences against other sites. Without tokens (empty ones are
// ignored), a request whose Host is not a loopback IP or localhost gets
// 403: a page that rebinds its own name to 127.0.0.1 (DNS rebinding)
// sends its own name as the Host, and so cannot read what a loopback
// server serves. With tokens, every request must carry one of them as
// "Authorization: Bearer <token>", or gets 401; hint, when set, says in
// that answer where the token is configured. The errors are JSON, as the
// admin API's.
func Protect(next http.Handler, hint string, tokens ...string) http.Handler {
	var set []string
	for _, t := range tokens {
		if t != "" {
			set = append(set, t)
		}
	}
	if len(set) == 0 {
		return loopbackHost(next, "without a token weir answers only to a loopback host (127.0.0.1, [::1], localhost)")
	}
	msg := "missing or wrong token: send Authorization: Bearer <token>"
	if hint != "" {
		msg += " (" + hint + ")"
	}
	return authenticate(next, "weir", msg, set...)
}

// loopbackHost refuses, with 403, a request whose Host is not a loopback
// IP or localhost, with or without a port; why ends the answer.
func loopbackHost(next http.Handler, why string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isLoopbackHost(r.Host) {
			writeError(w, http.StatusForbidden, fmt.Sprintf("host %s refused: %s", clip(r.Host), why))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isLoopbackHost reports whether host, a Host header with or without a
// port, names a loopback IP or localhost.
func isLoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// requireJSON answers 415 to a POST whose Content-Type is not
// application/json, with a body or without.
func requireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			if err := checkJSONType(r); err != nil {
				writeError(w, http.StatusUnsupportedMediaType, err.Error())
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// checkJSONType returns an error unless r's Content-Type is
// application/json (parameters such as charset allowed).
func checkJSONType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return errors.New("no Content-Type: send Content-Type: application/json, with a body or without")
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return fmt.Errorf("content type %s: send application/json", clip(ct))
	}
	return nil
}

// numericLast reports whether the last segment of path is a positive id:
// a path such as /jobs/retry, which "GET /jobs/{id}" matches too, is not
// the path of a job, and GET is not among its methods.
func numericLast(path string) bool {
	_, err := parseID(path[strings.LastIndex(path, "/")+1:])
	return err == nil
}

// authenticate lets through the requests that carry one of tokens as a
// bearer token, and answers the others 401 with msg.
func authenticate(next http.Handler, realm, msg string, tokens ...string) http.Handler {
	want := make([][sha256.Size]byte, len(tokens))
	for i, t := range tokens {
		want[i] = sha256.Sum256([]byte(t))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !tokenOK(r.Header.Get("Authorization"), want) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="`+realm+`"`)
			writeError(w, http.StatusUnauthorized, msg)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// tokenOK reports whether the Authorization header carries a bearer token
// whose SHA-256 digest is one of want. It compares digests in constant
// time, and with every one of want, so that the time taken says nothing
// of how much of a token, or of its length, a guess got right, nor of
// which token it was near.
func tokenOK(header string, want [][sha256.Size]byte) bool {
	scheme, got, found := strings.Cut(header, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
	ok := false
	for _, w := range want {
		if subtle.ConstantTimeCompare(sum[:], w[:]) == 1 {
			ok = true
		}
	}
	return ok
}

type handler struct {
	ex           Store
	clock        clock.Clock
	log          *slog.Logger
	maxBody      int64
	reindex      Reindexer
	breakers     map[string]*breaker.Breaker
	breakerNames []string
}

// badRequest is an error the client made: its message is answered with
// its status.
type badRequest struct {
	status int
	msg    string
}

func (e *badRequest) Error() string { return e.msg }

// bad returns a 400 badRequest.
func bad(format string, args ...any) error {
	return &badRequest{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// fail answers err: a badRequest with its status; a store error by its
// sentinel (ErrInvalid 400, ErrNotFound 404, ErrConflict and ErrFinal
// 409); anything else 500, logged, its text kept from the client.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var br *badRequest
	switch {
	case errors.As(err, &br):
		writeError(w, br.status, br.msg)
	case errors.Is(err, store.ErrInvalid):
		// The store's text may name the driver: it is logged, not answered.
		h.log.Info("admin request refused by the store", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusBadRequest, "invalid parameter")
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrFinal):
		writeError(w, http.StatusConflict, err.Error())
	case ClientGone(r, err):
		h.log.Debug("admin request ended by the client", "method", r.Method, "path", r.URL.Path, "err", err)
	default:
		h.log.Error("admin request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, "internal error")
	}
}

// ClientGone reports whether err, met while serving r, is the client's
// going away rather than a failure of the server's: r's context was
// cancelled (the client disconnected, or the server is shutting down),
// or writing the answer found the connection broken or reset.
func ClientGone(r *http.Request, err error) bool {
	return errors.Is(err, context.Canceled) || r.Context().Err() != nil ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// now is the handler's clock's time.
func (h *handler) now() time.Time { return h.clock.Now() }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // payloads read as sent; the type is JSON, never HTML
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
