// Package e2e runs the weir binary end to end on the sample corpus.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/ingest/corpusgen"
	"github.com/weirhq/weir/ingest/pipeline"
	"github.com/weirhq/weir/ingest/search/fts"
	"github.com/weirhq/weir/internal/crashpoint"
	"github.com/weirhq/weir/internal/eventually"
)

// TestIngestKillRestartReindex runs `weir run` on the sample corpus
// dropped into incoming/, kills it with SIGKILL at a crash point after
// its 100th saved document (after the save committed, before the file
// moved), starts it again, and checks: every good document is searchable
// exactly once, every poison file sits in failed/ with its error.json,
// every other file is in processed/ and none is left in incoming/; then
// it damages the index on purpose and `weir reindex` repairs it.
func TestIngestKillRestartReindex(t *testing.T) {
	root := repoRoot(t)
	bin := buildWeir(t)
	var manifest corpusgen.Manifest
	b, err := os.ReadFile(filepath.Join(root, "corpus", corpusgen.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &manifest); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "data")
	addr := freeAddr(t)
	runArgs := []string{"run", "-data", data, "-listen", addr, "-id", "e2e", "-watch-every", "100ms", "-workers", "2"}

	// Drop the corpus into incoming/corpus/ while the service runs, which
	// dies at its 100th save.
	first := start(t, bin, runArgs, crashpoint.Env+"="+crashpoint.PipelineAfterSave+":100")
	waitHTTP(t, addr, 20*time.Second)
	want := copyCorpus(t, filepath.Join(root, "corpus"), filepath.Join(data, "incoming", "corpus"), manifest)
	if err := first.wait(2 * time.Minute); !crashpoint.Killed(err) {
		t.Fatalf("the first run ended with %v, want SIGKILL at its crash point; its log:\n%s", err, first.log())
	}
	saved := countLines(t, bin, data)
	t.Logf("killed at the crash point with %d documents saved of %d", saved, len(want.docs))
	if saved < 100 || saved >= len(want.docs) {
		t.Fatalf("%d documents saved at the kill; want at least 100 and fewer than %d (killed midway)", saved, len(want.docs))
	}

	// Restart: the same id takes its jobs back at once.
	second := start(t, bin, runArgs)
	waitHTTP(t, addr, 20*time.Second)
	if why, ok := eventually.Wait(3*time.Minute, func() (bool, string) {
		st := status(t, addr)
		return st.Documents["saved"] == len(want.docs) && st.Indexed == len(want.docs) && st.Files["failed"] == len(want.poison), fmt.Sprintf("%+v", st)
	}); !ok {
		t.Fatalf("not done after 3 minutes: %s; log:\n%s", why, second.log())
	}
	// Searchable through the API: one hit per document for a word of
	// one theme.
	hits := apiSearch(t, addr, "telescope")
	seen := map[string]bool{}
	for _, h := range hits {
		if seen[h.Source] {
			t.Fatalf("search: %s found twice", h.Source)
		}
		seen[h.Source] = true
	}
	if len(hits) == 0 {
		t.Fatal("search for telescope found nothing")
	}
	if err := second.stop(); err != nil {
		t.Fatalf("stop: %v; log:\n%s", err, second.log())
	}

	// Every good document in the index exactly once, under its source.
	idx := openIndex(t, data)
	entries := allSources(t, idx)
	idx.Close()
	for src := range want.docs {
		if entries[src] != 1 {
			t.Errorf("%s is in the index %d times, want once", src, entries[src])
		}
	}
	for src, n := range entries {
		if !want.docs[src] {
			t.Errorf("the index holds %s (%d times), which is no good document of the corpus", src, n)
		}
	}
	// Each poison file in failed/ with its error.json.
	for _, p := range want.poison {
		dir := filepath.Join(data, "failed", "corpus", filepath.FromSlash(p))
		// The design's record: the file's SHA-256 job id, its blob path,
		// attempts, last error, and when, in UTC to the second.
		var ef struct {
			JobID     string `json:"jobId"`
			BlobPath  string `json:"blobPath"`
			Attempts  int    `json:"attempts"`
			LastError string `json:"lastError"`
			FailedAt  string `json:"failedAt"`
		}
		b, err := os.ReadFile(filepath.Join(dir, "error.json"))
		if err != nil {
			t.Errorf("poison %s: %v", p, err)
			continue
		}
		content, rerr := os.ReadFile(filepath.Join(dir, filepath.Base(p)))
		jobID := pipeline.FileID("corpus/"+p, pipeline.ETag(content))
		if err := json.Unmarshal(b, &ef); err != nil || rerr != nil || ef.JobID != jobID || ef.BlobPath != "incoming/corpus/"+p || ef.Attempts < 1 || ef.LastError == "" {
			t.Errorf("poison %s: error.json %s (%v, %v), want job id %s", p, b, err, rerr, jobID)
		} else if failedAt, terr := time.Parse(time.RFC3339, ef.FailedAt); terr != nil || !strings.HasSuffix(ef.FailedAt, "Z") || failedAt.Nanosecond() != 0 {
			t.Errorf("poison %s: failedAt %q, want RFC 3339 in UTC to the second (%v)", p, ef.FailedAt, terr)
		}
		if _, err := os.Stat(filepath.Join(dir, filepath.Base(p))); err != nil {
			t.Errorf("poison %s: the original is not beside its error.json: %v", p, err)
		}
	}
	// Nothing left in incoming/; every good file in processed/.
	if left := files(t, filepath.Join(data, "incoming")); len(left) > 0 {
		t.Errorf("files left in incoming/: %v", left)
	}
	if got := len(files(t, filepath.Join(data, "processed"))); got != want.files {
		t.Errorf("%d files in processed/, want %d", got, want.files)
	}
	if t.Failed() {
		t.FailNow()
	}

	// Damage the index on purpose, then repair it.
	idx = openIndex(t, data)
	var drop []string
	for _, e := range entryIDs(t, idx) {
		if len(drop) < 40 {
			drop = append(drop, e)
		}
	}
	if n, err := idx.Delete(context.Background(), drop...); err != nil || n != len(drop) {
		t.Fatalf("delete from the index: %d, %v", n, err)
	}
	idx.Close()
	out, err := exec.Command(bin, "reindex", "-data", data).CombinedOutput()
	if err != nil {
		t.Fatalf("weir reindex: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("%d missing", len(drop))) || !strings.Contains(string(out), fmt.Sprintf("%d repaired", len(drop))) {
		t.Fatalf("weir reindex said:\n%s\nwant %d missing and repaired", out, len(drop))
	}
	idx = openIndex(t, data)
	defer idx.Close()
	if n, err := idx.Count(context.Background()); err != nil || n != len(want.docs) {
		t.Fatalf("after the reindex the index holds %d entries (%v), want %d", n, err, len(want.docs))
	}
	t.Logf("%d documents searchable once each, %d poison files in failed/, %d entries deleted and restored by weir reindex",
		len(want.docs), len(want.poison), len(drop))
}

// skipShort skips the test under -short, which runs no binary: the test
// runs weir, and what.
func skipShort(t *testing.T, what ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip(strings.Join(append([]string{"builds and runs the binary"}, what...), " and "))
	}
}

