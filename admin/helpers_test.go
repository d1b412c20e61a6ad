package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/admin"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/internal/teststore"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// t0 is the fixture's clock at its start.
var t0 = time.Date(2026, 1, 21, 15, 30, 0, 0, time.UTC)

// fakeReindex records the reconciliations started.
type fakeReindex struct {
	mu      sync.Mutex
	started []string
	runs    []admin.ReindexRun
}

func (f *fakeReindex) StartReindex(_ context.Context, trigger string) (admin.ReindexStarted, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = append(f.started, trigger)
	return admin.ReindexStarted{JobID: int64(len(f.started)), Outcome: weirtype.Inserted}, nil
}

func (f *fakeReindex) ReindexRuns(_ context.Context, limit int) ([]admin.ReindexRun, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs[:min(limit, len(f.runs))], nil
}

// fixture is the admin API over a real SQLite store, filled through the
// store's API.
type fixture struct {
	t        testing.TB
	ex       store.Executor
	h        http.Handler
	clk      *clock.Fake
	logs     *bytes.Buffer
	llm, idx *breaker.Breaker
	reindex  *fakeReindex
	token    string
}

func newFixture(t testing.TB, token string) *fixture {
	t.Helper()
	st := teststore.SQLite(t, filepath.Join(t.TempDir(), "weir.db"))
	fx := &fixture{t: t, ex: st.Executor(), clk: clock.NewFake(t0), logs: &bytes.Buffer{}, reindex: &fakeReindex{}, token: token}
	var err error
	if fx.llm, err = breaker.New(breaker.Config{Name: "llm", Clock: fx.clk}); err != nil {
		t.Fatal(err)
	}
	if fx.idx, err = breaker.New(breaker.Config{Name: "index", Clock: fx.clk}); err != nil {
		t.Fatal(err)
	}
	fx.h, err = admin.New(admin.Config{Store: fx.ex, Token: token, Breakers: []*breaker.Breaker{fx.llm, fx.idx},
		Reindex: fx.reindex, Clock: fx.clk, Logger: slog.New(slog.NewTextHandler(fx.logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return fx
}

// response is an answer, its body decoded when it is JSON.
type response struct {
	code   int
	header http.Header
	raw    string
	body   map[string]any
}

func (r response) errorMessage() string {
	s, _ := r.body["error"].(string)
	return s
}

// do sends a request with the fixture's token, and checks that the answer
// is JSON (but for the export) and that no 500 escaped.
func (fx *fixture) do(method, target, body string) response {
	fx.t.Helper()
	return fx.doAuth(method, target, body, "Bearer "+fx.token)
}

func (fx *fixture) doAuth(method, target, body, auth string) response {
	fx.t.Helper()
	ct := ""
	if body != "" || method == http.MethodPost {
		ct = "application/json"
	}
	req := httptestRequest(method, target, body, ct, auth)
	req.Host = "127.0.0.1:8080"
	rec := serve(fx.h, req)
	res := response{code: rec.Code, header: rec.Header(), raw: rec.Body.String()}
	if ct := rec.Header().Get("Content-Type"); ct == "application/json" {
		if err := json.Unmarshal(rec.Body.Bytes(), &res.body); err != nil {
			fx.t.Fatalf("%s %s: body is not a JSON object: %v\n%s", method, target, err, res.raw)
		}
	} else if !strings.HasPrefix(ct, "application/x-ndjson") {
		fx.t.Fatalf("%s %s: Content-Type %q: %s", method, target, ct, res.raw)
	}
	if res.code >= 500 {
		fx.t.Fatalf("%s %s: status %d: %s\nlog: %s", method, target, res.code, res.raw, fx.logs)
	}
	if res.code >= 400 && res.errorMessage() == "" {
		fx.t.Fatalf("%s %s: status %d without an error message: %s", method, target, res.code, res.raw)
	}
	return res
}

// ok sends a request and fails unless its status is want.
func (fx *fixture) ok(want int, method, target, body string) response {
	fx.t.Helper()
	res := fx.do(method, target, body)
	if res.code != want {
		fx.t.Fatalf("%s %s: status %d, want %d: %s", method, target, res.code, want, res.raw)
	}
	return res
}

// insert inserts jobs of kind in queue, one a second from the clock's
// time, and returns their ids.
func (fx *fixture) insert(kind, queue string, n int) []int64 {
	fx.t.Helper()
	ids := make([]int64, n)
	for i := range n {
		res, err := fx.ex.Insert(context.Background(), fx.clk.Now(), []store.InsertParams{{Kind: kind, Queue: queue, MaxAttempts: 3, Payload: json.RawMessage(`{"n":1}`)}})
		if err != nil {
			fx.t.Fatal(err)
		}
		ids[i] = res[0].Job.ID
	}
	return ids
}

// claim claims up to n jobs of queue.
func (fx *fixture) claim(queue string, n int) []*weirtype.Job {
	fx.t.Helper()
	jobs, err := fx.ex.Claim(context.Background(), store.ClaimParams{Now: fx.clk.Now(), Queue: queue, Limit: n, Owner: "w1", LeaseFor: time.Hour})
	if err != nil {
		fx.t.Fatal(err)
	}
	return jobs
}

// bury makes n dead letters of kind in queue for reason, at the clock's
// time, and returns the dead letters' ids. The queue must hold no other
// job waiting.
func (fx *fixture) bury(kind, queue string, reason weirtype.AbandonReason, n int) []int64 {
	fx.t.Helper()
	ctx := context.Background()
	inserted := fx.insert(kind, queue, n)
	var ids []int64
	for _, j := range fx.claim(queue, n) {
		if !slices.Contains(inserted, j.ID) {
			fx.t.Fatalf("bury in %s claimed job %d, not one of %v", queue, j.ID, inserted)
		}
		if _, err := fx.ex.Fail(ctx, store.FailParams{Now: fx.clk.Now(), Lease: store.LeaseOf(j), Abandon: reason,
			Error: weirtype.AttemptError{Attempt: 1, At: fx.clk.Now(), Message: "boom", Type: "*errors.errorString"}}); err != nil {
			fx.t.Fatal(err)
		}
		dls, err := fx.ex.ListDeadLetters(ctx, store.DeadLetterFilter{})
		if err != nil {
			fx.t.Fatal(err)
		}
		for _, dl := range dls {
			if dl.JobID == j.ID {
				ids = append(ids, dl.ID)
			}
		}
	}
	if len(ids) != n {
		fx.t.Fatalf("buried %d, want %d", len(ids), n)
	}
	return ids
}

// deadLetterIDs lists the ids of the dead letters the store holds.
func (fx *fixture) deadLetterIDs() []int64 {
	fx.t.Helper()
	dls, err := fx.ex.ListDeadLetters(context.Background(), store.DeadLetterFilter{})
	if err != nil {
		fx.t.Fatal(err)
	}
	ids := make([]int64, len(dls))
	for i, dl := range dls {
		ids[i] = dl.ID
	}
	return ids
}

// numbers reads a JSON array of numbers as int64s.
func numbers(v any) []int64 {
	a, _ := v.([]any)
	out := make([]int64, len(a))
	for i, x := range a {
		f, _ := x.(float64)
		out[i] = int64(f)
	}
	return out
}

// field reads key of each object of a JSON array.
func field(v any, key string) []any {
	a, _ := v.([]any)
	out := make([]any, len(a))
	for i, x := range a {
		m, _ := x.(map[string]any)
		out[i] = m[key]
	}
	return out
}

// httptestRequest makes a request with a body of contentType and an
// Authorization header, each left out when empty.
func httptestRequest(method, target, body, contentType, auth string) *http.Request {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, target, rd)
	r.Host = "localhost:8080"
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	return r
}

// pageIDs walks the pages of the list at first (a URL with a query),
// each page's cursor answered under cursor and sent back as the parameter
// param, and returns the ids of the items under key, in order. It fails
// the test past five pages.
func (fx *fixture) pageIDs(first, key, cursor, param string) []int64 {
	fx.t.Helper()
	var seen []int64
	target := first
	for pages := 0; ; pages++ {
		if pages > 5 {
			fx.t.Fatalf("the pages of %s never end", first)
		}
		res := fx.ok(http.StatusOK, http.MethodGet, target, "")
		seen = append(seen, numbers(field(res.body[key], "id"))...)
		next, ok := res.body[cursor].(float64)
		if !ok {
			return seen
		}
		target = fmt.Sprintf("%s&%s=%d", first, param, int64(next))
	}
}

// serve runs r through h.
func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}
