package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// An operator pauses a queue's kind through the admin API, sees it listed
// with who and why, and resumes it; the store's claims obey.
func TestPauseAndResumeThroughTheAPI(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "s3cret")
	if _, err := fx.ex.Insert(context.Background(), t0, []store.InsertParams{{Kind: "extract", Queue: "docs"}}); err != nil {
		t.Fatal(err)
	}
	claimed := func() int {
		jobs, err := fx.ex.Claim(context.Background(), store.ClaimParams{Now: t0, Queue: "docs", Limit: 5, Owner: "w", LeaseFor: 60e9})
		if err != nil {
			t.Fatal(err)
		}
		return len(jobs)
	}

	res := fx.do(http.MethodPost, "/api/admin/pauses", `{"queue": "docs", "kind": "extract", "by": "alice", "reason": "LLM quota"}`)
	if res.code != http.StatusOK || res.body["by"] != "alice" || res.body["cause"] != "operator" || res.body["paused_at"] == nil {
		t.Fatalf("pause: %d %s", res.code, res.raw)
	}
	if n := claimed(); n != 0 {
		t.Fatalf("claimed %d jobs of a paused kind", n)
	}
	res = fx.do(http.MethodGet, "/api/admin/pauses", "")
	if ps, _ := res.body["pauses"].([]any); res.code != http.StatusOK || len(ps) != 1 || !strings.Contains(res.raw, `"reason": "LLM quota"`) {
		t.Fatalf("list pauses: %d %s", res.code, res.raw)
	}
	res = fx.do(http.MethodPost, "/api/admin/pauses/resume", `{"queue": "docs", "kind": "extract"}`)
	if ps, _ := res.body["resumed"].([]any); res.code != http.StatusOK || len(ps) != 1 {
		t.Fatalf("resume: %d %s", res.code, res.raw)
	}
	if n := claimed(); n != 1 {
		t.Fatalf("claimed %d jobs after the resume, want 1", n)
	}

	// A pause by no one named is by the admin API.
	res = fx.do(http.MethodPost, "/api/admin/pauses", `{"queue": "docs"}`)
	if res.code != http.StatusOK || res.body["by"] != "admin API" {
		t.Fatalf("pause of a queue: %d %s", res.code, res.raw)
	}
}

// Bad pauses and resumes are refused with a status and a message that say
// what is wrong, under the admin API's rules (token, JSON body).
func TestPauseRefusesBadRequests(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "s3cret")
	for _, c := range []struct {
		name, target, body string
		code               int
		msg                string
	}{
		{"no queue", "/api/admin/pauses", `{"kind": "extract"}`, http.StatusBadRequest, "queue is empty"},
		{"unknown kind", "/api/admin/pauses", `{"queue": "docs", "kind": "typo"}`, http.StatusNotFound, `has no job of kind "typo"`},
		{"unknown queue", "/api/admin/pauses", `{"queue": "dcos"}`, http.StatusNotFound, `queue "dcos" has no job and no pause`},
		{"unknown field", "/api/admin/pauses", `{"queue": "docs", "until": "tomorrow"}`, http.StatusBadRequest, "unknown field"},
		{"reason too long", "/api/admin/pauses", `{"queue": "docs", "reason": "` + strings.Repeat("x", store.MaxPauseReason+1) + `"}`, http.StatusBadRequest, "reason is 1001 bytes long"},
		{"resume of no queue", "/api/admin/pauses/resume", `{}`, http.StatusBadRequest, "queue is empty"},
		{"resume of an unknown cause", "/api/admin/pauses/resume", `{"queue": "docs", "cause": "whim"}`, http.StatusBadRequest, `cause "whim" is unknown`},
		{"resume of what is not paused", "/api/admin/pauses/resume", `{"queue": "docs"}`, http.StatusNotFound, `queue "docs" is not paused`},
	} {
		res := fx.do(http.MethodPost, c.target, c.body)
		if res.code != c.code || !strings.Contains(res.errorMessage(), c.msg) {
			t.Errorf("%s: %d %q, want %d with %q", c.name, res.code, res.errorMessage(), c.code, c.msg)
		}
	}
	if res := fx.doAuth(http.MethodPost, "/api/admin/pauses", `{"queue": "docs"}`, ""); res.code != http.StatusUnauthorized {
		t.Errorf("pause without the token: %d, want 401", res.code)
	}
	req := strings.NewReader(`{"queue": "docs"}`)
	r, _ := http.NewRequest(http.MethodPost, "/api/admin/pauses", req)
	r.Host = "127.0.0.1:8080"
	r.Header.Set("Authorization", "Bearer s3cret")
	r.Header.Set("Content-Type", "text/plain")
	if rec := serve(fx.h, r); rec.Code != http.StatusUnsupportedMediaType {
		t.Errorf("pause with a form's content type: %d, want 415", rec.Code)
	}
	if ps, err := fx.ex.ListPauses(context.Background(), t0); err != nil || len(ps) != 0 {
		t.Errorf("refused requests paused %v (%v)", ps, err)
	}
}