// buildWeir builds the weir binary into a folder of the test's own (see
// skipShort).
func buildWeir(t *testing.T) string {
	t.Helper()
	skipShort(t)
	bin := filepath.Join(t.TempDir(), "weir")
	build := exec.Command("go", "build", "-o", bin, "./cmd/weir")
	build.Dir = repoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// expected is what the corpus should become.
type expected struct {
	docs   map[string]bool // the sources of the good documents: corpus/<path>[#n]
	poison []string        // the poison files' paths in the corpus
	files  int             // good files
}

// copyCorpus copies the corpus's documents (not its manifest) to dir, each
// through a temporary name, and returns what they should become.
func copyCorpus(t *testing.T, src, dir string, m corpusgen.Manifest) expected {
	t.Helper()
	want := expected{docs: map[string]bool{}}
	for _, f := range m.Files {
		b, err := os.ReadFile(filepath.Join(src, filepath.FromSlash(f.Path)))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst+".tmp", b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(dst+".tmp", dst); err != nil {
			t.Fatal(err)
		}
		switch {
		case f.Kind == corpusgen.KindPoison:
			want.poison = append(want.poison, f.Path)
		case f.Kind == corpusgen.KindMbox:
			want.files++
			for n := 1; n <= f.Messages; n++ {
				want.docs[fmt.Sprintf("corpus/%s#%d", f.Path, n)] = true
			}
		default:
			want.files++
			want.docs["corpus/"+f.Path] = true
		}
	}
	return want
}

// process is a running weir.
type process struct {
	cmd      *exec.Cmd
	out      *bytes.Buffer
	done     chan error
	stopOnce sync.Once
	stopErr  error
}

func start(t *testing.T, bin string, args []string, env ...string) *process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	p := &process{cmd: cmd, out: &bytes.Buffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})
	return p
}

