package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/ingest/api"
	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/ingest/search"
	"github.com/weirhq/weir/weirtype"
)

// fakeService answers from its fields and records the arguments it was
// called with. A nil func answers with a zero value.
type fakeService struct {
	search   func(query string, limit int) ([]search.Hit, error)
	document func(id string) (pipeline.Document, error)
	status   func(stuckAfter time.Duration) (pipeline.Status, error)
	ready    func(ctx context.Context) error

	quiet bool // record no calls (for the fuzz test, which makes millions)
	mu    sync.Mutex
	calls []string // "Search q=… limit=…", "Document id", …
}

var _ api.Service = (*fakeService)(nil)

func (f *fakeService) record(call string) {
	if f.quiet {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *fakeService) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeService) Search(_ context.Context, query string, limit int) ([]search.Hit, error) {
	f.record("Search q=" + query + " limit=" + strconv.Itoa(limit))
	if f.search == nil {
		return nil, nil
	}
	return f.search(query, limit)
}

func (f *fakeService) Document(_ context.Context, id string) (pipeline.Document, error) {
	f.record("Document " + id)
	if f.document == nil {
		return pipeline.Document{}, pipeline.ErrNotFound
	}
	return f.document(id)
}

func (f *fakeService) Status(_ context.Context, stuckAfter time.Duration) (pipeline.Status, error) {
	f.record("Status " + stuckAfter.String())
	if f.status == nil {
		return pipeline.Status{}, nil
	}
	return f.status(stuckAfter)
}

func (f *fakeService) Ready(ctx context.Context) error {
	f.record("Ready")
	if f.ready == nil {
		return nil
	}
	return f.ready(ctx)
}

// newAPI returns the handler over svc, and the buffer its log goes to.
func newAPI(t testing.TB, svc api.Service, metrics http.Handler) (http.Handler, *bytes.Buffer) {
	t.Helper()
	logs := &bytes.Buffer{}
	h, err := api.New(api.Config{Service: svc, Metrics: metrics, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return h, logs
}

// response is an answer of the API, its body decoded.
type response struct {
	code   int
	header http.Header
	raw    string
	body   map[string]any
}

// do serves one request and checks what every answer of the API must be:
// JSON, with an "error" field exactly when the status is 4xx or 5xx.
func do(t testing.TB, h http.Handler, method, target string, body io.Reader) response {
	t.Helper()
	req := httptest.NewRequest(method, target, body)
	req.Host = "127.0.0.1:8080" // as from a client on the server's machine
	return serve(t, h, req)
}

// serve serves req and checks the answer as do does.
func serve(t testing.TB, h http.Handler, req *http.Request) response {
	t.Helper()
	method, target := req.Method, req.URL.String()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	res := response{code: rec.Code, header: rec.Header(), raw: rec.Body.String()}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type %q, want application/json; body %s", method, target, ct, res.raw)
	}
	if method == http.MethodHead {
		return res
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &res.body); err != nil {
		t.Fatalf("%s %s: body is not a JSON object: %v\n%s", method, target, err, res.raw)
	}
	msg, hasErr := res.body["error"].(string)
	if isErr := rec.Code >= 400; isErr != hasErr || (isErr && msg == "") {
		t.Fatalf("%s %s: status %d with body %s: want an \"error\" message exactly for a 4xx or 5xx", method, target, rec.Code, res.raw)
	}
	return res
}

func (r response) errorMessage() string {
	s, _ := r.body["error"].(string)
	return s
}

var (
	updated = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	docID   = strings.Repeat("ab", 32)
	hits    = []search.Hit{
		{ID: docID, Title: "Rivers", Source: "corpus", Summary: "On rivers.", Snippet: "the «river» bends", Score: 2.5, UpdatedAt: updated},
		{ID: strings.Repeat("cd", 32), Title: "Weirs", Source: "corpus", Score: 1.25, UpdatedAt: updated},
	}
)

func TestNewRequiresService(t *testing.T) {
	t.Parallel()
	if _, err := api.New(api.Config{}); err == nil {
		t.Fatal("New without a Service: no error")
	}
}

func TestSearch(t *testing.T) {
	t.Parallel()
	svc := &fakeService{search: func(string, int) ([]search.Hit, error) { return hits, nil }}
	h, _ := newAPI(t, svc, nil)

	res := do(t, h, http.MethodGet, "/api/search?q=river+bend", nil)
	if res.code != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", res.code, res.raw)
	}
	if got := res.body["query"]; got != "river bend" {
		t.Errorf("query %v, want %q", got, "river bend")
	}
	got, _ := res.body["hits"].([]any)
	if len(got) != len(hits) {
		t.Fatalf("hits %v, want %d of them", res.body["hits"], len(hits))
	}
	first, _ := got[0].(map[string]any)
	want := map[string]any{
		"id": docID, "title": "Rivers", "source": "corpus", "summary": "On rivers.",
		"snippet": "the «river» bends", "score": 2.5, "updated_at": "2024-05-06T07:08:09Z",
	}
	for k, v := range want {
		if first[k] != v {
			t.Errorf("first hit %s = %v, want %v", k, first[k], v)
		}
	}
	if len(first) != len(want) {
		t.Errorf("first hit has fields %v, want exactly %v", first, want)
	}
	if second, _ := got[1].(map[string]any); second["id"] != hits[1].ID {
		t.Errorf("second hit %v, want id %s (order kept)", second, hits[1].ID)
	}
	if calls := svc.Calls(); len(calls) != 1 || calls[0] != "Search q=river bend limit=20" {
		t.Errorf("service calls %q, want one Search with the default limit 20", calls)
	}
}

