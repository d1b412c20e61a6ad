package pipeline_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/ingest/extract"
	"github.com/weirhq/weir/ingest/parse"
	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/resilience/backoff"
)

// TestStagesHaveDefaultTimeLimits checks that a zero Config gives every
// stage a time limit, and the file size limit its default.
func TestStagesHaveDefaultTimeLimits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *pipeline.Config) {
		c.Parse, c.Extract, c.Save, c.IndexStage, c.MaxFileSize = pipeline.Stage{}, pipeline.Stage{}, pipeline.Stage{}, pipeline.Stage{}, 0
	})
	c := pipeline.ConfigOf(h.svc)
	for name, got := range map[string]time.Duration{
		"parse": c.Parse.Timeout, "extract": c.Extract.Timeout, "save": c.Save.Timeout, "index": c.IndexStage.Timeout,
	} {
		want := map[string]time.Duration{"parse": pipeline.DefaultParseTimeout, "extract": pipeline.DefaultExtractTimeout,
			"save": pipeline.DefaultSaveTimeout, "index": pipeline.DefaultIndexTimeout}[name]
		if got != want || got <= 0 {
			t.Errorf("the %s stage's time limit is %v, want %v", name, got, want)
		}
	}
	if c.MaxFileSize != pipeline.DefaultMaxFileSize || pipeline.DefaultMaxFileSize != 32<<20 {
		t.Errorf("MaxFileSize = %d, want the default 32 MiB", c.MaxFileSize)
	}
	if _, err := pipeline.New(t.Context(), func() pipeline.Config { c := h.config(); c.MaxFileSize = -1; return c }()); err == nil {
		t.Error("a negative MaxFileSize was accepted")
	}
}

// TestParseOverItsTimeLimitFailsAtOnce parses with a parser that never
// returns (as a parser quadratic in its input would not, in time): the
// parse stage's time limit ends the attempt, and the file fails at once
// as poison, its reason naming the limit, the original in failed/. Before,
// the attempt ran until the parser returned, holding its worker.
func TestParseOverItsTimeLimitFailsAtOnce(t *testing.T) {
	t.Parallel()
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	h := newHarness(t, func(c *pipeline.Config) {
		c.Parse = pipeline.Stage{MaxAttempts: 3, Backoff: backoff.Constant(10 * time.Millisecond), Timeout: 200 * time.Millisecond}
	})
	pipeline.SetParser(h.svc, func(name string, data []byte) ([]parse.Doc, error) {
		if strings.Contains(string(data), "intricate") {
			<-stuck // deaf to the job's context, as a parser is
		}
		return parse.File(name, data)
	})
	content := []byte("An intricate text that takes the parser forever.")
	drop(t, h.dir, "inbox/slow.md", content)
	drop(t, h.dir, "inbox/quick.md", []byte("# Quick\n\nA text the parser reads at once."))
	h.start()
	h.waitFailures("the slow file to fail", 2, 1)
	failedAtParse(t, h, "slow.md", content, "time limit of 200ms")
	if d, err := h.svc.Document(t.Context(), pipeline.DocumentID("inbox/quick.md", "")); err != nil || d.Status != "saved" {
		t.Errorf("the quick file: %q, %v; want it saved", d.Status, err)
	}
}

// failedAtParse checks that the file inbox/name failed in its parse's
// first attempt with an error naming reason, and that failed/ holds its
// original, content, whole.
func failedAtParse(t *testing.T, h *harness, name string, content []byte, reason string) {
	t.Helper()
	dir := filepath.Join(h.dir, pipeline.FailedDir, "inbox", name)
	f := readFailure(t, dir)
	if f.meta.Stage != pipeline.KindParse || f.err.Attempts != 1 || !strings.Contains(f.err.LastError, reason) {
		t.Errorf("%s: error.json = %+v at %s; want the parse stage, one attempt, an error naming %q", name, f.err, f.meta.Stage, reason)
	}
	if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(b, content) {
		t.Errorf("%s: the original is not in failed/ whole: %v", name, err)
	}
}

