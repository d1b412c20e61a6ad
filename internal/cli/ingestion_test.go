package cli

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// writeDocs writes files into a folder of the test's own.
func writeDocs(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// ingest, search and status on the embedded default, and a poison file
// reported and written to failed/.
func TestIngestSearchStatus(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	docs := writeDocs(t, map[string]string{
		"notes/bees.txt":      "Keeping bees\n\nThe hive swarmed in May, and the queen moved to a new box.",
		"notes/sourdough.md":  "# Sourdough at home\n\nFeed the starter twice a day; the levain rises in six hours.",
		"notes/poison.txt":    "\x00\x01\x02 binary",
		"notes/MANIFEST.json": `{"not": "a document"}`,
	})
	code, stdout, stderr := run("ingest", "-data", data, "-source", "home", docs)
	want(t, "ingest", code, 0, stdout+stderr, "copied 3 files", "2 files processed, 1 failed", "skipped", "MANIFEST.json")

	code, stdout, stderr = run("search", "-data", data, "levain")
	want(t, "search levain", code, 0, stdout+stderr, "Sourdough at home", "home/notes/sourdough.md", "«levain»")
	code, stdout, _ = run("search", "-data", data, "-json", "hive")
	var hits []struct {
		Title  string `json:"title"`
		Source string `json:"source"`
	}
	if err := json.Unmarshal([]byte(stdout), &hits); code != 0 || err != nil || len(hits) != 1 || hits[0].Source != "home/notes/bees.txt" {
		t.Fatalf("search -json hive: %d, %v, %+v", code, err, hits)
	}
	code, stdout, _ = run("search", "-data", data, "nothing-matches-this")
	want(t, "search with no hit", code, 0, stdout, `no documents match "nothing-matches-this"`)

	code, stdout, stderr = run("status", "-data", data)
	want(t, "status", code, 0, stdout+stderr, "files:        processed 2, failed 1", "documents:    saved 2\n", "index:        2 entries", "dead letters: 1")
	if _, err := os.Stat(filepath.Join(data, "failed", "home", "notes", "poison.txt", "error.json")); err != nil {
		t.Fatalf("the poison file's error.json: %v", err)
	}

	// Ingesting the same files again changes nothing.
	code, stdout, stderr = run("ingest", "-data", data, "-source", "home", docs)
	want(t, "ingest again", code, 0, stdout+stderr, "copied 3 files")
	code, stdout, _ = run("status", "-data", data, "-json")
	var st struct {
		Documents map[string]int `json:"documents"`
		Indexed   int            `json:"indexed"`
	}
	if err := json.Unmarshal([]byte(stdout), &st); code != 0 || err != nil || st.Documents["saved"] != 2 || st.Indexed != 2 {
		t.Fatalf("status after a second ingest: %d, %v, %+v; want the same 2 documents", code, err, st)
	}
}

func TestIngestionCommandsRefuseBadInput(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nothing-here")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"search", "-data", missing, "x"}, 1, "no weir data at " + missing},
		{[]string{"status", "-data", missing}, 1, "no weir data at " + missing},
		{[]string{"reindex", "-data", missing}, 1, "no weir data at " + missing},
		{[]string{"search", "-data", missing}, 2, "want the words to search for"},
		{[]string{"search", "-data", missing, "-limit", "0", "x"}, 2, "-limit 0"},
		{[]string{"ingest", "-data", missing}, 2, "want at least one file or folder"},
		{[]string{"ingest", "-data", missing, filepath.Join(missing, "nope.txt")}, 1, "no such file"},
		{[]string{"ingest", "-data", missing, "-source", "../up", "x"}, 2, `-source "../up": want a plain folder name`},
		{[]string{"run", "-data", missing, "-max-attempts", "0"}, 2, "-max-attempts"},
		{[]string{"run", "-store", "mysql://x/y"}, 2, `unsupported scheme "mysql"`},
		{[]string{"status", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"run", "-data", missing, "-otlp-endpoint", "ftp://x"}, 2, `-otlp-endpoint "ftp://x"`},
	} {
		code, stdout, stderr := run(c.args...)
		if code != c.code || !strings.Contains(stdout+stderr, c.want) {
			t.Errorf("weir %v: exit %d, %q; want %d and %q", c.args, code, stdout+stderr, c.code, c.want)
		}
	}
	t.Setenv("WEIR_WORKERS", "many")
	if code, _, stderr := run("status", "-data", missing); code != 2 || !strings.Contains(stderr, `WEIR_WORKERS="many"`) {
		t.Fatalf("a bad WEIR_WORKERS: %d, %q", code, stderr)
	}
}

// With -llm-url the documents are extracted by the API, through its
// retries: a 429 with Retry-After is waited out, not a failure.
func TestIngestThroughAnLLMEndpoint(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-test" {
			http.Error(w, "wrong path or key", http.StatusBadRequest)
			return
		}
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		answer := `{"title":"Bees from the model","language":"en","key_terms":["hive","queen"],"summary":"About bees."}`
		fmt.Fprintf(w, `{"choices":[{"message":{"role":"assistant","content":%q}}]}`, answer)
	}))
	defer srv.Close()
	t.Setenv("WEIR_LLM_API_KEY", "sk-test")
	data := filepath.Join(t.TempDir(), "data")
	docs := writeDocs(t, map[string]string{"bees.txt": "The hive swarmed in May, and the queen moved to a new box."})
	code, stdout, stderr := run("ingest", "-data", data, "-llm-url", srv.URL+"/v1", docs)
	want(t, "ingest through the LLM", code, 0, stdout+stderr, "1 files processed, 0 failed; 1 documents saved")
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d calls to the LLM endpoint, want 2 (a 429, then the answer)", n)
	}
	code, stdout, _ = run("search", "-data", data, "-json", "hive")
	if code != 0 || !strings.Contains(stdout, "Bees from the model") {
		t.Fatalf("search after the LLM's extraction: %d, %s", code, stdout)
	}
	// weir status names the breaker as the admin API and the metrics do.
	code, stdout, stderr = run("status", "-data", data, "-llm-url", srv.URL+"/v1")
	want(t, "status with the LLM", code, 0, stdout+stderr, "breaker:      extract-llm closed")
}

// weir migrate makes the ingestion service's tables too, so that search
// and status work on a store no weir run has opened yet.
func TestMigrateMakesTheServiceTables(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if code, stdout, stderr := run("migrate", "-data", data); code != 0 {
		t.Fatalf("migrate: %d %s %s", code, stdout, stderr)
	}
	db, err := sql.Open("sqlite", filepath.Join(data, sqliteFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, table := range []string{"weir_jobs", "ingest_files", "ingest_documents", "ingest_reindex_runs", "ingest_failures"} {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n); err != nil {
			t.Errorf("after weir migrate, table %s: %v", table, err)
		}
	}
}
