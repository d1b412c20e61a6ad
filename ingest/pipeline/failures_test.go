package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/ingest/extract"
	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/ingest/search"
	"github.com/weirhq/weir/ingest/search/fts"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/weirtype"
)

// jobOfDoc returns the job of kind whose payload names the document id,
// or nil.
func jobOfDoc(t *testing.T, h *harness, kind, id string) *weirtype.Job {
	t.Helper()
	for _, j := range jobsOf(t, h.db, kind) {
		var a struct{ Doc string }
		if err := json.Unmarshal(j.Payload, &a); err != nil {
			t.Fatal(err)
		}
		if a.Doc == id {
			return j
		}
	}
	return nil
}

// TestSaveFailsRetriesThenDeadLetters is the failure table's first row:
// the SQL write of a document fails (a trigger refuses it); it is retried
// with backoff, its file waiting in incoming/, then dead-lettered and the
// file written to failed/.
func TestSaveFailsRetriesThenDeadLetters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, func(c *pipeline.Config) {
		c.Save = pipeline.Stage{MaxAttempts: 2, Backoff: backoff.Constant(time.Second), Timeout: 30 * time.Second}
	})
	if _, err := h.db.SQL.ExecContext(ctx, `CREATE TRIGGER fail_save BEFORE UPDATE ON ingest_documents
		WHEN NEW.status = 'saved' AND NEW.path LIKE '%failsave%'
		BEGIN SELECT RAISE(ABORT, 'injected'); END`); err != nil {
		t.Fatal(err)
	}
	bad := readCorpus(t, "notes/chess-doubled-pawns.txt")
	good := readCorpus(t, "notes/chess-the-kings-gambit.txt")
	drop(t, h.dir, "failsave.txt", bad)
	drop(t, h.dir, "ok.txt", good)
	id := pipeline.DocumentID("failsave.txt", "")
	h.start()

	// The first attempt failed: the document waits out the backoff, its
	// file still in incoming/.
	waitFor(t, "the first failed save", waitTimeout, func() (bool, string) {
		j := jobOfDoc(t, h, pipeline.KindSave, id)
		if j == nil {
			return false, "no save job yet"
		}
		return len(j.Errors) >= 1, fmt.Sprintf("save job %s, %d errors", j.State, len(j.Errors))
	})
	incoming := filepath.Join(h.dir, pipeline.IncomingDir, "failsave.txt")
	if j := jobOfDoc(t, h, pipeline.KindSave, id); j.State == weirtype.StateDead {
		t.Fatalf("the save job is dead after its first attempt (%d attempts of %d)", j.Attempt, j.MaxAttempts)
	}
	if !exists(incoming) || exists(filepath.Join(h.dir, pipeline.FailedDir, "default", "failsave.txt")) {
		t.Fatal("during the retries, the file left incoming/")
	}
	if j := jobOfDoc(t, h, pipeline.KindSave, id); j.State == weirtype.StateDead {
		t.Fatal("the save job died within its one-second backoff: the check above proves nothing")
	}

	h.waitFailures("the document to be written to failed/", 2, 1)
	dls := deadLetters(t, h.db)
	if len(dls) != 1 || dls[0].Kind != pipeline.KindSave || dls[0].Attempts != 2 || !strings.Contains(dls[0].LastError, "injected") {
		t.Fatalf("dead letters = %+v, want the save job after 2 attempts, failed by the trigger", dls)
	}
	dir := filepath.Join(h.dir, pipeline.FailedDir, "default", "failsave.txt")
	f := readFailure(t, dir)
	if want := []string{"error.json", "failsave.txt", "metadata.json"}; !slices.Equal(f.files, want) {
		t.Errorf("failed/default/failsave.txt holds %v, want %v", f.files, want)
	}
	if f.err.Attempts != 2 || f.err.EngineJobID != dls[0].JobID || f.err.JobID != pipeline.FileID("failsave.txt", pipeline.ETag(bad)) || !strings.Contains(f.err.LastError, "injected") || f.meta.Stage != pipeline.KindSave || len(f.meta.Errors) != 2 {
		t.Errorf("error.json = %+v, metadata stage %s with %d errors; want the save job's 2 attempts", f.err, f.meta.Stage, len(f.meta.Errors))
	}
	if exists(incoming) {
		t.Error("the dead-lettered file is still in incoming/")
	}
	if d, err := h.svc.Document(ctx, id); err != nil || d.Status != "failed" {
		t.Errorf("document status %q, %v; want failed", d.Status, err)
	}
	if _, err := h.ix.Get(ctx, id); !errors.Is(err, search.ErrNotFound) {
		t.Errorf("the document that was never saved is in the index (%v)", err)
	}
	if got := filesUnder(t, filepath.Join(h.dir, pipeline.ProcessedDir)); !slices.Equal(got, []string{"ok.txt"}) {
		t.Errorf("processed/ holds %v, want the good file", got)
	}
}

