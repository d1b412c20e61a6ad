package fts

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/weirhq/weir/ingest/search"
)

// TestNewIndexFilesAreOwnerOnly checks that a new index file, and the
// write-ahead log and shared memory SQLite keeps beside it, are readable
// by their owner only, whatever the umask allows: they hold the
// documents' text. A file recreated for another schema version is too.
func TestNewIndexFilesAreOwnerOnly(t *testing.T) {
	old := syscall.Umask(0o022) // the usual umask, which lets others read 0644
	defer syscall.Umask(old)
	dir := t.TempDir()
	path := filepath.Join(dir, "index.db")
	check := func(when string) {
		t.Helper()
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			if got := fi.Mode().Perm(); got != 0o600 {
				t.Errorf("%s: %s has mode %#o, want 0600", when, filepath.Base(p), got)
			}
		}
	}
	ix, err := Open(context.Background(), Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	put(t, ix, search.Doc{ID: "a", Body: "private text"})
	check("a new index")
	ix.Close()

	// Another schema version: the file is deleted and created again.
	writeDB(t, path+".old", `CREATE TABLE docs (id TEXT PRIMARY KEY)`, fmt.Sprintf(`PRAGMA application_id = %d`, applicationID), `PRAGMA user_version = 99`)
	if err := os.Rename(path+".old", path); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path + "-wal", path + "-shm"} {
		os.Remove(p)
	}
	ix, err = Open(context.Background(), Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if !ix.Rebuilt() {
		t.Fatal("the index of another schema version was not recreated")
	}
	put(t, ix, search.Doc{ID: "b", Body: "more private text"})
	check("a recreated index")
}
