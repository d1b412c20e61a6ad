package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/ingest/extract"
	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/ingest/search/fts"
	"github.com/weirhq/weir/internal/eventually"
	"github.com/weirhq/weir/internal/testenv"
	"github.com/weirhq/weir/internal/teststore"
	"github.com/weirhq/weir/resilience/backoff"
	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/appdb"
	"github.com/weirhq/weir/weirtype"
)

// corpusDir is the sample corpus at the repository's root.
const corpusDir = "../../corpus"

// waitTimeout bounds every wait of these tests for the service's real
// jobs.
const waitTimeout = 15 * time.Second

// harness is one test's service: its own data directory, SQLite store and
// index file.
type harness struct {
	t    *testing.T
	root string // holds data/, weir.db and index.db
	dir  string // the data directory
	db   *appdb.DB
	ix   *fts.Index
	svc  *pipeline.Service
	logs *logBuffer
}

// newHarness opens a store and an index in a directory of the test's own
// and makes a service over them, its config first passed to mod if mod is
// not nil. The service is not started.
func newHarness(t *testing.T, mod func(*pipeline.Config)) *harness {
	t.Helper()
	return newHarnessOn(t, "sqlite", mod)
}

// stores are the stores a test runs on: the embedded SQLite file, and
// PostgreSQL (skipped loudly without it, failed under
// WEIR_REQUIRE_SERVICES=1).
var stores = []string{"sqlite", "postgres"}

// onEachStore runs test, in parallel subtests named for the stores, on a
// harness of each store.
func onEachStore(t *testing.T, test func(t *testing.T, h *harness)) {
	for _, kind := range stores {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			test(t, newHarnessOn(t, kind, nil))
		})
	}
}

// newHarnessOn is newHarness on the store named kind: "sqlite", or
// "postgres" in a schema of the test's own.
func newHarnessOn(t *testing.T, kind string, mod func(*pipeline.Config)) *harness {
	t.Helper()
	root := t.TempDir()
	return newHarnessOver(t, root, openDB(t, kind, root), mod)
}

// newHarnessOver is newHarness over db, with its files in root.
func newHarnessOver(t *testing.T, root string, db *appdb.DB, mod func(*pipeline.Config)) *harness {
	t.Helper()
	h := &harness{t: t, root: root, dir: filepath.Join(root, "data"), db: db, logs: newLogBuffer(t)}
	h.ix = openIndex(t, filepath.Join(root, "index.db"))
	h.svc = h.newService(mod)
	return h
}

// openDB opens a store of the test's own, closed at its end: the SQLite
// file weir.db in root, or, for kind "postgres", a PostgreSQL schema.
func openDB(t *testing.T, kind, root string) *appdb.DB {
	t.Helper()
	cfg := appdb.Config{Path: filepath.Join(root, "weir.db")}
	if kind == "postgres" {
		raw := testenv.Postgres(t)
		cfg = appdb.Config{URL: raw, Schema: teststore.Schema(t, raw, "pipeline_"), MaxConns: 8}
	}
	return openAppDB(t, cfg)
}

// openAppDB opens the store cfg names, closed at the test's end.
func openAppDB(t *testing.T, cfg appdb.Config) *appdb.DB {
	t.Helper()
	db, err := appdb.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("appdb.Open: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close the store: %v", err)
		}
	})
	return db
}

