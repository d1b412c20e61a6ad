package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// -index refuses an unknown index, and an index not shared as widely as
// its store, naming the flag, before anything is opened or made.
func TestIndexFlagRefusesUnsafeCombinations(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"run", "-store", "postgres://db.invalid/weir", "-index", "fts"},
			[]string{`-index "fts" with a PostgreSQL store (-store)`, "each process's file would hold only the documents it indexed"}},
		{[]string{"run", "-index", "postgres"},
			[]string{`-index "postgres" with the SQLite store (no -store)`, "reconciliation removes from the index every document its own store lacks"}},
		{[]string{"run", "-index", "postgres://weir:s3cret-pass@db.invalid/search"},
			[]string{"-index", "the SQLite store (no -store)"}},
		{[]string{"status", "-index", "elastic"},
			[]string{`-index "elastic": want fts, postgres or a postgres:// URL`}},
		{[]string{"reindex", "-store", "postgres://db.invalid/weir", "-index", "http://search:9200"},
			[]string{"-index", "not a postgres:// or postgresql:// URL"}},
	} {
		code, stdout, stderr := run(append(c.args, "-data", data)...)
		want(t, strings.Join(c.args, " "), code, 2, stdout+stderr, c.want...)
		if strings.Contains(stdout+stderr, "s3cret") {
			t.Errorf("%s: the output shows the password:\n%s", strings.Join(c.args, " "), stdout+stderr)
		}
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("a refused -index made the data directory: %v", err)
	}
}
