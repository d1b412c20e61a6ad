package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/teststore"
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

// A search database of its own that does not answer stops the command at
// start with an error naming -index, without the URL's password.
func TestIndexFlagUnreachableDatabase(t *testing.T) {
	t.Parallel()
	st, url := teststore.PostgresStore(t, "weir_cli_index_", 2)
	code, stdout, stderr := run("reindex", "-store", url, "-schema", st.Schema(), "-data", t.TempDir(),
		"-index", "postgres://weir:s3cret-pass@127.0.0.1:1/search?connect_timeout=5")
	want(t, "reindex with an unreachable search database", code, 2, stdout+stderr, "-index postgres://weir:", "the search database does not answer")
	if strings.Contains(stdout+stderr, "s3cret") {
		t.Errorf("the output shows the password:\n%s", stdout+stderr)
	}
}
