package cli

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/weirhq/weir/admin"
	"github.com/weirhq/weir/store"
)

// weir jobs limits lists the limits the clients recorded, with the
// attempts running, as a table and as JSON lines.
func TestJobsLimits(t *testing.T) {
	t.Parallel()
	f := sqliteFixture(t)
	code, out, errOut := f.run("jobs", "limits")
	want(t, "jobs limits of a store without any", code, 0, out+errOut, "no limits")
	if _, err := f.ex.SetLimit(context.Background(), time.Now(), store.LimitParams{Key: "llm", Kinds: []string{"summarize", "extract"},
		MaxRunning: 4, Rate: 60, Per: time.Minute}); err != nil {
		t.Fatal(err)
	}
	f.claim("extract") // an hour ago: its start counts in a window long past
	code, out, errOut = f.run("jobs", "limits")
	want(t, "jobs limits", code, 0, out+errOut, "KEY", "llm", "extract,summarize", "1/4", "60 per 1m0s", "0 since ")
	code, out, errOut = f.run("jobs", "limits", "-json")
	want(t, "jobs limits -json", code, 0, out+errOut)
	var l admin.Limit
	if err := json.Unmarshal([]byte(out), &l); err != nil || l.Key != "llm" || l.Running != 1 || l.MaxRunning != 4 || l.PerSeconds != 60 {
		t.Fatalf("jobs limits -json printed %s (%v)", out, err)
	}
	code, out, errOut = f.run("jobs", "limits", "extra")
	want(t, "jobs limits with an argument", code, 2, out+errOut)
}