// config is the tests' service config: fast polls and backoffs, no
// periodic reindex.
func (h *harness) config() pipeline.Config {
	fast := pipeline.Stage{MaxAttempts: 3, Backoff: backoff.Constant(20 * time.Millisecond), Timeout: 30 * time.Second}
	return pipeline.Config{
		DB: h.db, DataDir: h.dir, Index: h.ix, Extractor: extract.NewLocal(), ID: "test-1", Workers: 4,
		Parse: fast, Extract: fast, Save: fast, IndexStage: fast,
		WatchEvery: 50 * time.Millisecond, SweepEvery: 100 * time.Millisecond, PollEvery: 20 * time.Millisecond,
		ReindexSchedule: pipeline.NoSchedule,
		Logger:          slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

// newService makes another service over the harness's store, data
// directory and index (mod may change them), stopped at the test's end.
func (h *harness) newService(mod func(*pipeline.Config)) *pipeline.Service {
	h.t.Helper()
	cfg := h.config()
	if mod != nil {
		mod(&cfg)
	}
	svc, err := pipeline.New(context.Background(), cfg)
	if err != nil {
		h.t.Fatalf("pipeline.New: %v", err)
	}
	h.t.Cleanup(func() { stopService(h.t, svc) })
	return svc
}

func (h *harness) start() { startService(h.t, h.svc) }

func startService(t *testing.T, svc *pipeline.Service) {
	t.Helper()
	if err := svc.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
}

func stopService(t *testing.T, svc *pipeline.Service) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := svc.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
}

func openIndex(t *testing.T, path string) *fts.Index {
	t.Helper()
	ix, err := fts.Open(context.Background(), fts.Config{Path: path})
	if err != nil {
		t.Fatalf("fts.Open: %v", err)
	}
	t.Cleanup(func() { ix.Close() })
	return ix
}

// logBuffer keeps the service's logs, and prints them if the test fails.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func newLogBuffer(t *testing.T) *logBuffer {
	l := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			l.mu.Lock()
			defer l.mu.Unlock()
			t.Logf("service logs:\n%s", l.buf.String())
		}
	})
	return l
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// drop puts content at rel under incoming/ as a writer would: through a
// hidden temporary file renamed into place, with a modification time far
// enough in the past that the next scan takes it.
func drop(t *testing.T, dataDir, rel string, content []byte) {
	t.Helper()
	dst := filepath.Join(dataDir, pipeline.IncomingDir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(dst), ".drop-"+filepath.Base(dst))
	if err := os.WriteFile(tmp, content, 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(tmp, old, old); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
}

// readCorpus returns a file of the sample corpus.
func readCorpus(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(corpusDir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// corpusFiles returns the first n files of a corpus folder, by name.
func corpusFiles(t *testing.T, folder string, n int) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(corpusDir, folder))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if e.Type().IsRegular() && len(out) < n {
			out = append(out, folder+"/"+e.Name())
		}
	}
	if len(out) < n {
		t.Fatalf("the corpus folder %s has %d files, want %d", folder, len(out), n)
	}
	return out
}

// waitFor polls cond until it holds, failing the test after timeout with
// what cond last said.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	eventually.True(t, what, timeout, cond)
}

// count runs a count query on the application's tables.
func count(t *testing.T, db *appdb.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.SQL.QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// filesUnder lists the regular files under dir, relative and with
// slashes, sorted; none if dir does not exist.
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() {
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// deadLetters lists every dead letter of the store.
func deadLetters(t *testing.T, db *appdb.DB) []*weirtype.DeadLetter {
	t.Helper()
	dls, err := db.Store.Executor().ListDeadLetters(context.Background(), store.DeadLetterFilter{})
	if err != nil {
		t.Fatalf("ListDeadLetters: %v", err)
	}
	return dls
}

// jobsOf lists the jobs of a kind (up to 1000).
func jobsOf(t *testing.T, db *appdb.DB, kind string) []*weirtype.Job {
	t.Helper()
	js, err := db.Store.Executor().ListJobs(context.Background(), store.JobFilter{Kinds: []string{kind}, Limit: store.MaxJobListLimit})
	if err != nil {
		t.Fatalf("ListJobs: %v", err)
	}
	return js
}

// docIDs lists the ids of the documents SQL holds, by status if status is
// not empty.
func docIDs(t *testing.T, db *appdb.DB, status string) []string {
	t.Helper()
	q, args := `SELECT id FROM ingest_documents ORDER BY id`, []any{}
	if status != "" {
		q, args = `SELECT id FROM ingest_documents WHERE status = $1 ORDER BY id`, []any{status}
	}
	ids, err := db.Strings(context.Background(), q, args...)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// waitFailures waits until failures dead-lettered documents or files have
// been written to failed/ and, unless files is 0, files have settled.
func (h *harness) waitFailures(what string, files, failures int) {
	h.t.Helper()
	waitFor(h.t, what, waitTimeout, func() (bool, string) {
		ok, state := true, "the files not waited for"
		if files > 0 {
			ok, state = settled(h.t, h.db, files)
		}
		n := count(h.t, h.db, `SELECT count(*) FROM ingest_failures`)
		return ok && n == failures, fmt.Sprintf("%s, %d of %d failures written", state, n, failures)
	})
}

// settled reports whether n files are processed or failed, every saved
// document is indexed or has an index error, and no job is running: the
// service has nothing left to do with them.
func settled(t *testing.T, db *appdb.DB, files int) (bool, string) {
	t.Helper()
	done := count(t, db, `SELECT count(*) FROM ingest_files WHERE status IN ('processed', 'failed', 'superseded')`)
	waiting := count(t, db, `SELECT count(*) FROM ingest_documents WHERE status = 'parsed'
		OR (status = 'saved' AND indexed_at = 0 AND index_error = '')`)
	// A job whose work is done may read as running until its success is
	// written, which can wait for its client's next claim.
	running, err := db.Store.Executor().ListJobs(context.Background(), store.JobFilter{States: []weirtype.State{weirtype.StateRunning}, Limit: 1})
	if err != nil {
		t.Fatalf("ListJobs: %v", err)
	}
	return done == files && waiting == 0 && len(running) == 0,
		fmt.Sprintf("%d of %d files ended, %d documents wait, %d jobs running", done, files, waiting, len(running))
}