func TestSearchLimit(t *testing.T) {
	t.Parallel()
	for _, limit := range []int{1, 7, api.MaxSearchLimit} {
		svc := &fakeService{}
		h, _ := newAPI(t, svc, nil)
		res := do(t, h, http.MethodGet, "/api/search?q=x&limit="+strconv.Itoa(limit), nil)
		if res.code != http.StatusOK {
			t.Errorf("limit=%d: status %d, want 200: %s", limit, res.code, res.raw)
			continue
		}
		if want := "Search q=x limit=" + strconv.Itoa(limit); len(svc.Calls()) != 1 || svc.Calls()[0] != want {
			t.Errorf("limit=%d: service calls %q, want %q", limit, svc.Calls(), want)
		}
	}
}

func TestSearchNoHitsIsEmptyList(t *testing.T) {
	t.Parallel()
	h, _ := newAPI(t, &fakeService{}, nil) // Search returns nil hits
	res := do(t, h, http.MethodGet, "/api/search?q=nothing", nil)
	if res.code != http.StatusOK || !strings.Contains(res.raw, `"hits": []`) {
		t.Errorf("status %d, body %s: want 200 with \"hits\": [] (not null)", res.code, res.raw)
	}
}

func TestSearchBadRequest(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 1001)
	for _, tc := range []struct {
		name, query string
		want        string // in the error message
	}{
		{"no q", "", "missing query"},
		{"empty q", "q=", "missing query"},
		{"q of another name", "query=river", "missing query"},
		{"limit not a number", "q=x&limit=ten", `limit "ten"`},
		{"limit fraction", "q=x&limit=1.5", `limit "1.5"`},
		{"limit zero", "q=x&limit=0", `limit "0"`},
		{"limit negative", "q=x&limit=-3", `limit "-3"`},
		{"limit over max", "q=x&limit=" + strconv.Itoa(api.MaxSearchLimit+1), `limit "101"`},
		{"limit overflow", "q=x&limit=99999999999999999999", "want a whole number from 1 to 100"},
		{"query too long", "q=" + long, "query too long: 1001 bytes, at most 1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc := &fakeService{}
			h, _ := newAPI(t, svc, nil)
			res := do(t, h, http.MethodGet, "/api/search?"+tc.query, nil)
			if res.code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", res.code, res.raw)
			}
			if !strings.Contains(res.errorMessage(), tc.want) {
				t.Errorf("error %q, want it to name the problem (%q)", res.errorMessage(), tc.want)
			}
			if calls := svc.Calls(); len(calls) != 0 {
				t.Errorf("service called %q for a bad request", calls)
			}
		})
	}
}

