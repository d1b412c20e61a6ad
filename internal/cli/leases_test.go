package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/internal/teststore"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/weirtype"
)

func TestLeaseWait(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 21, 14, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return now.Add(d) }
	hhmmss := func(d time.Duration) string { return at(d).Local().Format("15:04:05") }
	job := func(owner string, until time.Duration, state weirtype.State) *weirtype.Job {
		return &weirtype.Job{State: state, LeaseOwner: owner, LeaseExpiresAt: at(until)}
	}
	running := weirtype.StateRunning
	for _, tc := range []struct {
		name string
		jobs []*weirtype.Job
		want string
	}{
		{"none", nil, ""},
		{"only mine", []*weirtype.Job{job("me", time.Minute, running)}, ""},
		{"not running", []*weirtype.Job{job("host-1234", time.Minute, weirtype.StateAvailable)}, ""},
		{"three held by a dead owner", []*weirtype.Job{
			job("host-1234", 5*time.Minute+3*time.Second, running), job("host-1234", 2*time.Minute, running), job("host-1234", time.Minute, running), job("me", time.Hour, running),
		}, "waiting for 3 jobs held by host-1234 until " + hhmmss(5*time.Minute+3*time.Second) + " (lease)"},
		{"one job, two owners", []*weirtype.Job{job("b-host-9", time.Minute, running), job("a-host-1", 30*time.Second, running), job("a-host-1", 40*time.Second, running)},
			"waiting for 2 jobs held by a-host-1 until " + hhmmss(40*time.Second) + " (lease); 1 job held by b-host-9 until " + hhmmss(time.Minute) + " (lease)"},
		{"a lease already ended", []*weirtype.Job{job("host-1234", -10*time.Second, running)},
			"waiting for 1 job held by host-1234, whose lease ended at " + hhmmss(-10*time.Second) + " (back at the next rescue)"},
	} {
		if got := leaseWait(tc.jobs, "me", now); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// weir ingest's progress line, frozen while another worker holds the jobs
// by a lease, says so: the jobs are read from the store.
func TestProgressSaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	f := sqliteFixture(t)
	ctx := context.Background()
	now := time.Now()
	res, err := f.ex.Insert(ctx, now.Add(-time.Minute), []store.InsertParams{
		{Kind: pipeline.KindParse, Queue: "default", MaxAttempts: 3},
		{Kind: pipeline.KindExtract, Queue: "default", MaxAttempts: 3},
		{Kind: "other.kind", Queue: "default", MaxAttempts: 3},
	})
	if err != nil || len(res) != 3 {
		t.Fatal(res, err)
	}
	if _, err := f.ex.Claim(ctx, store.ClaimParams{Now: now.Add(-time.Minute), Queue: "default", Limit: 3, Owner: "host-1234", LeaseFor: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	got, err := heldJobs(ctx, f.ex, "host-9999", now)
	if err != nil {
		t.Fatal(err)
	}
	until := now.Add(-time.Minute).Add(10 * time.Minute).Local().Format("15:04:05")
	want := "waiting for 2 jobs held by host-1234 until " + until + " (lease)"
	if got != want {
		t.Fatalf("heldJobs = %q, want %q", got, want)
	}
	if got, _ := heldJobs(ctx, f.ex, "host-1234", now); got != "" {
		t.Fatalf("the worker's own jobs: %q, want none", got)
	}
	var out bytes.Buffer
	bar := newProgressBar(&out)
	bar.show(1, 3, "files; 1 documents saved, 1 indexed, 0 failed; "+want)
	if line := out.String(); !strings.Contains(line, "1/3 files") || !strings.HasSuffix(line, want+"\n") {
		t.Fatalf("progress line %q does not say what it waits for", line)
	}
}

// weir ingest, whose file's parse job a worker that died holds by a
// lease, waits for that lease, and its progress line says so.
func TestIngestSaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	if code, stdout, stderr := run("migrate", "-data", data); code != 0 {
		t.Fatalf("migrate: %d %s %s", code, stdout, stderr)
	}
	content := "Keeping bees\n\nThe hive swarmed in May."
	docs := writeDocs(t, map[string]string{"bees.txt": content})
	// The parse job of that file, claimed by host-1234 for an hour, as if
	// that worker had died with it.
	st := teststore.SQLite(t, filepath.Join(data, sqliteFileName))
	ctx := context.Background()
	now := time.Now()
	key := pipeline.FileID("home/bees.txt", pipeline.ETag([]byte(content)))
	if _, err := st.Executor().Insert(ctx, now, []store.InsertParams{{Kind: pipeline.KindParse, Queue: "default", MaxAttempts: 3, IdempotencyKey: key, Payload: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Executor().Claim(ctx, store.ClaimParams{Now: now, Queue: "default", Limit: 1, Owner: "host-1234", LeaseFor: time.Hour}); err != nil || len(got) != 1 {
		t.Fatalf("claim: %v, %v", got, err)
	}
	code, stdout, stderr := run("ingest", filepath.Join(docs, "bees.txt"), "-data", data, "-source", "home", "-timeout", "3s")
	until := now.Add(time.Hour).Local().Format("15:04:05")
	want(t, "ingest of a file whose job another worker holds", code, 1, stdout+stderr,
		"0/1 files; 0 documents saved, 0 indexed, 0 failed; waiting for 1 job held by host-1234 until "+until+" (lease)",
		"1 of 1 files not done after 3s")
}
