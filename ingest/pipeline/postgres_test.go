package pipeline_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/ingest/extract"
	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/internal/testenv"
	"github.com/weirhq/weir/internal/teststore"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/store/appdb"
	"github.com/weirhq/weir/weirtype"
)

// TestPostgresTwoServices runs two services, as two processes would, on
// one PostgreSQL schema, one data directory and one index file: each file
// dropped into incoming/ is parsed, saved and indexed once, and moved to
// processed/ once. It skips without PostgreSQL, and fails under
// WEIR_REQUIRE_SERVICES=1.
func TestPostgresTwoServices(t *testing.T) {
	raw := testenv.Postgres(t)
	t.Parallel()
	ctx := context.Background()
	schema := teststore.Schema(t, raw, "pipeline_")
	root := t.TempDir()
	dir := filepath.Join(root, "data")
	logs := newLogBuffer(t)
	fast := pipeline.Stage{MaxAttempts: 3, Backoff: backoff.Constant(20 * time.Millisecond), Timeout: 30 * time.Second}

	var svcs []*pipeline.Service
	for _, id := range []string{"pg-a", "pg-b"} {
		db := openAppDB(t, appdb.Config{URL: raw, Schema: schema, MaxConns: 8})
		ix := openIndex(t, filepath.Join(root, "index.db"))
		svc, err := pipeline.New(ctx, pipeline.Config{
			DB: db, DataDir: dir, Index: ix, Extractor: extract.NewLocal(), ID: id, Workers: 4,
			Parse: fast, Extract: fast, Save: fast, IndexStage: fast,
			WatchEvery: 30 * time.Millisecond, SweepEvery: 100 * time.Millisecond, PollEvery: 20 * time.Millisecond, ReindexSchedule: pipeline.NoSchedule,
			Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("service", id),
		})
		if err != nil {
			t.Fatalf("pipeline.New: %v", err)
		}
		t.Cleanup(func() { stopService(t, svc) })
		svcs = append(svcs, svc)
	}
	for _, svc := range svcs {
		startService(t, svc)
	}
	db := openAppDB(t, appdb.Config{URL: raw, Schema: schema, MaxConns: 2}) // the test's own queries

	files := append(corpusFiles(t, "notes", 40), corpusFiles(t, "articles", 20)...)
	for _, rel := range files {
		drop(t, dir, rel, readCorpus(t, rel))
	}
	waitFor(t, "the files to be ingested", 40*time.Second, func() (bool, string) { return settled(t, db, len(files)) })

	if n := count(t, db, `SELECT count(*) FROM ingest_documents`); n != len(files) {
		t.Errorf("%d documents in SQL, want one per file: %d", n, len(files))
	}
	if n := count(t, db, `SELECT count(*) FROM ingest_documents WHERE status = 'saved' AND indexed_at > 0`); n != len(files) {
		t.Errorf("%d documents saved and indexed, want %d", n, len(files))
	}
	for _, kind := range []string{pipeline.KindParse, pipeline.KindExtract, pipeline.KindSave, pipeline.KindIndex} {
		js := jobsOf(t, db, kind)
		if len(js) != len(files) {
			t.Errorf("%d %s jobs, want one per file", len(js), kind)
		}
		for _, j := range js {
			if j.State != weirtype.StateCompleted {
				t.Errorf("%s job %d is %s", kind, j.ID, j.State)
			}
		}
	}
	ix := openIndex(t, filepath.Join(root, "index.db"))
	if n, err := ix.Count(ctx); err != nil || n != len(files) {
		t.Errorf("index Count = %d, %v; want %d", n, err, len(files))
	}
	for _, rel := range files {
		id := pipeline.DocumentID(rel, "")
		if _, err := ix.Get(ctx, id); err != nil {
			t.Errorf("%s is not indexed: %v", rel, err)
		}
	}
	if got := filesUnder(t, filepath.Join(dir, pipeline.ProcessedDir)); !slices.Equal(got, sorted(files)) {
		t.Errorf("processed/ holds %d files, want each of the %d once", len(got), len(files))
	}
	if got := filesUnder(t, filepath.Join(dir, pipeline.IncomingDir)); len(got) != 0 {
		t.Errorf("incoming/ still holds %v", got)
	}
	if got := filesUnder(t, filepath.Join(dir, pipeline.FailedDir)); len(got) != 0 {
		t.Errorf("failed/ holds %v", got)
	}
	if dls := deadLetters(t, db); len(dls) != 0 {
		t.Errorf("%d dead letters, want none", len(dls))
	}
	all := logs.String()
	t.Logf("jobs completed: %d by pg-a, %d by pg-b",
		strings.Count(all, `service=pg-a level=DEBUG msg="job completed"`)+strings.Count(all, `msg="job completed" service=pg-a`),
		strings.Count(all, `service=pg-b level=DEBUG msg="job completed"`)+strings.Count(all, `msg="job completed" service=pg-b`))
}