func TestSearchLongestQueryAccepted(t *testing.T) {
	t.Parallel()
	h, _ := newAPI(t, &fakeService{}, nil)
	if res := do(t, h, http.MethodGet, "/api/search?q="+strings.Repeat("a", 1000), nil); res.code != http.StatusOK {
		t.Errorf("query of 1000 bytes: status %d, want 200: %s", res.code, res.raw)
	}
}

func TestSearchInvalidFromServiceIs400(t *testing.T) {
	t.Parallel()
	qerr := &search.QueryError{Query: "  ", Reason: "it holds no words"}
	svc := &fakeService{search: func(string, int) ([]search.Hit, error) {
		return nil, errors.Join(errors.New("context"), qerr)
	}}
	h, logs := newAPI(t, svc, nil)
	res := do(t, h, http.MethodGet, "/api/search?q=+++", nil)
	if res.code != http.StatusBadRequest {
		t.Fatalf("status %d, want 400: %s", res.code, res.raw)
	}
	if !strings.Contains(res.errorMessage(), "it holds no words") {
		t.Errorf("error %q, want the service's message", res.errorMessage())
	}
	if logs.String() != "" {
		t.Errorf("a client's mistake was logged as a failure: %s", logs)
	}
}

func TestServiceErrorIs500AndLogged(t *testing.T) {
	t.Parallel()
	secret := errors.New("sql: connection to /var/lib/weir/weir.db refused")
	svc := &fakeService{
		search:   func(string, int) ([]search.Hit, error) { return nil, secret },
		document: func(string) (pipeline.Document, error) { return pipeline.Document{}, secret },
		status:   func(time.Duration) (pipeline.Status, error) { return pipeline.Status{}, secret },
	}
	for _, tc := range []struct{ method, target string }{
		{http.MethodGet, "/api/search?q=x"},
		{http.MethodGet, "/api/documents/" + docID},
		{http.MethodGet, "/api/status"},
	} {
		t.Run(tc.method+" "+tc.target, func(t *testing.T) {
			t.Parallel()
			h, logs := newAPI(t, svc, nil)
			res := do(t, h, tc.method, tc.target, nil)
			if res.code != http.StatusInternalServerError {
				t.Fatalf("status %d, want 500: %s", res.code, res.raw)
			}
			if res.errorMessage() != "internal error" || strings.Contains(res.raw, "weir.db") {
				t.Errorf("error %q: want \"internal error\", without the cause", res.errorMessage())
			}
			path := strings.SplitN(tc.target, "?", 2)[0]
			for _, want := range []string{"level=ERROR", "request failed", "method=" + tc.method, "path=" + path, secret.Error()} {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("log %q lacks %q", logs, want)
				}
			}
		})
	}
}

func TestDocument(t *testing.T) {
	t.Parallel()
	doc := pipeline.Document{
		ID: docID, FileID: "f1", Source: "corpus", Path: "rivers.txt", Status: "saved", Title: "Rivers",
		Body: "Rivers bend.", WordCount: 2, KeyTerms: []string{"river"}, CreatedAt: updated, UpdatedAt: updated,
	}
	svc := &fakeService{document: func(id string) (pipeline.Document, error) {
		if id == docID {
			return doc, nil
		}
		return pipeline.Document{}, pipeline.ErrNotFound
	}}
	h, logs := newAPI(t, svc, nil)

	res := do(t, h, http.MethodGet, "/api/documents/"+docID, nil)
	if res.code != http.StatusOK {
		t.Fatalf("found: status %d, want 200: %s", res.code, res.raw)
	}
	for k, v := range map[string]any{
		"id": docID, "file_id": "f1", "source": "corpus", "path": "rivers.txt", "status": "saved",
		"title": "Rivers", "body": "Rivers bend.", "word_count": 2.0, "created_at": "2024-05-06T07:08:09Z",
	} {
		if res.body[k] != v {
			t.Errorf("document %s = %v, want %v", k, res.body[k], v)
		}
	}

	unknown := strings.Repeat("0", 64)
	res = do(t, h, http.MethodGet, "/api/documents/"+unknown, nil)
	if res.code != http.StatusNotFound || !strings.Contains(res.errorMessage(), unknown) {
		t.Errorf("unknown: status %d, error %q: want 404 naming the id", res.code, res.errorMessage())
	}
	if logs.String() != "" {
		t.Errorf("a missing document was logged as a failure: %s", logs)
	}
}