// The limits the clients recorded are listed with their running attempts
// and the rate's window.
func TestLimitsListedThroughTheAPI(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "s3cret")
	ctx := context.Background()
	res := fx.do(http.MethodGet, "/api/admin/limits", "")
	if ls, ok := res.body["limits"].([]any); res.code != http.StatusOK || !ok || len(ls) != 0 {
		t.Fatalf("limits of a store without any: %d %s", res.code, res.raw)
	}
	if _, err := fx.ex.SetLimit(ctx, t0, store.LimitParams{Key: "llm", Kinds: []string{"extract", "summarize"},
		MaxRunning: 4, Rate: 60, Per: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.ex.Insert(ctx, t0, []store.InsertParams{{Kind: "extract", Queue: "docs"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.ex.Claim(ctx, store.ClaimParams{Now: t0, Queue: "docs", Limit: 5, Owner: "w", LeaseFor: time.Minute}); err != nil {
		t.Fatal(err)
	}
	res = fx.do(http.MethodGet, "/api/admin/limits", "")
	for _, want := range []string{`"key": "llm"`, `"max_running": 4`, `"running": 1`, `"rate": 60`, `"per_seconds": 60`,
		`"window_starts": 1`, `"extract"`, `"summarize"`} {
		if res.code != http.StatusOK || !strings.Contains(res.raw, want) {
			t.Fatalf("limits: %d %s; want %s", res.code, res.raw, want)
		}
	}
	if res := fx.do(http.MethodGet, "/api/admin/limits?x=1", ""); res.code != http.StatusBadRequest {
		t.Fatalf("limits with a query: %d %s, want 400", res.code, res.raw)
	}
}

// The job endpoint shows a running job's progress, and a completed job's
// output; a job with neither leaves both out.
func TestJobProgressAndOutput(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "tok")
	ctx := context.Background()
	fx.insert("parse", "p", 2)
	jobs := fx.claim("p", 2)
	running, done := jobs[0], jobs[1]
	if err := fx.ex.SetProgress(ctx, fx.clk.Now(), store.LeaseOf(running), weirtype.Progress{Percent: 25, Message: "page 10 of 40"}); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.ex.CompleteOutputs(ctx, fx.clk.Now(), []store.Completion{{Lease: store.LeaseOf(done), Output: json.RawMessage(`{"pages":40}`)}}); err != nil {
		t.Fatal(err)
	}

	res := fx.ok(http.StatusOK, http.MethodGet, fmt.Sprintf("/api/admin/jobs/%d", running.ID), "")
	p, _ := res.body["progress"].(map[string]any)
	if p["percent"] != 25.0 || p["message"] != "page 10 of 40" || p["attempt"] != 1.0 || p["at"] != "2026-01-21T15:30:00Z" {
		t.Errorf("progress of the running job: %v", res.body["progress"])
	}
	if _, ok := res.body["output"]; ok {
		t.Errorf("a running job has an output: %v", res.body["output"])
	}
	res = fx.ok(http.StatusOK, http.MethodGet, fmt.Sprintf("/api/admin/jobs/%d", done.ID), "")
	out, _ := res.body["output"].(map[string]any)
	if res.body["state"] != "completed" || out["pages"] != 40.0 {
		t.Errorf("completed job: state %v, output %v; want its output", res.body["state"], res.body["output"])
	}
	if _, ok := res.body["progress"]; ok {
		t.Errorf("a job without progress shows one: %v", res.body["progress"])
	}
}
