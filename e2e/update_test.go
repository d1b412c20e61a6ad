package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/weirhq/weir/internal/crashpoint"
	"github.com/weirhq/weir/internal/eventually"
)

// TestRestartUpdateAndFileModes runs `weir run` with no -id (the default
// worker id), kills it with SIGKILL after its third save, while it holds
// running jobs, and starts it again, still with no -id: the restart takes
// the killed run's jobs back at once and finishes well within a lease (a
// minute). Then a file is updated in incoming/: its new version replaces
// its document, and only the new text is searchable. The database and
// the index, and SQLite's files beside them, are readable by their owner
// only.
func TestRestartUpdateAndFileModes(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	bin := buildWeir(t)
	data := filepath.Join(t.TempDir(), "data")
	addr := freeAddr(t)
	args := []string{"run", "-data", data, "-listen", addr, "-watch-every", "100ms", "-workers", "2"}
	notes := map[string]string{}
	for i := range 12 {
		notes[fmt.Sprintf("notes/n%02d.txt", i)] = fmt.Sprintf("Note %d is about the heron at the weir, and the tide tables of week %d.", i, i)
	}
	write := func(rel, text string) {
		t.Helper()
		dst := filepath.Join(data, "incoming", filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst+".tmp", []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(dst+".tmp", dst); err != nil {
			t.Fatal(err)
		}
	}

	first := start(t, bin, args, crashpoint.Env+"="+crashpoint.PipelineAfterSave+":2")
	waitHTTP(t, addr, 20*time.Second)
	for rel, text := range notes {
		write(rel, text)
	}
	if err := first.wait(time.Minute); !crashpoint.Killed(err) {
		t.Fatalf("the first run ended with %v, want SIGKILL at its crash point; its log:\n%s", err, first.log())
	}

	began := time.Now()
	second := start(t, bin, args)
	waitHTTP(t, addr, 20*time.Second)
	if why, ok := eventually.Wait(40*time.Second, func() (bool, string) {
		st := status(t, addr)
		return st.Documents["saved"] == len(notes) && st.Indexed == len(notes), fmt.Sprintf("%+v", st)
	}); !ok {
		t.Fatalf("the restart has not finished after %v (%s): it waits for the killed run's leases; log:\n%s", time.Since(began), why, second.log())
	}
	t.Logf("the restart finished the killed run's work in %v", time.Since(began).Round(10*time.Millisecond))

	// An update of a file replaces its document.
	write("notes/n03.txt", "Note 3 now tells of the kingfisher by the sluice.")
	if _, ok := eventually.Wait(20*time.Second, func() (bool, string) { return len(apiSearch(t, addr, "kingfisher")) == 1, "" }); !ok {
		t.Fatalf("the new version is not searchable; log:\n%s", second.log())
	}
	if hits := apiSearch(t, addr, `"week 3"`); len(hits) != 0 {
		t.Errorf("the old version is still searchable: %+v", hits)
	}
	if hits := apiSearch(t, addr, "heron"); len(hits) != len(notes)-1 {
		t.Errorf("heron finds %d documents, want %d: one per file", len(hits), len(notes)-1)
	}
	if st := status(t, addr); st.Documents["saved"] != len(notes) {
		t.Errorf("%d documents saved after the update, want %d: an update adds none", st.Documents["saved"], len(notes))
	}
	for _, p := range []string{"weir.db", "weir.db-wal", "weir.db-shm", "index/search.db", "index/search.db-wal", "index/search.db-shm"} {
		fi, err := os.Stat(filepath.Join(data, filepath.FromSlash(p)))
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if got := fi.Mode().Perm(); got != 0o600 {
			t.Errorf("%s has mode %#o, want 0600", p, got)
		}
	}
	if err := second.stop(); err != nil {
		t.Fatalf("stop: %v; log:\n%s", err, second.log())
	}
}
