package pipeline_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite", to write the index file's header

	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/ingest/search"
	"github.com/weirhq/weir/ingest/search/fts"
	"github.com/weirhq/weir/weirtype"
)

// ingestCorpus drops the corpus files rels into incoming/, starts the
// harness's service and waits until they are all processed and indexed.
// It returns the documents SQL holds.
func ingestCorpus(t *testing.T, h *harness, rels []string) []string {
	t.Helper()
	for _, rel := range rels {
		drop(t, h.dir, rel, readCorpus(t, rel))
	}
	h.start()
	waitFor(t, "the corpus to be ingested", 90*time.Second, func() (bool, string) { return settled(t, h.db, len(rels)) })
	return docIDs(t, h.db, "saved")
}

// TestReindexRepairsDrift deletes entries from the index and makes one
// stale, and checks that a reindex finds and repairs them, in batches of
// 100 with progress after each, records its run, and that a second run
// finds nothing to do.
func TestReindexRepairsDrift(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, func(c *pipeline.Config) { c.Workers = 16 })
	files := append(corpusFiles(t, "notes", 175), corpusFiles(t, "recipes", 20)...)
	files = append(files, "lists/elm-road-allotments.mbox", "lists/stargazers.mbox")
	ids := ingestCorpus(t, h, files)
	const wantDocs = 175 + 20 + 26 + 32
	if len(ids) != wantDocs {
		t.Fatalf("%d documents saved, want %d", len(ids), wantDocs)
	}

	// Drift: five entries gone, one stale, one the SQL does not have.
	missing := []string{ids[3], ids[50], ids[120], ids[199], ids[250]}
	if n, err := h.ix.Delete(ctx, missing...); err != nil || n != len(missing) {
		t.Fatalf("Delete = %d, %v", n, err)
	}
	staleID := ids[77]
	stale, err := h.ix.Get(ctx, staleID)
	if err != nil {
		t.Fatal(err)
	}
	current := stale.UpdatedAt
	stale.UpdatedAt = stale.UpdatedAt.Add(-time.Hour)
	stale.Body = "an old version"
	if err := h.ix.Put(ctx, stale); err != nil {
		t.Fatal(err)
	}
	extra := search.Doc{ID: "ffff-not-in-sql", Title: "orphan", Body: "an entry whose row is gone", UpdatedAt: time.Now()}
	if err := h.ix.Put(ctx, extra); err != nil {
		t.Fatal(err)
	}

	var calls []pipeline.ReindexRun
	run, err := h.svc.Reindex(ctx, pipeline.TriggerAPI, func(r pipeline.ReindexRun) { calls = append(calls, r) })
	if err != nil {
		t.Fatalf("Reindex: %v", err)
	}
	if run.Status != "done" || run.Trigger != pipeline.TriggerAPI || run.Total != wantDocs || run.Checked != wantDocs ||
		run.Missing != len(missing) || run.Stale != 1 || run.Extra != 1 || run.Repaired != len(missing)+1 || run.FinishedAt == nil {
		t.Errorf("Reindex = %+v, want %d checked, %d missing, 1 stale, 1 extra, %d repaired", run, wantDocs, len(missing), len(missing)+1)
	}
	checkProgress(t, calls, wantDocs)
	runs, err := h.svc.ReindexRuns(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].ID != run.ID || runs[0].Status != "done" || runs[0].Missing != len(missing) || runs[0].Stale != 1 ||
		runs[0].Extra != 1 || runs[0].Repaired != len(missing)+1 || runs[0].Checked != wantDocs || runs[0].Total != wantDocs {
		t.Errorf("ReindexRuns = %+v, want the run with its counts", runs)
	}
	for _, id := range missing {
		if _, err := h.ix.Get(ctx, id); err != nil {
			t.Errorf("the missing entry %s was not repaired: %v", id, err)
		}
	}
	if got, err := h.ix.Get(ctx, staleID); err != nil || !got.UpdatedAt.Equal(current) || got.Body == "an old version" {
		t.Errorf("the stale entry was not repaired: updated %v, %v; want %v", got.UpdatedAt, err, current)
	}
	if n, err := h.ix.Count(ctx); err != nil || n != wantDocs {
		t.Errorf("index Count = %d, %v; want %d (the orphan removed)", n, err, wantDocs)
	}

	calls = nil
	again, err := h.svc.Reindex(ctx, pipeline.TriggerCLI, func(r pipeline.ReindexRun) { calls = append(calls, r) })
	if err != nil {
		t.Fatal(err)
	}
	checkProgress(t, calls, wantDocs)
	// With nothing to repair, progress comes after each batch of 100.
	var checked []int
	for _, c := range calls {
		if c.Status == "running" {
			checked = append(checked, c.Checked)
		}
	}
	if !slices.Contains(checked, 100) || !slices.Contains(checked, 200) {
		t.Errorf("progress reported at %v documents checked, want after each batch of 100", checked)
	}
	if again.Status != "done" || again.Checked != wantDocs || again.Missing+again.Stale+again.Extra+again.Repaired != 0 {
		t.Errorf("second Reindex = %+v, want nothing to do", again)
	}
	if runs, _ := h.svc.ReindexRuns(ctx, 10); len(runs) != 2 || runs[0].ID != again.ID {
		t.Errorf("ReindexRuns = %+v, want both runs, newest first", runs)
	}
}

