package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/ingest/extract"
	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/weirtype"
)

// slowExtractor extracts as Local does, taking delay for each document.
type slowExtractor struct {
	delay time.Duration
	calls atomic.Int32
}

func (s *slowExtractor) Extract(ctx context.Context, in extract.Input) (extract.Result, error) {
	s.calls.Add(1)
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
	ex := &slowExtractor{delay: 40 * time.Millisecond}
	slow := func(c *pipeline.Config) { c.Extractor, c.Workers = ex, 2 }
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
