package pipeline_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/weirhq/weir/extract"
	"github.com/weirhq/weir/pipeline"
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
// not moved away with the first: both versions end as documents, and
// processed/ holds the second.
func TestFileChangedWhileProcessedIsNotLost(t *testing.T) {
	t.Parallel()
	gate := gateExtractor{open: make(chan struct{})}
	h := newHarness(t, func(c *pipeline.Config) { c.Extractor = gate })
	v1, v2 := []byte("The first version is about bees."), []byte("The second version is about sourdough.")
	drop(t, h.dir, "src/a.txt", v1)
	h.start()
	waitFor(t, "the first version to be parsed", waitTimeout, func() (bool, string) {
		return count(t, h.db, `SELECT count(*) FROM weir_documents`) == 1, "not parsed"
	})
	drop(t, h.dir, "src/a.txt", v2) // overwritten while v1 waits for its extraction
	close(gate.open)
	waitFor(t, "both versions saved and indexed", waitTimeout, func() (bool, string) {
		return count(t, h.db, `SELECT count(*) FROM weir_documents WHERE status = 'saved' AND indexed_at > 0`) == 2, "not yet"
	})
	waitFor(t, "the second version in processed/", waitTimeout, func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(h.dir, pipeline.ProcessedDir, "src", "a.txt"))
		return err == nil && string(b) == string(v2), string(b)
	})
	if left := filesUnder(t, filepath.Join(h.dir, pipeline.IncomingDir)); len(left) != 0 {
		t.Fatalf("incoming/ holds %v", left)
	}
	for _, q := range []string{"bees", "sourdough"} {
		if hits, err := h.svc.Search(context.Background(), q, 5); err != nil || len(hits) != 1 {
			t.Fatalf("search %s: %v, %v; want the version about it", q, hits, err)
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
	waitFor(t, "both failures written", waitTimeout, func() (bool, string) {
		return count(t, h.db, `SELECT count(*) FROM weir_failures`) == 2, "not yet"
	})
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