// TestMoveFailsSweepMovesLater is the failure table's second row: the
// move to processed/ fails (a file stands where its folder must be); the
// document is saved and indexed all the same, the file waits in
// incoming/, and once the blocker is gone the sweep moves it.
func TestMoveFailsSweepMovesLater(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, func(c *pipeline.Config) { c.SweepEvery = time.Hour })
	blocker := filepath.Join(h.dir, pipeline.ProcessedDir, "blocked")
	if err := os.MkdirAll(filepath.Dir(blocker), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(blocker, []byte("not a folder"), 0o644); err != nil {
		t.Fatal(err)
	}
	content := readCorpus(t, "notes/chess-doubled-pawns.txt")
	const rel = "blocked/pawns.txt"
	drop(t, h.dir, rel, content)
	id := pipeline.DocumentID(rel, "")
	h.start()
	waitFor(t, "the document to be saved and indexed", waitTimeout, func() (bool, string) {
		n := count(t, h.db, `SELECT count(*) FROM ingest_documents WHERE status = 'saved' AND indexed_at > 0`)
		return n == 1, "not yet"
	})

	incoming := filepath.Join(h.dir, pipeline.IncomingDir, rel)
	if !exists(incoming) {
		t.Fatal("the file left incoming/ though its move was blocked")
	}
	if d, err := h.svc.Document(ctx, id); err != nil || d.Status != "saved" {
		t.Fatalf("Document = %+v, %v; want it saved", d, err)
	}
	if hits, err := h.svc.Search(ctx, "gambit", 10); err != nil || len(hits) != 1 || hits[0].ID != id {
		t.Fatalf("Search(gambit) = %+v, %v; want the document", hits, err)
	}
	if n := count(t, h.db, `SELECT count(*) FROM ingest_files WHERE status = 'parsed'`); n != 1 {
		t.Errorf("the file is not left parsed for the sweep")
	}
	if dls := deadLetters(t, h.db); len(dls) != 0 {
		t.Errorf("a failed move made %d dead letters", len(dls))
	}
	if logs := h.logs.String(); !strings.Contains(logs, "move a processed file") {
		t.Errorf("no warning of the failed move in the logs")
	}

	if err := h.svc.Sweep(ctx); err == nil {
		t.Error("Sweep with the blocker still there reported no error")
	}
	if !exists(incoming) {
		t.Fatal("the file left incoming/ though its move is still blocked")
	}
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	if err := h.svc.Sweep(ctx); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if exists(incoming) {
		t.Error("the sweep left the file in incoming/")
	}
	if got := filesUnder(t, filepath.Join(h.dir, pipeline.ProcessedDir)); !slices.Equal(got, []string{rel}) {
		t.Errorf("processed/ holds %v, want %s", got, rel)
	}
	if n := count(t, h.db, `SELECT count(*) FROM ingest_files WHERE status = 'processed'`); n != 1 {
		t.Errorf("the file is not marked processed")
	}
}

// failingIndex is an index whose Put fails while fail is set.
type failingIndex struct {
	*fts.Index
	fail atomic.Bool
	puts atomic.Int32
}

func (f *failingIndex) Put(ctx context.Context, docs ...search.Doc) error {
	f.puts.Add(1)
	if f.fail.Load() {
		return errors.New("index unavailable (injected)")
	}
	return f.Index.Put(ctx, docs...)
}

