package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir/ingest"
	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/ingest/search"
	"github.com/weirhq/weir/ingest/search/pgsearch"
	"github.com/weirhq/weir/ingest/search/searchtest"
	"github.com/weirhq/weir/internal/eventually"
	"github.com/weirhq/weir/internal/faultproxy"
	"github.com/weirhq/weir/internal/teststore"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/store/postgres"
)

// pgSchema returns the test server's URL and a schema of the test's own
// that holds weir's tables, dropped when the test ends. It skips the test
// without PostgreSQL (fails it under WEIR_REQUIRE_SERVICES=1).
func pgSchema(t *testing.T) (raw, schema string) {
	t.Helper()
	st, raw := teststore.PostgresStore(t, "ingest_", 2)
	return raw, st.Schema()
}

// fastStages retry at once, so that a test does not wait on backoffs.
func fastStages(p pipeline.Config) pipeline.Config {
	fast := pipeline.Stage{MaxAttempts: 3, Backoff: backoff.Constant(20 * time.Millisecond), Timeout: 30 * time.Second}
	p.Parse, p.Extract, p.Save, p.IndexStage = fast, fast, fast, fast
	p.WatchEvery, p.SweepEvery, p.PollEvery, p.ReindexSchedule = 50*time.Millisecond, 100*time.Millisecond, 20*time.Millisecond, pipeline.NoSchedule
	return p
}

// ingestNotes ingests n small Markdown files under notes/, each with the
// word honey and a word of its own (word0, word1, …), and waits for them
// to be saved.
func ingestNotes(t *testing.T, svc *ingest.Service, n int) {
	t.Helper()
	ctx := context.Background()
	var paths []string
	for i := range n {
		paths = append(paths, writeFile(t, fmt.Sprintf("note%d.md", i), fmt.Sprintf("# Note %d\n\nHoney and word%d.", i, i)))
	}
	if _, _, err := svc.Pipeline().Ingest(ctx, "notes", paths); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, fmt.Sprintf("%d documents saved", n), waitTimeout, func() (bool, string) {
		st, err := svc.Pipeline().Status(ctx, 0)
		return err == nil && st.Documents["saved"] == n, fmt.Sprintf("%+v %v", st.Documents, err)
	})
}

// searchable waits until a search for honey finds n documents.
func searchable(t *testing.T, svc *ingest.Service, n int) {
	t.Helper()
	eventually.True(t, fmt.Sprintf("%d documents found", n), waitTimeout, func() (bool, string) {
		hits, err := svc.Pipeline().Search(context.Background(), "honey", 100)
		return err == nil && len(hits) == n, fmt.Sprintf("%d hits, %v", len(hits), err)
	})
}

func startService(t *testing.T, cfg ingest.Config) *ingest.Service {
	t.Helper()
	ctx := context.Background()
	svc, err := ingest.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := svc.Stop(sctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return svc
}

// With a PostgreSQL store the index is PostgreSQL's, in the store's
// schema, by default: no index file in the data directory, and the
// documents searchable; the index's breaker shows in the status.
func TestPostgresStoreIndexesInPostgres(t *testing.T) {
	raw, schema := pgSchema(t)
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	svc := startService(t, ingest.Config{DataDir: data, StoreURL: raw, Schema: schema, Logger: quiet, Pipeline: fastStages(pipeline.Config{})})
	ingestNotes(t, svc, 3)
	searchable(t, svc, 3)
	if _, err := os.Stat(filepath.Join(data, ingest.IndexFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("an index file in the data directory (%v), want none with a PostgreSQL store", err)
	}
	var docs int
	pool := svc.DB().Store.(*postgres.Store).Pool()
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{schema, "weir_search_docs"}.Sanitize()).Scan(&docs); err != nil || docs != 3 {
		t.Fatalf("the store's schema holds %d indexed documents (%v), want 3", docs, err)
	}
	st, err := svc.Pipeline().Status(context.Background(), 0)
	if err != nil || st.Breakers[ingest.IndexBreakerName] != "closed" || st.Indexed != 3 {
		t.Fatalf("status %+v, %v: want 3 indexed and the index's breaker closed", st, err)
	}
}

// New refuses an index that is not shared as widely as its store, an
// unknown index and a bad index URL, naming the setting, before it opens
// anything.
func TestConfigRefusesUnsafeIndexes(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	refused(t, dir, "Config.Index", []refusal{
		{ingest.Config{DataDir: dir, StoreURL: "postgres://db.invalid/weir", Index: ingest.IndexFTS}, "the fts index is a SQLite file in the data directory, and a PostgreSQL store is shared"},
		{ingest.Config{DataDir: dir, Index: ingest.IndexPostgres}, "the postgres index is shared by every process that names it, and the SQLite store belongs to one data directory"},
		{ingest.Config{DataDir: dir, IndexURL: "postgres://db.invalid/search"}, "the SQLite store belongs to one data directory"},
		{ingest.Config{DataDir: dir, Index: "elastic"}, `unknown index "elastic"`},
		{ingest.Config{DataDir: dir, StoreURL: "postgres://db.invalid/weir", IndexURL: "http://search:9200"}, "not a postgres:// or postgresql:// URL"},
		{ingest.Config{DataDir: dir, StoreURL: "postgres://db.invalid/weir", Index: ingest.IndexFTS, IndexURL: "postgres://db.invalid/search"}, "choose one"},
	})
}

// A search database that does not answer is an error of New that names
// Config.IndexURL, without its password.
func TestUnreachableSearchDatabase(t *testing.T) {
	raw, schema := pgSchema(t)
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = ingest.New(ctx, ingest.Config{DataDir: t.TempDir(), StoreURL: raw, Schema: schema, Logger: quiet,
		IndexURL: "postgres://weir:s3cret-pass@" + addr + "/search?sslmode=disable&connect_timeout=5"})
	if err == nil || !strings.Contains(err.Error(), "Config.IndexURL") || !strings.Contains(err.Error(), "does not answer") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("New with an unreachable search database: %v; want an error naming Config.IndexURL, without the password", err)
	}
}

