package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weirhq/weir/broker/nats"
	"github.com/weirhq/weir/broker/nats/natstest"
	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/ingest/search/pgsearch"
	"github.com/weirhq/weir/ingest/search/searchtest"
	"github.com/weirhq/weir/internal/crashpoint"
	"github.com/weirhq/weir/internal/eventually"
	"github.com/weirhq/weir/internal/testenv"
)

// scaleStatus is what GET /api/status and weir status -json answer, in
// the part the scale-out test reads.
type scaleStatus struct {
	Files       map[string]int            `json:"files"`
	Documents   map[string]int            `json:"documents"`
	Indexed     int                       `json:"indexed"`
	IndexErrors int                       `json:"index_errors"`
	Jobs        map[string]map[string]int `json:"jobs"`
	DeadLetters int                       `json:"dead_letters"`
	LastReindex *struct {
		Status  string `json:"status"`
		Trigger string `json:"trigger"`
		Missing int    `json:"missing"`
		Stale   int    `json:"stale"`
		Extra   int    `json:"extra"`
	} `json:"last_reindex"`
}

// jobs counts the jobs of a kind, in every state.
func (s scaleStatus) jobs(kind string) int {
	n := 0
	for _, c := range s.Jobs[kind] {
		n += c
	}
	return n
}