func TestDocumentBadID(t *testing.T) {
	t.Parallel()
	for _, id := range []string{
		"abc",                         // short
		strings.Repeat("a", 65),       // long
		strings.Repeat("AB", 32),      // upper case
		strings.Repeat("g", 64),       // not hex
		strings.Repeat("é", 32),       // 64 bytes, not hex
		url.PathEscape("../../etc/x"), // escaped slashes stay one segment
	} {
		svc := &fakeService{}
		h, _ := newAPI(t, svc, nil)
		res := do(t, h, http.MethodGet, "/api/documents/"+id, nil)
		if res.code != http.StatusBadRequest || !strings.Contains(res.errorMessage(), "64 lower-case hex digits") {
			t.Errorf("id %q: status %d, error %q: want 400 saying what an id is", id, res.code, res.errorMessage())
		}
		if calls := svc.Calls(); len(calls) != 0 {
			t.Errorf("id %q: service called %q", id, calls)
		}
	}
}

func TestStatus(t *testing.T) {
	t.Parallel()
	svc := &fakeService{status: func(time.Duration) (pipeline.Status, error) {
		return pipeline.Status{
			Files:       map[string]int{"done": 3},
			Documents:   map[string]int{"saved": 5},
			Indexed:     5,
			Jobs:        map[string]map[weirtype.State]int{"extract": {weirtype.StateCompleted: 3}},
			DeadLetters: 1,
			Breakers:    map[string]string{"extractor": "closed"},
		}, nil
	}}
	h, _ := newAPI(t, svc, nil)
	res := do(t, h, http.MethodGet, "/api/status", nil)
	if res.code != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", res.code, res.raw)
	}
	var st pipeline.Status
	if err := json.Unmarshal([]byte(res.raw), &st); err != nil {
		t.Fatal(err)
	}
	if st.Files["done"] != 3 || st.Documents["saved"] != 5 || st.Indexed != 5 || st.DeadLetters != 1 ||
		st.Jobs["extract"][weirtype.StateCompleted] != 3 || st.Breakers["extractor"] != "closed" {
		t.Errorf("status %+v", st)
	}
	for _, k := range []string{"files", "documents", "indexed", "index_errors", "jobs", "stuck", "dead_letters"} {
		if _, ok := res.body[k]; !ok {
			t.Errorf("status lacks %q: %s", k, res.raw)
		}
	}
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	svc := &fakeService{ready: func(context.Context) error { return errors.New("down") }}
	h, _ := newAPI(t, svc, nil)
	res := do(t, h, http.MethodGet, "/healthz", nil)
	if res.code != http.StatusOK || res.body["status"] != "ok" {
		t.Errorf("status %d, body %s: want 200 {\"status\": \"ok\"}", res.code, res.raw)
	}
	if calls := svc.Calls(); len(calls) != 0 {
		t.Errorf("liveness asked the service: %q", calls)
	}
}