// A search database that goes away while the service runs stops no
// ingestion: the documents are saved, the index's breaker opens, the
// index jobs wait (or, out of attempts, mark their documents), and once
// the database is back every document is searchable, none lost and none
// dead-lettered, after a reindex repairs what the jobs left.
func TestSearchDatabaseGoesAway(t *testing.T) {
	raw, schema := pgSchema(t)
	t.Parallel()
	px, via := faultproxy.ForURL(t, raw)
	iu, err := url.Parse(via)
	if err != nil {
		t.Fatal(err)
	}
	q := iu.Query()
	q.Set("connect_timeout", "2")
	iu.RawQuery = q.Encode()
	br, err := breaker.New(breaker.Config{Name: ingest.IndexBreakerName, Strategy: breaker.Consecutive(2), OpenDelay: 300 * time.Millisecond,
		Classify: func(ctx context.Context, err error) breaker.Outcome {
			if errors.Is(err, search.ErrInvalid) {
				return breaker.Ignored
			}
			return breaker.DefaultClassify(ctx, err)
		}})
	if err != nil {
		t.Fatal(err)
	}
	svc := startService(t, ingest.Config{DataDir: t.TempDir(), StoreURL: raw, Schema: schema, Logger: quiet, IndexURL: iu.String(),
		IndexBreaker: br, Pipeline: fastStages(pipeline.Config{})})
	ingestNotes(t, svc, 2)
	searchable(t, svc, 2)

	px.Cut()
	ingestNotes(t, svc, 12)
	eventually.True(t, "the index's breaker to open", waitTimeout, func() (bool, string) {
		s := br.Snapshot()
		return s.Counts.Rejected > 0, fmt.Sprintf("%+v", s)
	})
	ctx := context.Background()
	st, err := svc.Pipeline().Status(ctx, 0)
	if err != nil || st.DeadLetters != 0 || st.Documents["saved"] != 12 {
		t.Fatalf("while the index is away: %+v, %v; want 12 documents saved and no dead letter", st, err)
	}

	px.Restore()
	eventually.True(t, "the index jobs to finish", waitTimeout, func() (bool, string) {
		st, err := svc.Pipeline().Status(ctx, 0)
		waiting := 0
		for _, n := range st.Jobs[pipeline.KindIndex] {
			waiting += n
		}
		waiting -= st.Jobs[pipeline.KindIndex]["completed"]
		return err == nil && waiting == 0, fmt.Sprintf("%+v %v", st.Jobs[pipeline.KindIndex], err)
	})
	run, err := svc.Pipeline().Reindex(ctx, pipeline.TriggerCLI, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after the outage: reindex %+v", run)
	searchable(t, svc, 12)
	st, err = svc.Pipeline().Status(ctx, 0)
	if err != nil || st.Indexed != 12 || st.IndexErrors != 0 || st.DeadLetters != 0 || st.Breakers[ingest.IndexBreakerName] != "closed" {
		t.Fatalf("after the outage: %+v, %v; want 12 indexed, no index error, no dead letter, the breaker closed", st, err)
	}
}

// Reconciliation repairs a PostgreSQL index that drifted from SQL:
// entries missing, stale (older than SQL's document) and extra (a
// document SQL does not have) are put right, and counted.
func TestReindexRepairsPostgresIndex(t *testing.T) {
	raw, schema := pgSchema(t)
	t.Parallel()
	ctx := context.Background()
	svc := startService(t, ingest.Config{DataDir: t.TempDir(), StoreURL: raw, Schema: schema, Logger: quiet, Pipeline: fastStages(pipeline.Config{})})
	ingestNotes(t, svc, 8)
	searchable(t, svc, 8)

	// The index as another process sees it: on the store's pool, in its
	// schema.
	ix, err := pgsearch.Open(ctx, pgsearch.Config{Pool: svc.DB().Store.(*postgres.Store).Pool(), Schema: schema, MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	es, err := ix.Entries(ctx, "", 100)
	if err != nil || len(es) != 8 {
		t.Fatalf("entries %v, %v; want 8", es, err)
	}
	if _, err := searchtest.MakeDrift(ctx, ix, 2, 3, "ffff-not-in-sql"); err != nil {
		t.Fatal(err)
	}

	run, err := svc.Pipeline().Reindex(ctx, pipeline.TriggerCLI, nil)
	if err != nil {
		t.Fatal(err)
	}
	if run.Checked != 8 || run.Missing != 2 || run.Stale != 3 || run.Extra != 1 || run.Repaired != 5 || run.Status != "done" {
		t.Fatalf("reindex run %+v; want 8 checked, 2 missing, 3 stale, 1 extra, 5 repaired, done", run)
	}
	after, err := ix.Entries(ctx, "", 100)
	if err != nil || len(after) != 8 {
		t.Fatalf("after the reindex: %d entries, %v; want 8", len(after), err)
	}
	for i, e := range after {
		if e.ID != es[i].ID || !e.UpdatedAt.Equal(es[i].UpdatedAt) {
			t.Errorf("entry %d: %+v, want %+v", i, e, es[i])
		}
	}
	searchable(t, svc, 8)
}
