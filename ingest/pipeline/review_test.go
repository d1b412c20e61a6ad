package pipeline_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/weirhq/weir/ingest/extract"
	"github.com/weirhq/weir/ingest/pipeline"
)

// gateExtractor holds every extraction until open is closed.
type gateExtractor struct{ open chan struct{} }

func (g gateExtractor) Extract(ctx context.Context, in extract.Input) (extract.Result, error) {
	select {
	case <-g.open:
	case <-ctx.Done():
		return extract.Result{}, ctx.Err()
	}
	return extract.NewLocal().Extract(ctx, in)
}

// A file overwritten in incoming/ while its first version is processed is
// not moved away with the first, and its second version replaces the
// first: one document, holding the second, which processed/ holds too;
// the first version is no longer searchable.
func TestFileChangedWhileProcessedIsNotLost(t *testing.T) {
	t.Parallel()
	gate := gateExtractor{open: make(chan struct{})}
	h := newHarness(t, func(c *pipeline.Config) { c.Extractor = gate })
	v1, v2 := []byte("The first version is about bees."), []byte("The second version is about sourdough.")
	drop(t, h.dir, "src/a.txt", v1)
	h.start()
	waitFor(t, "the first version to be parsed", waitTimeout, func() (bool, string) {
		return count(t, h.db, `SELECT count(*) FROM ingest_documents`) == 1, "not parsed"
	})
	drop(t, h.dir, "src/a.txt", v2) // overwritten while v1 waits for its extraction
	waitFor(t, "the second version to be parsed", waitTimeout, func() (bool, string) {
		return count(t, h.db, `SELECT count(*) FROM ingest_files`) == 2, "not parsed"
	})
	close(gate.open)
	waitFor(t, "the second version saved and indexed", waitTimeout, func() (bool, string) { return settled(t, h.db, 2) })
	waitFor(t, "the second version in processed/", waitTimeout, func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(h.dir, pipeline.ProcessedDir, "src", "a.txt"))
		return err == nil && string(b) == string(v2), string(b)
	})
	if left := filesUnder(t, filepath.Join(h.dir, pipeline.IncomingDir)); len(left) != 0 {
		t.Fatalf("incoming/ holds %v", left)
	}
	if n := count(t, h.db, `SELECT count(*) FROM ingest_documents`); n != 1 {
		t.Fatalf("%d documents, want 1: the second version replaces the first", n)
	}
	d, err := h.svc.Document(context.Background(), pipeline.DocumentID("src/a.txt", ""))
	if err != nil || d.Status != "saved" || d.Body != string(v2) || d.FileID != pipeline.FileID("src/a.txt", pipeline.ETag(v2)) {
		t.Fatalf("Document = %+v, %v; want the second version, saved", d, err)
	}
	for q, want := range map[string]int{"bees": 0, "sourdough": 1} {
		if hits, err := h.svc.Search(context.Background(), q, 5); err != nil || len(hits) != want {
			t.Fatalf("search %s: %v, %v; want %d hits", q, hits, err, want)
		}
	}
}

// Two files of one name in different folders of one source fail apart:
// each has its own folder in failed/ with its own original.
func TestSameNameFailuresKeepTheirFolders(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	drop(t, h.dir, "src/a/x.txt", []byte("\x00 first"))
	drop(t, h.dir, "src/b/x.txt", []byte("\x00 second"))
	h.start()
	h.waitFailures("both failures written", 0, 2)
	for dir, want := range map[string]string{"a": "\x00 first", "b": "\x00 second"} {
		b, err := os.ReadFile(filepath.Join(h.dir, pipeline.FailedDir, "src", dir, "x.txt", "x.txt"))
		if err != nil || string(b) != want {
			t.Fatalf("failed/src/%s/x.txt/x.txt: %q, %v; want %q", dir, b, err, want)
		}
		if _, err := os.Stat(filepath.Join(h.dir, pipeline.FailedDir, "src", dir, "x.txt", "error.json")); err != nil {
			t.Fatal(err)
		}
	}
}