// TestThreeProcessesOneService runs three `weir run` processes, standing
// for three machines: three data directories, and nothing shared but one
// PostgreSQL schema (the jobs, the documents and the search index), one
// set of containers for incoming/, processed/ and failed/ (file:// URLs),
// and one NATS stream for the events. One process is killed with SIGKILL
// at a crash point after a save, mid-run. Then: each file dropped is
// parsed once and processed once, each document saved and indexed once,
// found from every process's API, and published; weir status on each data
// directory shows the whole service; and a reindex asked of one process
// repairs the shared index that was damaged on purpose.
func TestThreeProcessesOneService(t *testing.T) {
	skipShort(t)
	pgURL := testenv.Postgres(t)
	natsURL := testenv.NATS(t)
	bin := buildWeir(t)
	ctx := context.Background()

	b := make([]byte, 6)
	_, _ = rand.Read(b)
	suffix := hex.EncodeToString(b)
	schema, topic := "e2e_scale_"+suffix, "e2e_scale_"+suffix
	pool, err := pgxpool.New(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
		pool.Close()
	})
	t.Cleanup(func() { natstest.DeleteStreams(t, natsURL, nats.DefaultStreamPrefix+topic) })

	// The shared containers.
	shared := t.TempDir()
	var containers []string
	for _, name := range []string{"incoming", "processed", "failed"} {
		dir := filepath.Join(shared, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		containers = append(containers, "-"+name+"-url", "file://"+dir)
	}
	common := append([]string{"-store", pgURL, "-schema", schema, "-broker", natsURL, "-events-topic", topic,
		"-watch-every", "100ms", "-workers", "2", "-reindex-schedule", "never"}, containers...)

	type node struct {
		id, data, addr string
		p              *process
	}
	nodes := make([]*node, 3)
	for i, id := range []string{"scale-a", "scale-b", "scale-c"} {
		n := &node{id: id, data: filepath.Join(t.TempDir(), "data"), addr: freeAddr(t)}
		var env []string
		if i == 1 {
			// b dies at its 5th save: after the save's commit, before
			// its file moves.
			env = []string{crashpoint.Env + "=" + crashpoint.PipelineAfterSave + ":5"}
		}
		n.p = start(t, bin, append([]string{"run", "-data", n.data, "-listen", n.addr, "-id", id}, common...), env...)
		t.Cleanup(func() { _ = n.p.stop() })
		nodes[i] = n
	}
	for _, n := range nodes {
		waitHTTP(t, n.addr, 30*time.Second)
	}

	// Drop the files: 3 sources of 30, each document with the word
	// harbour and a word of its own.
	const files = 90
	want := map[string]bool{}
	for i := range files {
		src := fmt.Sprintf("source%d", i%3)
		dir := filepath.Join(shared, "incoming", src)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("doc-%02d.txt", i)
		writeAtomic(t, filepath.Join(dir, name), fmt.Sprintf("Document %d is about the harbour pilots of Leith, and the word marker%02d.", i, i))
		want[src+"/"+name] = true
	}

	// b dies mid-run, killed at its crash point.
	if err := nodes[1].p.wait(2 * time.Minute); !crashpoint.Killed(err) {
		t.Fatalf("b ended with %v, want SIGKILL at its crash point; its log:\n%s", err, nodes[1].p.log())
	}
	t.Logf("b killed at its 5th save; saved so far: %d", apiStatus(t, nodes[0].addr).Documents["saved"])

	// a and c finish the work, b's jobs included once their leases end.
	var st scaleStatus
	if why, ok := eventually.Wait(3*time.Minute, func() (bool, string) {
		st = apiStatus(t, nodes[0].addr)
		return st.Documents["saved"] == files && st.Indexed == files && st.Files["processed"] == files, fmt.Sprintf("%+v", st)
	}); !ok {
		t.Fatalf("not done after 3 minutes: %s\na's log:\n%s\nc's log:\n%s", why, nodes[0].p.log(), nodes[2].p.log())
	}
	if st.jobs(pipeline.KindParse) != files || st.jobs(pipeline.KindSave) != files || st.DeadLetters != 0 || st.IndexErrors != 0 {
		t.Errorf("jobs %v, %d dead letters, %d index errors; want one parse and one save job per file, none dead", st.Jobs, st.DeadLetters, st.IndexErrors)
	}
	if left := files0(t, filepath.Join(shared, "incoming")); len(left) > 0 {
		t.Errorf("files left in incoming: %v", left)
	}
	if got := files0(t, filepath.Join(shared, "processed")); len(got) != files {
		t.Errorf("%d files in processed, want %d: %v", len(got), files, got)
	}

	// b comes back with its id: every process's API finds every document
	// once.
	nodes[1].p = start(t, bin, append([]string{"run", "-data", nodes[1].data, "-listen", nodes[1].addr, "-id", nodes[1].id}, common...))
	t.Cleanup(func() { _ = nodes[1].p.stop() })
	waitHTTP(t, nodes[1].addr, 30*time.Second)
	for _, n := range nodes {
		checkSearch(t, n.addr, "harbour", want)
		if hits := apiSearch(t, n.addr, "marker42"); len(hits) != 1 || hits[0].Source != "source0/doc-42.txt" {
			t.Errorf("%s: marker42 found %+v, want source0/doc-42.txt alone", n.id, hits)
		}
	}

	// weir status on each data directory shows the whole service.
	for _, n := range nodes {
		out, err := exec.Command(bin, append([]string{"status", "-json", "-data", n.data}, common[:4]...)...).Output()
		if err != nil {
			t.Fatalf("weir status on %s: %v", n.id, err)
		}
		var ws scaleStatus
		if err := json.Unmarshal(out, &ws); err != nil {
			t.Fatal(err)
		}
		if ws.Documents["saved"] != files || ws.Files["processed"] != files || ws.Indexed != files {
			t.Errorf("weir status on %s: %+v; want the whole service's %d files processed, documents saved and indexed", n.id, ws, files)
		}
	}

	// Every saved document's event reached the stream.
	checkEvents(t, natsURL, topic, want)

	// Damage the shared index: 10 entries gone, 5 stale, 1 stray; a
	// reindex asked of c repairs it, as every process sees.
	ix, err := pgsearch.Open(ctx, pgsearch.Config{Pool: pool, Schema: schema, MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := ix.Count(ctx); err != nil || n != files {
		t.Fatalf("the shared index: %d entries, %v; want %d", n, err, files)
	}
	if _, err := searchtest.MakeDrift(ctx, ix, 10, 5, "ffff-stray"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+nodes[2].addr+"/api/admin/reindex", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /api/admin/reindex: %s, want 202", resp.Status)
	}
	if why, ok := eventually.Wait(time.Minute, func() (bool, string) {
		st = apiStatus(t, nodes[0].addr)
		r := st.LastReindex
		return r != nil && r.Trigger == pipeline.TriggerAPI && r.Status == "done", fmt.Sprintf("%+v", r)
	}); !ok {
		t.Fatalf("the reindex did not finish: %s", why)
	}
	if r := st.LastReindex; r.Missing != 10 || r.Stale != 5 || r.Extra != 1 || st.Indexed != files {
		t.Fatalf("the reindex found %+v, and the index holds %d; want 10 missing, 5 stale, 1 extra, %d entries", r, st.Indexed, files)
	}
	for _, n := range nodes {
		checkSearch(t, n.addr, "harbour", want)
	}
	ix.Close()
	t.Logf("%d files by three processes, one killed mid-run: each processed once, searchable from each; the reindex repaired 10 missing, 5 stale, 1 stray", files)
}

// apiStatus is GET /api/status.
func apiStatus(t *testing.T, addr string) scaleStatus {
	t.Helper()
	var st scaleStatus
	getJSON(t, "http://"+addr+"/api/status", &st)
	return st
}

// checkSearch fails the test unless a search on addr finds exactly the
// sources of want, each once.
func checkSearch(t *testing.T, addr, q string, want map[string]bool) {
	t.Helper()
	got := map[string]int{}
	for _, h := range apiSearch(t, addr, q) {
		got[h.Source]++
	}
	for src := range want {
		if got[src] != 1 {
			t.Errorf("%s: %s found %d times, want once", addr, src, got[src])
		}
	}
	for src := range got {
		if !want[src] {
			t.Errorf("%s: found %s, which no file dropped holds", addr, src)
		}
	}
}

// files0 lists the regular files under dir, relative to it, sorted,
// but the .attrs files beside them in which a file:// container keeps a
// blob's attributes.
func files0(t *testing.T, dir string) []string {
	t.Helper()
	out := slices.DeleteFunc(files(t, dir), func(name string) bool { return strings.HasSuffix(name, ".attrs") })
	slices.Sort(out)
	return out
}

// checkEvents reads the topic's events until each document of want has
// its saved event (at least once: delivery is at least once).
func checkEvents(t *testing.T, natsURL, topic string, want map[string]bool) {
	t.Helper()
	saved := map[string]bool{}
	consumeEvents(t, natsURL, topic, "e2e-scale", func(_ string, e pipeline.Event) bool {
		if e.Type == pipeline.EventSaved {
			saved[e.Path] = true
		}
		return len(saved) == len(want)
	})
	for src := range want {
		if !saved[src] {
			t.Errorf("no saved event for %s (%d events of %d)", src, len(saved), len(want))
		}
	}
}
