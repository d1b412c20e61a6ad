package sqlitefile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestCreateFileOwnerOnly: a missing file is created empty with mode
// 0600 whatever the umask; an existing file is left as it is.
func TestCreateFileOwnerOnly(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()
	path := filepath.Join(dir, "weir.db")
	if err := CreateFile("sqlite", path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Size() != 0 {
		t.Errorf("new file: mode %#o, %d bytes; want 0600, empty", fi.Mode().Perm(), fi.Size())
	}

	existing := filepath.Join(dir, "kept.db")
	if err := os.WriteFile(existing, []byte("data"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := CreateFile("sqlite", existing); err != nil {
		t.Fatal(err)
	}
	fi, err = os.Stat(existing)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 || fi.Size() != 4 {
		t.Errorf("existing file: mode %#o, %d bytes; want it untouched (0640, 4 bytes)", fi.Mode().Perm(), fi.Size())
	}

	if err := CreateFile("sqlite", filepath.Join(dir, "missing", "weir.db")); err == nil {
		t.Error("CreateFile in a missing directory returned no error")
	}
}