func TestReadyz(t *testing.T) {
	t.Parallel()
	var deadline bool
	svc := &fakeService{ready: func(ctx context.Context) error {
		_, deadline = ctx.Deadline()
		return nil
	}}
	h, _ := newAPI(t, svc, nil)
	res := do(t, h, http.MethodGet, "/readyz", nil)
	if res.code != http.StatusOK || res.body["status"] != "ready" {
		t.Errorf("ready: status %d, body %s: want 200 {\"status\": \"ready\"}", res.code, res.raw)
	}
	if !deadline {
		t.Error("Ready was asked without a deadline")
	}

	svc = &fakeService{ready: func(context.Context) error { return errors.New("index: not open") }}
	h, _ = newAPI(t, svc, nil)
	res = do(t, h, http.MethodGet, "/readyz", nil)
	if res.code != http.StatusServiceUnavailable || !strings.Contains(res.errorMessage(), "not ready: index: not open") {
		t.Errorf("not ready: status %d, error %q: want 503 with the reason", res.code, res.errorMessage())
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		io.WriteString(w, "weir_up 1\n")
	})
	h, _ := newAPI(t, &fakeService{}, metrics)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Host = "localhost:8080"
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || rec.Body.String() != "weir_up 1\n" {
		t.Errorf("status %d, body %q: want the metrics handler's answer", rec.Code, rec.Body)
	}

	if res := do(t, h, http.MethodPost, "/metrics", nil); res.code != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics: status %d, want 405", res.code)
	}

	h, _ = newAPI(t, &fakeService{}, nil)
	res := do(t, h, http.MethodGet, "/metrics", nil)
	if res.code != http.StatusNotFound {
		t.Errorf("no metrics handler: status %d, want 404: %s", res.code, res.raw)
	}
}

func TestUnknownPathIs404(t *testing.T) {
	t.Parallel()
	h, _ := newAPI(t, &fakeService{}, nil)
	for _, target := range []string{"/", "/api", "/api/searches", "/api/search/", "/api/documents/", "/api/documents/" + docID + "/x", "/nope"} {
		res := do(t, h, http.MethodGet, target, nil)
		if res.code != http.StatusNotFound || !strings.Contains(res.errorMessage(), "no such endpoint") {
			t.Errorf("GET %s: status %d, error %q: want 404 \"no such endpoint\"", target, res.code, res.errorMessage())
		}
	}
	if res := do(t, h, http.MethodDelete, "/nope", nil); res.code != http.StatusNotFound {
		t.Errorf("DELETE /nope: status %d, want 404", res.code)
	}
}

func TestWrongMethodIs405(t *testing.T) {
	t.Parallel()
	h, _ := newAPI(t, &fakeService{}, nil)
	for _, tc := range []struct{ method, target, allow string }{
		{http.MethodDelete, "/api/search?q=x", "GET, HEAD"},
		{http.MethodPost, "/api/search?q=x", "GET, HEAD"},
		{http.MethodDelete, "/api/documents/" + docID, "GET, HEAD"},
		{http.MethodPost, "/api/status", "GET, HEAD"},
		{http.MethodPost, "/healthz", "GET, HEAD"},
		{http.MethodOptions, "/readyz", "GET, HEAD"},
	} {
		res := do(t, h, tc.method, tc.target, nil)
		if res.code != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: status %d, want 405: %s", tc.method, tc.target, res.code, res.raw)
			continue
		}
		if got := res.header.Get("Allow"); got != tc.allow {
			t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.target, got, tc.allow)
		}
		if msg := res.errorMessage(); !strings.Contains(msg, "method "+tc.method+" not allowed") || !strings.Contains(msg, tc.allow) {
			t.Errorf("%s %s: error %q, want it to name the method and the allowed ones", tc.method, tc.target, msg)
		}
	}
}

func TestHeadIsServedAsGet(t *testing.T) {
	t.Parallel()
	h, _ := newAPI(t, &fakeService{}, nil)
	for _, target := range []string{"/healthz", "/readyz", "/api/status", "/api/search?q=x"} {
		if res := do(t, h, http.MethodHead, target, nil); res.code != http.StatusOK {
			t.Errorf("HEAD %s: status %d, want 200", target, res.code)
		}
	}
}

