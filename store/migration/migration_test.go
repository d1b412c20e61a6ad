package migration_test

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/weirhq/weir/store"
	"github.com/weirhq/weir/store/migration"
)

func TestLoadAndPending(t *testing.T) {
	fsys := fstest.MapFS{
		"m/0002_add_index.sql": {Data: []byte("CREATE INDEX i ON t (a);")},
		"m/0001_init.sql":      {Data: []byte("CREATE TABLE t (a int);")},
		"m/README.md":          {Data: []byte("not sql")},
	}
	ms, err := migration.Load(fsys, "m")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Version != 1 || ms[1].Name != "add_index" || migration.Latest(ms) != 2 {
		t.Fatalf("loaded %+v", ms)
	}
	for current, want := range map[int]int{0: 2, 1: 1, 2: 0} {
		p, err := migration.Pending(current, ms)
		if err != nil || len(p) != want {
			t.Errorf("Pending(%d) = %d migrations, %v; want %d", current, len(p), err, want)
		}
	}
	_, err = migration.Pending(3, ms)
	if !errors.Is(err, store.ErrSchemaTooNew) || !strings.Contains(err.Error(), "version 3") {
		t.Fatalf("Pending past latest = %v, want ErrSchemaTooNew naming the version", err)
	}
}

func TestLoadRefusesBadSets(t *testing.T) {
	tests := map[string]fstest.MapFS{
		"gap":      {"m/0001_a.sql": {}, "m/0003_c.sql": {}},
		"bad name": {"m/1_a.sql": {}},
		"empty":    {"m/notes.txt": {}},
	}
	for name, fsys := range tests {
		if _, err := migration.Load(fsys, "m"); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}
