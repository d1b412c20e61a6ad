package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/internal/crashpoint"
	"github.com/weirhq/weir/internal/teststore"
)

// childDirEnv names the folder of TestRestartTakesBackAtOnceChild's
// service, in the child process.
const childDirEnv = "PIPELINE_CHILD_DIR"

// childService is the service of the killed child and of its restart: the
// store, the index and the data directory in dir, the worker id left to
// its default.
func childService(t *testing.T, dir string) (*harness, *pipeline.Service) {
	t.Helper()
	h := newHarnessOver(t, dir, openDB(t, "sqlite", dir), func(c *pipeline.Config) { c.ID = "" })
	return h, h.svc
}

// TestRestartTakesBackAtOnceChild is the child of
// TestRestartTakesBackAtOnce: it writes its worker id, then ingests files
// until the crash point kills it after a save, its jobs left running.
func TestRestartTakesBackAtOnceChild(t *testing.T) {
	dir := os.Getenv(childDirEnv)
	if dir == "" {
		t.Skip("the child of TestRestartTakesBackAtOnce")
	}
	teststore.ArmCrashPoint(t)
	h, svc := childService(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "child-id"), []byte(svc.ID()), 0o600); err != nil {
		t.Fatal(err)
	}
	startService(t, svc)
	waitFor(t, "the crash point", time.Minute, func() (bool, string) { return false, "still alive" })
	_ = h
}

// TestRestartTakesBackAtOnce kills a service running with the default
// worker id (SIGKILL, at the crash point after a save, so that it dies
// holding running jobs), and starts another on the same data directory,
// again with the default id: it gets the killed run's id back, and with
// it at once the jobs the killed run held, instead of after their lease
// (a minute). A second service running beside it gets another id.
func TestRestartTakesBackAtOnce(t *testing.T) {
	dir := t.TempDir()
	// The files the child ingests, dropped before it starts.
	files := corpusFiles(t, "notes", 12)
	for _, rel := range files {
		drop(t, filepath.Join(dir, "data"), rel, readCorpus(t, rel))
	}
	teststore.RunKilled(t, "TestRestartTakesBackAtOnceChild", childDirEnv+"="+dir, crashpoint.Env+"="+crashpoint.PipelineAfterSave+":2")
	b, err := os.ReadFile(filepath.Join(dir, "child-id"))
	if err != nil {
		t.Fatal(err)
	}
	childID := string(b)

	h, svc := childService(t, dir)
	if svc.ID() != childID {
		t.Fatalf("the restart's default worker id is %q, the killed run's %q: its jobs wait for their leases", svc.ID(), childID)
	}
	host, _ := os.Hostname()
	if !strings.HasPrefix(childID, host+"-") {
		t.Errorf("default worker id %q does not begin with the hostname %q", childID, host)
	}
	held := count(t, h.db, `SELECT count(*) FROM weir_jobs WHERE state = 'running' AND lease_owner = $1`, childID)
	if held == 0 {
		t.Fatal("the killed run holds no running job: the test proves nothing")
	}
	t.Logf("the killed run %s held %d running jobs", childID, held)

	// A second process on the same directory, running beside the first:
	// another id.
	other, err := pipeline.New(context.Background(), func() pipeline.Config {
		c := h.config()
		c.ID = ""
		return c
	}())
	if err != nil {
		t.Fatal(err)
	}
	defer stopService(t, other)
	if other.ID() == svc.ID() {
		t.Fatalf("two services running at once on one data directory both have the id %q", svc.ID())
	}

	start := time.Now()
	startService(t, svc)
	if n := count(t, h.db, `SELECT count(*) FROM weir_jobs WHERE state = 'running' AND lease_owner = $1 AND attempted_at < $2`,
		childID, start.UnixMicro()); n != 0 {
		t.Fatalf("after Start, %d jobs are still running under the killed run's lease", n)
	}
	waitFor(t, "the files to be ingested", 40*time.Second, func() (bool, string) { return settled(t, h.db, len(files)) })
	if took := time.Since(start); took >= 30*time.Second {
		t.Errorf("the restart took %v to finish the killed run's work: it waited for the lease", took)
	}
	if n := count(t, h.db, `SELECT count(*) FROM ingest_documents WHERE status = 'saved'`); n != len(files) {
		t.Errorf("%d documents saved, want %d", n, len(files))
	}
	if dls := deadLetters(t, h.db); len(dls) != 0 {
		t.Errorf("%d dead letters", len(dls))
	}
	_ = fmt.Sprint
}