// Through a real server, every answer is JSON with its Content-Type.
func TestOverHTTP(t *testing.T) {
	t.Parallel()
	svc := &fakeService{search: func(string, int) ([]search.Hit, error) { return hits, nil }}
	h, _ := newAPI(t, svc, nil)
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{http.MethodGet, "/api/search?q=river", http.StatusOK},
		{http.MethodGet, "/api/search", http.StatusBadRequest},
		{http.MethodDelete, "/api/search", http.StatusMethodNotAllowed},
		{http.MethodGet, "/nope", http.StatusNotFound},
	} {
		req, err := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.path, err)
		}
		var body map[string]any
		err = json.NewDecoder(res.Body).Decode(&body)
		res.Body.Close()
		if res.StatusCode != tc.code || res.Header.Get("Content-Type") != "application/json" || err != nil {
			t.Errorf("%s %s: status %d, Content-Type %q, decode %v: want %d, JSON", tc.method, tc.path, res.StatusCode, res.Header.Get("Content-Type"), err, tc.code)
		}
	}
}

// FuzzSearchParams: whatever q and limit are, the API answers 200 or 400
// (never 500, never a panic), in JSON, and asks the service only for a
// limit in range and a query within its length limit.
func FuzzSearchParams(f *testing.F) {
	for _, seed := range [][2]string{
		{"river", ""}, {"river", "5"}, {"", "5"}, {"x", "0"}, {"x", "-1"}, {"x", "101"}, {"x", "1e2"},
		{"x", "+7"}, {"x", " 7"}, {"\"unclosed", "100"}, {"*", "1"}, {"\xff\xfe", "2"}, {"a&limit=3", "4"},
		{strings.Repeat("w ", 600), "10"}, {"x", "9223372036854775808"},
	} {
		f.Add(seed[0], seed[1])
	}
	svc := &fakeService{quiet: true, search: func(q string, limit int) ([]search.Hit, error) {
		if _, err := search.ParseQuery(q); err != nil {
			return nil, err // as the real index refuses it: ErrInvalid
		}
		if len(q) > 1000 || limit < 1 || limit > api.MaxSearchLimit {
			return nil, errors.New("the API let through a query it should have refused")
		}
		return hits, nil
	}}
	h, logs := newAPI(f, svc, nil)
	f.Fuzz(func(t *testing.T, q, limit string) {
		v := url.Values{}
		v.Set("q", q)
		if limit != "" {
			v.Set("limit", limit)
		}
		res := do(t, h, http.MethodGet, "/api/search?"+v.Encode(), nil)
		switch res.code {
		case http.StatusOK:
			if got, _ := res.body["hits"].([]any); len(got) != len(hits) {
				t.Fatalf("200 with hits %v", res.body["hits"])
			}
		case http.StatusBadRequest:
		default:
			t.Fatalf("q=%q limit=%q: status %d: %s\nlog: %s", q, limit, res.code, res.raw, logs)
		}
	})
}

// Every path under /api/admin/ goes to Config.Admin, whatever its method;
// without an admin handler they are 404, like any unknown path.
func TestAdminIsMountedUnderItsPrefix(t *testing.T) {
	t.Parallel()
	var got []string
	admin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, `{"error": "teapot"}`)
	})
	h, err := api.New(api.Config{Service: &fakeService{}, Admin: admin})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ method, target string }{
		{http.MethodPost, "/api/admin/reindex"}, {http.MethodGet, "/api/admin/jobs?state=dead"}, {http.MethodDelete, "/api/admin/x"},
	} {
		if res := do(t, h, tc.method, tc.target, nil); res.code != http.StatusTeapot {
			t.Errorf("%s %s: status %d, want the admin handler's", tc.method, tc.target, res.code)
		}
	}
	if want := []string{"POST /api/admin/reindex", "GET /api/admin/jobs", "DELETE /api/admin/x"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("admin handler got %q, want %q", got, want)
	}
	if res := do(t, h, http.MethodGet, "/api/search?q=x", nil); res.code != http.StatusOK {
		t.Errorf("search beside the admin API: status %d", res.code)
	}
	h, _ = newAPI(t, &fakeService{}, nil)
	for _, target := range []string{"/api/admin/reindex", "/api/admin/jobs"} {
		if res := do(t, h, http.MethodPost, target, nil); res.code != http.StatusNotFound {
			t.Errorf("POST %s without an admin handler: status %d, want 404", target, res.code)
		}
	}
}