// checkProgress checks the progress reports of a reindex of total
// documents: at least 3 (one per batch of 100, or a repair batch, and
// the end), never going back, the last done.
func checkProgress(t *testing.T, calls []pipeline.ReindexRun, total int) {
	t.Helper()
	if len(calls) < 3 {
		t.Fatalf("progress was reported %d times, want at least 3 for %d documents in batches of 100", len(calls), total)
	}
	last := 0
	for _, c := range calls {
		if c.Checked < last {
			t.Errorf("progress went back from %d to %d checked", last, c.Checked)
		}
		last = c.Checked
	}
	if end := calls[len(calls)-1]; end.Status != "done" || end.Checked != total {
		t.Errorf("the last progress report is %+v, want done with %d checked", end, total)
	}
}

// TestSchemaVersionRebuildReindexes makes the index file look like another
// schema version: Open recreates it empty, and the service started on it
// reindexes every document with the trigger schema_version.
func TestSchemaVersionRebuildReindexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, nil)
	ids := ingestCorpus(t, h, append(corpusFiles(t, "recipes", 5), "lists/elm-road-allotments.mbox"))
	if len(ids) != 5+26 {
		t.Fatalf("%d documents saved, want 31", len(ids))
	}
	stopService(t, h.svc)
	if err := h.ix.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(h.root, "index.db")
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", fts.SchemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}

	ix := openIndex(t, path)
	if !ix.Rebuilt() {
		t.Fatal("Open did not rebuild an index file of another schema version")
	}
	if n, err := ix.Count(ctx); err != nil || n != 0 {
		t.Fatalf("the rebuilt index holds %d documents (%v), want 0", n, err)
	}
	svc := h.newService(func(c *pipeline.Config) { c.Index = ix })
	startService(t, svc)
	waitFor(t, "the schema_version reindex", waitTimeout, func() (bool, string) {
		runs, err := svc.ReindexRuns(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) == 0 {
			return false, "no run"
		}
		return runs[0].Status == "done", fmt.Sprintf("run %+v", runs[0])
	})
	runs, _ := svc.ReindexRuns(ctx, 10)
	if len(runs) != 1 || runs[0].Trigger != pipeline.TriggerSchemaVersion || runs[0].Missing != len(ids) || runs[0].Repaired != len(ids) {
		t.Errorf("ReindexRuns = %+v, want one run, trigger %s, repairing all %d documents", runs, pipeline.TriggerSchemaVersion, len(ids))
	}
	if n, err := ix.Count(ctx); err != nil || n != len(ids) {
		t.Errorf("index Count = %d, %v; want %d", n, err, len(ids))
	}
	for _, id := range ids {
		if _, err := ix.Get(ctx, id); err != nil {
			t.Errorf("document %s not restored to the index: %v", id, err)
		}
	}
	if hits, err := svc.Search(ctx, "compost", 100); err != nil || len(hits) == 0 {
		t.Errorf("Search(compost) = %d hits, %v; want the allotment list's messages", len(hits), err)
	}
}

// A reindex requested while one waits is that one: two requests make one
// run, and a request after its job completed makes another (until the
// success is written, which may wait for the client's next claim, the
// job is still running and a request is a duplicate of it).
func TestStartReindexWhileOneWaits(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	first, err := h.svc.StartReindex(ctx, pipeline.TriggerAPI)
	if err != nil || first.Outcome != weirtype.Inserted {
		t.Fatalf("first request: %+v, %v", first, err)
	}
	second, err := h.svc.StartReindex(ctx, pipeline.TriggerCLI)
	if err != nil || second.Outcome != weirtype.DuplicatePending || second.JobID != first.JobID {
		t.Fatalf("second request: %+v, %v; want job %d, duplicate_pending", second, err, first.JobID)
	}
	h.start()
	waitFor(t, "the reindex to run", 10*time.Second, func() (bool, string) {
		runs, err := h.svc.ReindexRuns(ctx, 5)
		return err == nil && len(runs) == 1 && runs[0].Status == "done", fmt.Sprintf("%+v %v", runs, err)
	})
	waitFor(t, "the reindex job to complete", 10*time.Second, func() (bool, string) {
		j, err := h.db.Store.Executor().GetJob(ctx, first.JobID)
		return err == nil && j.State == weirtype.StateCompleted, fmt.Sprintf("%+v %v", j, err)
	})
	third, err := h.svc.StartReindex(ctx, pipeline.TriggerAPI)
	if err != nil || third.Outcome != weirtype.Inserted || third.JobID == first.JobID {
		t.Fatalf("a request after the run: %+v, %v; want a new job", third, err)
	}
}