// TestIndexFailsReconciliationRepairs is the failure table's third row:
// indexing fails; after its attempts the document keeps an index error,
// is not searchable and is not dead-lettered; a reindex repairs it.
func TestIndexFailsReconciliationRepairs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var flaky *failingIndex
	h := newHarness(t, nil)
	flaky = &failingIndex{Index: h.ix}
	flaky.fail.Store(true)
	svc := h.newService(func(c *pipeline.Config) {
		c.Index = flaky
		c.IndexStage = pipeline.Stage{MaxAttempts: 2, Backoff: backoff.Constant(10 * time.Millisecond), Timeout: 30 * time.Second}
	})
	files := corpusFiles(t, "notes", 3)
	for _, rel := range files {
		drop(t, h.dir, rel, readCorpus(t, rel))
	}
	startService(t, svc)
	waitFor(t, "every document to end with an index error", waitTimeout, func() (bool, string) {
		ok, state := settled(t, h.db, len(files))
		st, err := svc.Status(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		// The last attempt records the error, then its job completes: wait
		// for both.
		done := 0
		for _, j := range jobsOf(t, h.db, pipeline.KindIndex) {
			if j.State == weirtype.StateCompleted {
				done++
			}
		}
		return ok && st.IndexErrors == len(files) && done == len(files), fmt.Sprintf("%s, %d index errors, %d index jobs completed", state, st.IndexErrors, done)
	})
	if got := flaky.puts.Load(); got != 2*int32(len(files)) {
		t.Errorf("%d Puts, want 2 attempts for each of %d documents", got, len(files))
	}
	for _, j := range jobsOf(t, h.db, pipeline.KindIndex) {
		if j.State != weirtype.StateCompleted || j.Attempt != 2 {
			t.Errorf("index job %d: %s after %d attempts, want completed after 2 (left to reconciliation)", j.ID, j.State, j.Attempt)
		}
	}
	if dls := deadLetters(t, h.db); len(dls) != 0 {
		t.Errorf("%d dead letters, want none: an index failure is left to reconciliation", len(dls))
	}
	for _, id := range docIDs(t, h.db, "") {
		d, err := svc.Document(ctx, id)
		if err != nil || d.Status != "saved" || !strings.Contains(d.IndexError, "injected") {
			t.Errorf("Document(%s) = status %q, index error %q, %v; want saved with the index's error", id, d.Status, d.IndexError, err)
		}
	}
	if hits, err := svc.Search(ctx, "the", 10); err != nil || len(hits) != 0 {
		t.Errorf("Search = %d hits, %v; want none", len(hits), err)
	}
	if got := filesUnder(t, filepath.Join(h.dir, pipeline.ProcessedDir)); !slices.Equal(got, files) {
		t.Errorf("processed/ holds %v, want %v: the move comes before the index", got, files)
	}
	stopService(t, svc)

	// Reconciliation, with the real index.
	repair := h.newService(nil)
	run, err := repair.Reindex(ctx, pipeline.TriggerCLI, nil)
	if err != nil {
		t.Fatalf("Reindex: %v", err)
	}
	if run.Status != "done" || run.Missing != len(files) || run.Repaired != len(files) || run.Stale != 0 || run.Extra != 0 || run.Checked != len(files) {
		t.Errorf("Reindex = %+v, want %d missing and repaired", run, len(files))
	}
	st, err := repair.Status(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.IndexErrors != 0 || st.Indexed != len(files) {
		t.Errorf("after the reindex: %d index errors, %d indexed; want 0 and %d", st.IndexErrors, st.Indexed, len(files))
	}
	for _, id := range docIDs(t, h.db, "") {
		d, err := repair.Document(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		got, err := h.ix.Get(ctx, id)
		if err != nil || !got.UpdatedAt.Equal(d.UpdatedAt) {
			t.Errorf("index entry of %s: %v, updated %v; want SQL's %v", id, err, got.UpdatedAt, d.UpdatedAt)
		}
		if hits, err := repair.Search(ctx, d.KeyTerms[0], 100); err != nil || !slices.ContainsFunc(hits, func(h search.Hit) bool { return h.ID == id }) {
			t.Errorf("Search for the key term %q of %s does not find it: %v", d.KeyTerms[0], id, err)
		}
	}
}

// breakingExtractor refuses its first calls as an extractor behind an open
// circuit breaker does, then extracts.
type breakingExtractor struct {
	refuse atomic.Int32 // calls left to refuse
	calls  atomic.Int32
}

func (b *breakingExtractor) Extract(ctx context.Context, in extract.Input) (extract.Result, error) {
	b.calls.Add(1)
	if n := b.refuse.Add(-1); n >= 0 {
		open := &breaker.OpenError{Name: "llm", State: breaker.Open, RetryIn: 20 * time.Millisecond}
		if n%2 == 0 {
			// The LLM extractor's own error.
			return extract.Result{}, fmt.Errorf("extract: %w", &extract.UnavailableError{Open: open})
		}
		// The breaker's, wrapped: permanent to a retry loop, yet the
		// document must wait, not fail.
		return extract.Result{}, fmt.Errorf("llm: %w", open)
	}
	return extract.NewLocal().Extract(ctx, in)
}

// TestBreakerOpenSnoozesExtract checks that while the extractor's breaker
// is open the extract job waits without spending attempts: with two
// attempts and four refusals the document is saved, not dead-lettered.
func TestBreakerOpenSnoozesExtract(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ex := &breakingExtractor{}
	ex.refuse.Store(4)
	h := newHarness(t, func(c *pipeline.Config) {
		c.Extractor = ex
		c.Extract = pipeline.Stage{MaxAttempts: 2, Backoff: backoff.Constant(10 * time.Millisecond), Timeout: 30 * time.Second}
	})
	content := readCorpus(t, "notes/chess-doubled-pawns.txt")
	drop(t, h.dir, "pawns.txt", content)
	id := pipeline.DocumentID("pawns.txt", "")
	h.start()
	waitFor(t, "the document to be saved and indexed", waitTimeout, func() (bool, string) { return settled(t, h.db, 1) })

	if got := ex.calls.Load(); got != 5 {
		t.Errorf("the extractor was called %d times, want 4 refusals and 1 success", got)
	}
	if dls := deadLetters(t, h.db); len(dls) != 0 {
		t.Fatalf("%d dead letters: the open breaker spent the document's attempts (%s)", len(dls), dls[0].LastError)
	}
	j := jobOfDoc(t, h, pipeline.KindExtract, id)
	if j == nil || j.State != weirtype.StateCompleted || j.Attempt != 1 {
		t.Errorf("extract job = %+v, want completed with 1 attempt counted: the snoozes give theirs back", j)
	}
	if d, err := h.svc.Document(ctx, id); err != nil || d.Status != "saved" || d.Extractor != "local" {
		t.Errorf("Document = status %q extractor %q, %v; want saved", d.Status, d.Extractor, err)
	}
	if got := filesUnder(t, filepath.Join(h.dir, pipeline.ProcessedDir)); !slices.Equal(got, []string{"pawns.txt"}) {
		t.Errorf("processed/ holds %v", got)
	}
}

// TestErrorJSONHasTheDesignShape reads error.json of a failed file and of
// an archive's failed message as raw JSON: each carries the design's five
// fields (spec 01, dead-letter handling) under its names and in its
// formats: jobId the SHA-256 job id of the file (hex, not the engine's
// row id), blobPath incoming/{path}, attempts a number, lastError a
// string, failedAt RFC 3339 in UTC to the second.
func TestErrorJSONHasTheDesignShape(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	bad := []byte(`{"not": "a document weir reads"}`)
	drop(t, h.dir, "inbox/data.json", bad)
	archive := mbox("Saturn") // and a message with no words
	archive = append(archive, []byte("From x@example.org Tue Feb  4 09:08:00 2025\nFrom: x@example.org\nSubject: ...\n\n... --- ...\n\n")...)
	drop(t, h.dir, "lists/club.mbox", archive)
	h.start()
	h.waitFailures("both failures written", 0, 2)
	hexID := regexp.MustCompile(`^[0-9a-f]{64}$`)
	utcSecond := regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$`)
	for _, tc := range []struct {
		dir, jobID, blobPath, part string
	}{
		{"inbox/data.json", pipeline.FileID("inbox/data.json", pipeline.ETag(bad)), "incoming/inbox/data.json", ""},
		{"lists/club.mbox#2", pipeline.FileID("lists/club.mbox", pipeline.ETag(archive)), "incoming/lists/club.mbox", "#2"},
	} {
		b, err := os.ReadFile(filepath.Join(h.dir, pipeline.FailedDir, filepath.FromSlash(tc.dir), "error.json"))
		if err != nil {
			t.Fatal(err)
		}
		var raw map[string]any
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatalf("%s: %v", tc.dir, err)
		}
		jobID, _ := raw["jobId"].(string)
		blobPath, _ := raw["blobPath"].(string)
		attempts, isNumber := raw["attempts"].(float64)
		lastError, _ := raw["lastError"].(string)
		failedAt, _ := raw["failedAt"].(string)
		if !hexID.MatchString(jobID) || jobID != tc.jobID {
			t.Errorf("%s: jobId = %#v, want the file's SHA-256 job id %s", tc.dir, raw["jobId"], tc.jobID)
		}
		if blobPath != tc.blobPath {
			t.Errorf("%s: blobPath = %#v, want %q", tc.dir, raw["blobPath"], tc.blobPath)
		}
		if !isNumber || attempts != 1 {
			t.Errorf("%s: attempts = %#v, want the number 1", tc.dir, raw["attempts"])
		}
		if lastError == "" {
			t.Errorf("%s: lastError = %#v, want the error", tc.dir, raw["lastError"])
		}
		if at, err := time.Parse(time.RFC3339, failedAt); !utcSecond.MatchString(failedAt) || err != nil || time.Since(at) > time.Minute {
			t.Errorf("%s: failedAt = %#v, want a recent time like 2026-01-21T15:30:00Z (%v)", tc.dir, raw["failedAt"], err)
		}
		if part, _ := raw["part"].(string); part != tc.part {
			t.Errorf("%s: part = %#v, want %q", tc.dir, raw["part"], tc.part)
		}
		if _, ok := raw["engineJobId"].(float64); !ok {
			t.Errorf("%s: engineJobId = %#v, want the engine's job id", tc.dir, raw["engineJobId"])
		}
	}
}

// TestCopiesAreNoMoreReadableThanTheirSource ingests files of mode 0640
// and 0600, under the usual umask (022): their copies in incoming/ and
// processed/, the originals moved to failed/, an archive's failed message
// and every error.json and metadata.json are no more readable than the
// source they come from.
func TestCopiesAreNoMoreReadableThanTheirSource(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	h := newHarness(t, nil)
	src := t.TempDir()
	files := map[string]struct {
		content []byte
		mode    os.FileMode
	}{
		"good.txt":  {readCorpus(t, "notes/chess-doubled-pawns.txt"), 0o640},
		"data.json": {[]byte(`{"not": "a document weir reads"}`), 0o640},
		"club.mbox": {append(mbox("Saturn"), []byte("From x@example.org Tue Feb  4 09:08:00 2025\nFrom: x@example.org\nSubject: ...\n\n... --- ...\n\n")...), 0o600},
	}
	var paths []string
	for name, f := range files {
		p := filepath.Join(src, name)
		if err := os.WriteFile(p, f.content, f.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, f.mode); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	if _, _, err := h.svc.Ingest(t.Context(), "home", paths); err != nil {
		t.Fatal(err)
	}
	for name, f := range files {
		if fi, err := os.Stat(filepath.Join(h.dir, pipeline.IncomingDir, "home", name)); err != nil || fi.Mode().Perm() != f.mode {
			t.Errorf("incoming/home/%s: mode %v (%v), want %#o as its source", name, fi.Mode().Perm(), err, f.mode)
		}
	}
	h.start()
	h.waitFailures("the files to end", 3, 2)
	want := map[string]os.FileMode{
		"processed/home/good.txt":               0o640,
		"processed/home/club.mbox":              0o600,
		"failed/home/data.json/data.json":       0o640,
		"failed/home/data.json/error.json":      0o640,
		"failed/home/data.json/metadata.json":   0o640,
		"failed/home/club.mbox#2/message.txt":   0o600,
		"failed/home/club.mbox#2/error.json":    0o600,
		"failed/home/club.mbox#2/metadata.json": 0o600,
		"failed/home/club.mbox#2":               0o700,
		"failed/home/data.json":                 0o750,
	}
	for rel, mode := range want {
		fi, err := os.Stat(filepath.Join(h.dir, filepath.FromSlash(rel)))
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		if got := fi.Mode().Perm(); got != mode {
			t.Errorf("%s has mode %#o, want %#o", rel, got, mode)
		}
	}
}