func (p *process) wait(d time.Duration) error {
	select {
	case err := <-p.done:
		return err
	case <-time.After(d):
		return errors.New("still running")
	}
}

// stop stops the process with SIGTERM and waits for it, up to a minute;
// once stopped, it returns the first stop's answer again.
func (p *process) stop() error {
	p.stopOnce.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		p.stopErr = p.wait(time.Minute)
	})
	return p.stopErr
}

// weirRun builds weir and starts `weir run` with the worker id and args,
// on a data directory and a free address of the test's own, stopped at the
// test's end; it returns once the API answers (see skipShort).
func weirRun(t *testing.T, id string, args ...string) (p *process, data, addr string) {
	t.Helper()
	bin := buildWeir(t)
	data, addr = filepath.Join(t.TempDir(), "data"), freeAddr(t)
	p = start(t, bin, append([]string{"run", "-data", data, "-listen", addr, "-id", id}, args...))
	t.Cleanup(func() { _ = p.stop() })
	waitHTTP(t, addr, 20*time.Second)
	return p, data, addr
}

func (p *process) log() string {
	s := p.out.String()
	if len(s) > 6000 {
		s = "…" + s[len(s)-6000:]
	}
	return s
}

// serviceStatus is what GET /api/status answers, in part.
type serviceStatus struct {
	Files     map[string]int `json:"files"`
	Documents map[string]int `json:"documents"`
	Indexed   int            `json:"indexed"`
}

func status(t *testing.T, addr string) serviceStatus {
	t.Helper()
	var st serviceStatus
	getJSON(t, "http://"+addr+"/api/status", &st)
	return st
}

type hit struct {
	ID     string `json:"id"`
	Source string `json:"source"`
}

func apiSearch(t *testing.T, addr, q string) []hit {
	t.Helper()
	var res struct {
		Hits []hit `json:"hits"`
	}
	getJSON(t, "http://"+addr+"/api/search?limit=100&q="+url.QueryEscape(q), &res)
	return res.Hits
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", u, resp.Status, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v: %s", u, err, b)
	}
}

// countLines reads how many documents are saved, with weir status -json.
func countLines(t *testing.T, bin, data string) int {
	t.Helper()
	out, err := exec.Command(bin, "status", "-json", "-data", data).Output()
	if err != nil {
		t.Fatalf("weir status: %v", err)
	}
	var st serviceStatus
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatal(err)
	}
	return st.Documents["saved"]
}

func waitHTTP(t *testing.T, addr string, d time.Duration) {
	t.Helper()
	eventually.True(t, "weir run answering /readyz on "+addr, d, func() (bool, string) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
}

func openIndex(t *testing.T, data string) *fts.Index {
	t.Helper()
	idx, err := fts.Open(context.Background(), fts.Config{Path: filepath.Join(data, "index", "search.db")})
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// allSources counts the index's entries by source.
func allSources(t *testing.T, idx *fts.Index) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, id := range entryIDs(t, idx) {
		d, err := idx.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		out[d.Source]++
	}
	return out
}

func entryIDs(t *testing.T, idx *fts.Index) []string {
	t.Helper()
	var ids []string
	after := ""
	for {
		es, err := idx.Entries(context.Background(), after, 500)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			ids = append(ids, e.ID)
		}
		if len(es) < 500 {
			return ids
		}
		after = es[len(es)-1].ID
	}
}

// files lists the regular files under dir, relative to it.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return out
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// repoRoot is the module's root, above this file.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Dir(filepath.Dir(file))
}
