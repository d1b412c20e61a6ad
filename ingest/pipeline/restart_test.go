package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/ingest/extract"
	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/internal/crashpoint"
	"github.com/weirhq/weir/internal/teststore"
	"github.com/weirhq/weir/weirtype"
)

// slowExtractor extracts as Local does, taking delay for each document;
// with open set, the calls after the first free wait for open to be
// closed (or their context to end) before they start.
type slowExtractor struct {
	delay time.Duration
	calls atomic.Int32
	free  int32
	open  chan struct{}
}

func (s *slowExtractor) Extract(ctx context.Context, in extract.Input) (extract.Result, error) {
	if n := s.calls.Add(1); s.open != nil && n > s.free {
		select {
		case <-s.open:
		case <-ctx.Done():
			return extract.Result{}, ctx.Err()
		}
	}
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return extract.Result{}, ctx.Err()
	}
	return extract.NewLocal().Extract(ctx, in)
}

// TestRestartMidIngest stops the service while it ingests, then starts a
// new one, with the same worker id, on the same data directory and store:
// every document is saved exactly once and every file is in processed/
// once.
func TestRestartMidIngest(t *testing.T) {
	t.Parallel()
	// The last two documents' extractions wait for the stop, however
	// fast or slow the machine, holding two of the service's three
	// workers; the third saves the others meanwhile. (Without the gate,
	// the saves, which queue behind every extraction, came in a burst at
	// the end, and the stop came after the last of them as often as
	// not.)
	ex := &slowExtractor{delay: 40 * time.Millisecond, free: 28, open: make(chan struct{})}
	slow := func(c *pipeline.Config) { c.Extractor, c.Workers = ex, 3 }
	h := newHarness(t, slow)
	files := corpusFiles(t, "notes", 30)
	for _, rel := range files {
		drop(t, h.dir, rel, readCorpus(t, rel))
	}
	h.start()
	waitFor(t, "some documents to be saved", waitTimeout, func() (bool, string) {
		n := count(t, h.db, `SELECT count(*) FROM ingest_documents WHERE status = 'saved'`)
		return n >= 5, fmt.Sprintf("%d saved", n)
	})
	// A stop lets the running extractions end: the gate opens once the
	// stop has begun, when the service claims no more.
	time.AfterFunc(500*time.Millisecond, func() { close(ex.open) })
	stopService(t, h.svc)
	saved := count(t, h.db, `SELECT count(*) FROM ingest_documents WHERE status = 'saved'`)
	if saved >= len(files) {
		t.Fatalf("every document was saved before the stop (%d): the test did not stop the service mid-ingest", saved)
	}
	t.Logf("stopped with %d of %d documents saved", saved, len(files))

	again := h.newService(slow) // the same ID, data directory, store and index
	startService(t, again)
	waitFor(t, "the rest to be ingested", waitTimeout, func() (bool, string) { return settled(t, h.db, len(files)) })

	ids := docIDs(t, h.db, "")
	if len(ids) != len(files) {
		t.Fatalf("%d documents, want %d", len(ids), len(files))
	}
	if got := docIDs(t, h.db, "saved"); len(got) != len(files) {
		t.Errorf("%d documents saved, want %d", len(got), len(files))
	}
	for _, kind := range []string{pipeline.KindParse, pipeline.KindExtract, pipeline.KindSave, pipeline.KindIndex} {
		js := jobsOf(t, h.db, kind)
		if len(js) != len(files) {
			t.Errorf("%d %s jobs, want one per file", len(js), kind)
		}
		for _, j := range js {
			if j.State != weirtype.StateCompleted {
				t.Errorf("%s job %d is %s", kind, j.ID, j.State)
			}
		}
	}
	if got := filesUnder(t, filepath.Join(h.dir, pipeline.ProcessedDir)); !slices.Equal(got, files) {
		t.Errorf("processed/ holds %d files, want each of the %d once: %v", len(got), len(files), got)
	}
	if got := filesUnder(t, filepath.Join(h.dir, pipeline.IncomingDir)); len(got) != 0 {
		t.Errorf("incoming/ still holds %v", got)
	}
	if n, err := h.ix.Count(context.Background()); err != nil || n != len(files) {
		t.Errorf("index Count = %d, %v; want %d", n, err, len(files))
	}
	if dls := deadLetters(t, h.db); len(dls) != 0 {
		t.Errorf("%d dead letters after the restart", len(dls))
	}
}

// TestStopDuringScan stops the service while its scan of incoming/ runs
// (a scan every millisecond, over a thousand files): Stop must return.
// It once deadlocked: Stop held the service's lock while it waited for
// the scan, which needed that lock for its list of files seen.
func TestStopDuringScan(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	// Files still being written (modified now): every scan walks them and
	// leaves them.
	for i := range 1000 {
		p := filepath.Join(h.dir, pipeline.IncomingDir, "busy", fmt.Sprintf("f%04d.txt", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("still being written"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		svc, err := pipeline.New(context.Background(), func() pipeline.Config {
			c := h.config()
			c.WatchEvery = time.Millisecond
			return c
		}())
		if err != nil {
			t.Fatal(err)
		}
		startService(t, svc)
		stopped := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			stopped <- svc.Stop(ctx)
		}()
		select {
		case err := <-stopped:
			if err != nil {
				t.Fatalf("round %d: Stop: %v", round, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: Stop did not return within 5 s while a scan ran", round)
		}
	}
}

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
