package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
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