// deafExtractor never returns for a text holding "deaf", whatever its
// context says.
type deafExtractor struct {
	stuck chan struct{}
	calls atomic.Int32
}

func (d *deafExtractor) Extract(ctx context.Context, in extract.Input) (extract.Result, error) {
	if strings.Contains(in.Text, "deaf") {
		d.calls.Add(1)
		<-d.stuck
	}
	return extract.NewLocal().Extract(ctx, in)
}

// TestExtractOverItsTimeLimitIsRetriedThenFails extracts with an
// extractor deaf to its context: each attempt ends at the extract
// stage's time limit, is retried, and the document fails after its
// attempts. Before, the first attempt never ended.
func TestExtractOverItsTimeLimitIsRetriedThenFails(t *testing.T) {
	t.Parallel()
	ex := &deafExtractor{stuck: make(chan struct{})}
	t.Cleanup(func() { close(ex.stuck) })
	h := newHarness(t, func(c *pipeline.Config) {
		c.Extractor = ex
		c.Extract = pipeline.Stage{MaxAttempts: 2, Backoff: backoff.Constant(10 * time.Millisecond), Timeout: 150 * time.Millisecond}
	})
	drop(t, h.dir, "inbox/deaf.txt", []byte("A text the extractor is deaf to."))
	h.start()
	waitFor(t, "the document to fail", waitTimeout, func() (bool, string) {
		n := count(t, h.db, `SELECT count(*) FROM ingest_failures`)
		return n == 1, fmt.Sprintf("%d failures written, %d calls", n, ex.calls.Load())
	})
	f := readFailure(t, filepath.Join(h.dir, pipeline.FailedDir, "inbox", "deaf.txt"))
	if f.meta.Stage != pipeline.KindExtract || f.err.Attempts != 2 || ex.calls.Load() != 2 {
		t.Errorf("error.json = %+v at %s after %d calls; want the extract stage's 2 attempts", f.err, f.meta.Stage, ex.calls.Load())
	}
	if !strings.Contains(f.err.LastError, "150ms") {
		t.Errorf("the last error %q does not name the time limit", f.err.LastError)
	}
}

// TestFileLargerThanTheLimitIsPoison drops a file larger than
// MaxFileSize: it fails at once, unparsed, its reason naming its size and
// the limit, and moves to failed/ whole. A file at the limit is read.
func TestFileLargerThanTheLimitIsPoison(t *testing.T) {
	t.Parallel()
	var parsed atomic.Int32
	h := newHarness(t, func(c *pipeline.Config) { c.MaxFileSize = 4 << 10 })
	pipeline.SetParser(h.svc, func(name string, data []byte) ([]parse.Doc, error) {
		if len(data) > 4<<10 {
			parsed.Add(1)
		}
		return parse.File(name, data)
	})
	large := bytes.Repeat([]byte("A line of a large text about the reservoir.\n"), 1000) // 44 KiB
	atLimit := bytes.Repeat([]byte("reservoir "), 4<<10/10)
	atLimit = append(atLimit, bytes.Repeat([]byte("."), 4<<10-len(atLimit))...)
	drop(t, h.dir, "inbox/large.txt", large)
	drop(t, h.dir, "inbox/limit.txt", atLimit)
	h.start()
	h.waitFailures("the large file to fail", 2, 1)
	failedAtParse(t, h, "large.txt", large, "43.0 KiB, more than the limit of 4.0 KiB")
	if parsed.Load() != 0 {
		t.Error("the large file was given to the parser")
	}
	if d, err := h.svc.Document(t.Context(), pipeline.DocumentID("inbox/limit.txt", "")); err != nil || d.Status != "saved" {
		t.Errorf("the file at the limit: %q, %v; want it saved", d.Status, err)
	}
}
