package pipeline_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/ingest/pipeline"
)

// TestSymlinkSwappedInIsNotRead swaps, between the scan's check of a file
// (the walk's lstat: a regular file) and its opening, the file for a
// symbolic link to a secret outside the data directory, and a folder of
// incoming/ for a link to a folder outside it: neither secret is read,
// indexed or moved, and the scan says why it skipped them. Before, the
// scan read the file by its path, following the link, and the secret
// became searchable.
func TestSymlinkSwappedInIsNotRead(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("The vault combination is swordfish."), 0o600); err != nil {
		t.Fatal(err)
	}
	secretDir := filepath.Join(outside, "private")
	if err := os.MkdirAll(secretDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secretDir, "plans.txt"), []byte("The launch codes are marmalade."), 0o600); err != nil {
		t.Fatal(err)
	}
	drop(t, h.dir, "inbox/note.txt", []byte("An innocent note about tea."))
	drop(t, h.dir, "shared/plans.txt", []byte("Innocent plans for a picnic."))
	incoming := filepath.Join(h.dir, pipeline.IncomingDir)
	swapped := map[string]bool{}
	pipeline.SetBeforeOpen(h.svc, func(rel string) {
		if swapped[rel] {
			return
		}
		swapped[rel] = true
		switch rel {
		case "inbox/note.txt":
			p := filepath.Join(incoming, "inbox", "note.txt")
			if err := os.Remove(p); err != nil {
				t.Error(err)
			}
			if err := os.Symlink(secret, p); err != nil {
				t.Error(err)
			}
		case "shared/plans.txt":
			d := filepath.Join(incoming, "shared")
			if err := os.Rename(d, filepath.Join(h.root, "shared-moved")); err != nil {
				t.Error(err)
			}
			if err := os.Symlink(secretDir, d); err != nil {
				t.Error(err)
			}
		}
	})
	if _, err := h.svc.Scan(t.Context()); err != nil {
		t.Fatalf("Scan: %v", err)
	}
	if len(swapped) != 2 {
		t.Fatalf("the scan opened %d of the 2 files", len(swapped))
	}
	h.start()
	// Let the service run its scans and stages a while: nothing may come
	// of the links.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		for _, q := range []string{"swordfish", "marmalade"} {
			if got := searchIDs(t, h.svc, q); len(got) != 0 {
				t.Fatalf("%s is searchable: a file outside the data directory was read through a symbolic link", q)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := count(t, h.db, `SELECT count(*) FROM ingest_documents WHERE body LIKE '%swordfish%' OR body LIKE '%marmalade%'`); n != 0 {
		t.Fatalf("SQL holds %d documents of the secrets", n)
	}
	if n := len(jobsOf(t, h.db, pipeline.KindParse)); n != 0 {
		t.Errorf("%d parse jobs, want none: the swapped files were not opened", n)
	}
	for _, p := range []string{secret, filepath.Join(secretDir, "plans.txt")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("the secret %s was moved: %v", p, err)
		}
	}
	logs := h.logs.String()
	for _, rel := range []string{"inbox/note.txt", "shared/plans.txt"} {
		if !strings.Contains(logs, fmt.Sprintf("path=%s", rel)) || !strings.Contains(logs, "enqueue a file of incoming/") {
			t.Errorf("no log of the scan skipping %s", rel)
		}
	}
}
