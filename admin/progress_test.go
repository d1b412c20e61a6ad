package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

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
