package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/admin"
	"github.com/weirhq/weir/store"
)

// weir jobs pause, paused and resume: a paused queue's jobs are not
// claimed until it is resumed, and bad names are refused with a message
// that says what is wrong.
func TestJobsPauseAndResume(t *testing.T) {
	t.Parallel()
	f := sqliteFixture(t)
	f.insert("extract", "docs", 3)
	claimDocs := func() int {
		got, err := f.ex.Claim(context.Background(), store.ClaimParams{Now: time.Now(), Queue: "docs", Limit: 10, Owner: "w", LeaseFor: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}

	code, out, errOut := f.run("jobs", "pause", "-queue", "docs", "-kind", "extract", "-by", "alice", "-reason", "LLM quota")
	want(t, "jobs pause", code, 0, out+errOut, "paused kind extract of queue docs since ")
	if n := claimDocs(); n != 0 {
		t.Fatalf("claimed %d jobs of a paused kind", n)
	}
	code, out, errOut = f.run("jobs", "paused")
	want(t, "jobs paused", code, 0, out+errOut, "QUEUE", "docs", "extract", "operator", "alice", "LLM quota")
	code, out, _ = f.run("jobs", "paused", "-json")
	var rec admin.Pause
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &rec); code != 0 || err != nil || rec.By != "alice" || rec.Kind != "extract" {
		t.Fatalf("jobs paused -json: exit %d, %+v, %v:\n%s", code, rec, err, out)
	}

	code, _, errOut = f.run("jobs", "pause", "-queue", "docs", "-kind", "extrct")
	want(t, "jobs pause of a mistyped kind", code, 1, errOut, `queue "docs" has no job of kind "extrct"`)
	code, _, errOut = f.run("jobs", "pause", "-kind", "extract")
	want(t, "jobs pause without a queue", code, 2, errOut, "-queue")
	code, _, errOut = f.run("jobs", "resume", "-queue", "docs", "-cause", "whim")
	want(t, "jobs resume of an unknown cause", code, 2, errOut, "want operator, breaker or retry_after")

	code, out, errOut = f.run("jobs", "resume", "-queue", "docs", "-kind", "extract")
	want(t, "jobs resume", code, 0, out+errOut, "resumed kind extract of queue docs (operator pause)")
	if n := claimDocs(); n != 1 {
		t.Fatalf("claimed %d jobs after the resume, want 1", n)
	}
	code, _, errOut = f.run("jobs", "resume", "-queue", "docs", "-kind", "extract")
	want(t, "jobs resume of what is not paused", code, 1, errOut, "kind extract of queue docs is not paused")
	code, out, errOut = f.run("jobs", "paused")
	want(t, "jobs paused with none", code, 0, out+errOut, "no pauses")
}

// weir status says what is paused, by whom and since when, in text and
// in JSON.
func TestStatusShowsPauses(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	docs := writeDocs(t, map[string]string{"bees.txt": "Keeping bees\n\nThe hive swarmed in May."})
	code, stdout, stderr := run("ingest", docs, "-data", data)
	want(t, "ingest", code, 0, stdout+stderr)
	code, stdout, stderr = run("jobs", "pause", "-data", data, "-queue", "default", "-by", "bob", "-reason", "maintenance")
	want(t, "jobs pause", code, 0, stdout+stderr, "paused queue default")
	code, stdout, stderr = run("status", "-data", data)
	want(t, "status", code, 0, stdout+stderr, "paused:       queue default (operator by bob) since ", ": maintenance")
	code, stdout, _ = run("status", "-data", data, "-json")
	want(t, "status -json", code, 0, stdout, `"pauses": [`, `"by": "bob"`, `"documents"`)
}
