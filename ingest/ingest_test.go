package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/broker"
	"github.com/weirhq/weir/broker/nats"
	"github.com/weirhq/weir/broker/nats/natsembed"
	"github.com/weirhq/weir/ingest"
	"github.com/weirhq/weir/ingest/extract"
	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/internal/eventually"
	"github.com/weirhq/weir/internal/teststore"
	"github.com/weirhq/weir/resilience/breaker"
	"github.com/weirhq/weir/store/appdb"
)

const waitTimeout = 20 * time.Second

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// writeFile writes a file to ingest, outside the data directory.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// getJSON GETs url and decodes its JSON answer into v, returning the
// status.
func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %d, decode: %v", url, resp.StatusCode, err)
	}
	return resp.StatusCode
}

// The service starts from its Config alone (the SQLite store, the index
// and the folders in a new data directory, a server on a free port),
// ingests a file, answers a search for it over HTTP, and stops.
func TestServiceFromConfigIngestsAndSearches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	data := filepath.Join(t.TempDir(), "data")
	svc, err := ingest.New(ctx, ingest.Config{DataDir: data, Listen: "127.0.0.1:0", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{ingest.SQLiteFile, ingest.IndexFile, pipeline.IncomingDir, pipeline.ProcessedDir, pipeline.FailedDir} {
		if _, err := os.Stat(filepath.Join(data, p)); err != nil {
			t.Errorf("New made no %s in the data directory: %v", p, err)
		}
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	files, _, err := svc.Pipeline().Ingest(ctx, "notes", []string{writeFile(t, "bees.md", "# Bees\n\nA hive of bees makes honey in summer.")})
	if err != nil || len(files) != 1 {
		t.Fatalf("Ingest: %v, %v", files, err)
	}
	base := "http://" + svc.Addr().String()
	var hits []struct{ ID, Title string }
	eventually.True(t, "the file to be searchable over HTTP", waitTimeout, func() (bool, string) {
		var res struct {
			Hits []struct{ ID, Title string }
		}
		code := getJSON(t, base+"/api/search?q=honey", &res)
		hits = res.Hits
		return code == http.StatusOK && len(hits) == 1, fmt.Sprintf("%d: %+v", code, hits)
	})
	if hits[0].Title != "Bees" || hits[0].ID != pipeline.DocumentID("notes/bees.md", "") {
		t.Fatalf("hit %+v, want the document of notes/bees.md, titled Bees", hits[0])
	}
	var doc pipeline.Document
	if code := getJSON(t, base+"/api/documents/"+hits[0].ID, &doc); code != http.StatusOK || !strings.Contains(doc.Body, "honey") {
		t.Fatalf("GET the document: %d %+v", code, doc)
	}
	var ready map[string]any
	if code := getJSON(t, base+"/readyz", &ready); code != http.StatusOK {
		t.Fatalf("/readyz: %d %v", code, ready)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := svc.Stop(sctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := svc.Stop(sctx); err != nil {
		t.Fatalf("Stop again: %v", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("the server still answers after Stop")
	}
	// The store is closed, and free for another service.
	again, err := ingest.New(ctx, ingest.Config{DataDir: data, Logger: quiet})
	if err != nil {
		t.Fatalf("New on the same data directory after Stop: %v", err)
	}
	if d, err := again.Pipeline().Document(ctx, hits[0].ID); err != nil || d.Title != "Bees" {
		t.Fatalf("the document after a restart: %+v, %v", d, err)
	}
	if err := again.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// Run runs the service until its context ends, then stops it.
func TestRunStopsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	data := filepath.Join(t.TempDir(), "data")
	// A file waiting in incoming/, old enough for the first scan.
	in := filepath.Join(data, pipeline.IncomingDir, "notes", "bees.md")
	if err := os.MkdirAll(filepath.Dir(in), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, []byte("# Bees\n\nHoney."), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(in, old, old); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ingest.Run(ctx, ingest.Config{DataDir: data, Logger: quiet}) }()
	processed := filepath.Join(data, pipeline.ProcessedDir, "notes", "bees.md")
	eventually.True(t, "Run to process the file waiting in incoming/", waitTimeout, func() (bool, string) {
		_, err := os.Stat(processed)
		return err == nil, fmt.Sprint(err)
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return after its context ended")
	}
}

// With a Broker, the service declares its topic and its relay delivers an
// event per document saved.
func TestServicePublishesEventsToItsBroker(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := t.TempDir()
	b, err := natsembed.Open(ctx, natsembed.Config{Dir: filepath.Join(root, "nats"), Broker: nats.Config{Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	svc, err := ingest.New(ctx, ingest.Config{DataDir: filepath.Join(root, "data"), Broker: b, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer svc.Stop(context.Background())
	var (
		mu     sync.Mutex
		events []pipeline.Event
	)
	go func() {
		_ = b.Consume(ctx, ingest.DefaultEventsTopic, broker.ConsumeOptions{Group: "test",
			DeadLetter: func(context.Context, broker.Delivery, string, error) error { return nil }},
			func(_ context.Context, d broker.Delivery) error {
				var e pipeline.Event
				if err := json.Unmarshal(d.Body, &e); err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				events = append(events, e)
				return nil
			})
	}()
	if _, _, err := svc.Pipeline().Ingest(ctx, "notes", []string{writeFile(t, "bees.md", "# Bees\n\nHoney.")}); err != nil {
		t.Fatal(err)
	}
	want := pipeline.DocumentID("notes/bees.md", "")
	eventually.True(t, "the saved document's event on "+ingest.DefaultEventsTopic, waitTimeout, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(events, func(e pipeline.Event) bool { return e.Type == pipeline.EventSaved && e.Document == want }),
			fmt.Sprintf("%+v", events)
	})
}

// A read-only service answers from a store and an index that exist, and
// makes and changes nothing; it does not start, and refuses a store
// without the service's tables.
func TestReadOnlyServiceMakesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	data := filepath.Join(t.TempDir(), "data")
	svc, err := ingest.New(ctx, ingest.Config{DataDir: data, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	before := tree(t, data)
	ro, err := ingest.New(ctx, ingest.Config{DataDir: data, ReadOnly: true, Logger: quiet})
	if err != nil {
		t.Fatalf("a read-only service on a data directory a service made: %v", err)
	}
	if err := ro.Start(ctx); err == nil {
		t.Error("a read-only service started")
	}
	if st, err := ro.Pipeline().Status(ctx, time.Minute); err != nil || st.Indexed != 0 {
		t.Errorf("Status of the read-only service: %+v, %v", st, err)
	}
	if err := ro.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if after := tree(t, data); !slices.Equal(before, after) {
		t.Fatalf("a read-only service changed the data directory: before %v, after %v", before, after)
	}

	missing := filepath.Join(t.TempDir(), "missing")
	if _, err := ingest.New(ctx, ingest.Config{DataDir: missing, ReadOnly: true, Logger: quiet}); err == nil {
		t.Error("a read-only service opened a data directory that does not exist")
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a read-only service made its data directory: %v", err)
	}
	bare := t.TempDir()
	teststore.SQLite(t, filepath.Join(bare, ingest.SQLiteFile))
	if _, err := ingest.New(ctx, ingest.Config{DataDir: bare, ReadOnly: true, Logger: quiet}); !errors.Is(err, ingest.ErrNotMigrated) {
		t.Errorf("a read-only service on weir's tables alone: %v, want ErrNotMigrated", err)
	}
}

// tree lists the paths under dir, with their sizes, sorted.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// A service over a store the caller opened leaves it open; the LLM
// extractor's breaker is the service's; a custom extractor is used.
func TestServiceTakesTheCallersStoreAndExtractor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	db, err := appdb.Open(ctx, appdb.Config{Path: filepath.Join(root, "mine.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ex := upper{}
	svc, err := ingest.New(ctx, ingest.Config{DataDir: filepath.Join(root, "data"), DB: db, Extractor: ex, ExtractorName: "upper", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Pipeline().Ingest(ctx, "notes", []string{writeFile(t, "bees.md", "# Bees\n\nHoney.")}); err != nil {
		t.Fatal(err)
	}
	id := pipeline.DocumentID("notes/bees.md", "")
	eventually.True(t, "the document saved by the custom extractor", waitTimeout, func() (bool, string) {
		d, err := svc.Pipeline().Document(ctx, id)
		return err == nil && d.Summary == "HONEY." && d.Extractor == "upper", fmt.Sprintf("%+v %v", d, err)
	})
	if err := svc.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.SQL.PingContext(ctx); err != nil {
		t.Fatalf("the caller's store was closed by Stop: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "data", ingest.SQLiteFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the service opened a store of its own beside the caller's: %v", err)
	}

	mine, err := breaker.New(breaker.Config{Name: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	llm, err := ingest.New(ctx, ingest.Config{DataDir: filepath.Join(root, "llm"), LLM: extract.LLMConfig{URL: "http://127.0.0.1:1/v1"},
		Breakers: []*breaker.Breaker{mine}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer llm.Stop(ctx)
	var names []string
	for _, b := range llm.Breakers() {
		names = append(names, b.Name())
	}
	if !slices.Equal(names, []string{"mine", ingest.IndexBreakerName, "extract-llm"}) {
		t.Fatalf("breakers %v, want mine, the index's and the LLM extractor's extract-llm", names)
	}
}

// upper is an extractor that summarises a document as its body's last
// line in capitals.
type upper struct{}

func (upper) Extract(_ context.Context, in extract.Input) (extract.Result, error) {
	lines := strings.Split(strings.TrimSpace(in.Text), "\n")
	return extract.Result{Summary: strings.ToUpper(lines[len(lines)-1]), Language: "en", Extractor: "upper"}, nil
}

// New refuses a config it cannot honour, naming the field, before it
// opens anything.
func TestConfigRefusesBadValues(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	refused(t, dir, "", []refusal{
		{ingest.Config{}, "DataDir is required"},
		{ingest.Config{DataDir: dir, DB: &appdb.DB{}, StoreURL: "postgres://x/y"}, "leave StoreURL and Schema empty"},
		{ingest.Config{DataDir: dir, Pipeline: pipeline.Config{DataDir: "x"}}, "Config.Pipeline's DB, DataDir"},
		{ingest.Config{DataDir: dir, Extractor: upper{}, LLM: extract.LLMConfig{URL: "http://x/v1"}}, "choose one"},
		{ingest.Config{DataDir: dir, OTLPEndpoint: "ftp://collector:4318"}, "OTLPEndpoint"},
		{ingest.Config{DataDir: dir, ReadOnly: true, Listen: "127.0.0.1:0"}, "ReadOnly"},
		{ingest.Config{DataDir: dir, Listen: "nonsense"}, "not host:port"},
		{ingest.Config{DataDir: dir, Listen: "127.0.0.1:http"}, "not a number from 0 to 65535"},
		{ingest.Config{DataDir: dir, Listen: "0.0.0.0:0"}, "set Config.AdminToken"},
		{ingest.Config{DataDir: dir, Listen: ":0", AdminToken: "short"}, "at least 16 bytes"},
		{ingest.Config{DataDir: dir, Listen: ":0", AdminToken: "admin-0123456789abcdef", ReadToken: " read-0123456789abcdef"}, "ReadToken must not begin or end with whitespace"},
	})
}

// refusal is a config New must refuse, and what its error must say.
type refusal struct {
	cfg  ingest.Config
	want string
}

// refused checks that New refuses each config with an error that says
// its want, and field when field is not empty, and that no refused config
// made the data directory dir.
func refused(t *testing.T, dir, field string, cases []refusal) {
	t.Helper()
	for _, c := range cases {
		_, err := ingest.New(context.Background(), c.cfg)
		if err == nil || !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v): %v, want an error naming %q and saying %q", c.cfg, err, field, c.want)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused config made the data directory: %v", err)
	}
}
