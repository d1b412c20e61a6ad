package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

// weir jobs show prints a running job's progress and a completed job's
// output.
func TestJobsShowProgressAndOutput(t *testing.T) {
	t.Parallel()
	f := sqliteFixture(t)
	ctx := context.Background()
	running := f.claim("parse")
	at := time.Now().Add(-time.Minute)
	if err := f.ex.SetProgress(ctx, at, store.LeaseOf(running), weirtype.Progress{Percent: 62.5, Message: "page 25 of 40"}); err != nil {
		t.Fatal(err)
	}
	done := f.claim("parse")
	if _, err := f.ex.CompleteOutputs(ctx, at, []store.Completion{{Lease: store.LeaseOf(done), Output: json.RawMessage(`{"pages":40}`)}}); err != nil {
		t.Fatal(err)
	}

	code, out, _ := f.run("jobs", "show", id(running.ID))
	want(t, "jobs show of a running job", code, 0, out, `"progress": {`, `"percent": 62.5`, `"message": "page 25 of 40"`, `"attempt": 1`)
	if strings.Contains(out, `"output"`) {
		t.Errorf("a running job shows an output:\n%s", out)
	}
	code, out, _ = f.run("jobs", "show", id(done.ID))
	want(t, "jobs show of a completed job", code, 0, out, `"state": "completed"`, `"output": {`, `"pages": 40`)
	var r jobRecord
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Progress != nil || string(r.Output) == "" {
		t.Errorf("jobs show: %+v, %v", r, err)
	}
}
