package cli

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir/internal/teststore"
)

// readOnlyCommands are the commands that only read, with their arguments
// after the store flags.
var readOnlyCommands = [][]string{
	{"status"}, {"search", "bees"}, {"dlq", "list"}, {"dlq", "show", "1"}, {"dlq", "export"}, {"jobs", "list"}, {"jobs", "show", "1"},
}

// tree lists the paths under dir.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if !strings.HasSuffix(rel, "-wal") && !strings.HasSuffix(rel, "-shm") { // SQLite's own, while open
			paths = append(paths, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

// The read-only commands make no data directory, no file or folder in one,
// and no table: on a missing directory, on one weir migrate made, and on
// a store without the ingestion service's tables.
func TestReadOnlyCommandsMakeNothing(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing")
	for _, args := range readOnlyCommands {
		code, stdout, stderr := run(append(args, "-data", missing)...)
		want(t, strings.Join(args, " ")+" on a missing data directory", code, 1, stdout+stderr, "no weir data at "+missing, "weir migrate")
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("a read-only command made the data directory: %v", err)
	}

	// A data directory weir migrate made holds weir.db alone; status and
	// search answer from it and leave it so.
	data := filepath.Join(t.TempDir(), "data")
	if code, stdout, stderr := run("migrate", "-data", data); code != 0 {
		t.Fatalf("migrate: %d %s %s", code, stdout, stderr)
	}
	before := tree(t, data)
	code, stdout, stderr := run("status", "-data", data)
	want(t, "status after migrate", code, 0, stdout+stderr, "documents:    none", "index:        0 entries")
	code, stdout, stderr = run("search", "bees", "-data", data)
	want(t, "search after migrate", code, 1, stdout+stderr, "no search index at "+filepath.Join(data, "index", "search.db"))
	for _, args := range readOnlyCommands {
		run(append(args, "-data", data)...)
	}
	if after := tree(t, data); !slices.Equal(before, after) {
		t.Fatalf("read-only commands changed the data directory: before %v, after %v", before, after)
	}

	// A store with weir's tables but not the service's: status says to
	// migrate, and makes none.
	bare := t.TempDir()
	teststore.SQLite(t, filepath.Join(bare, sqliteFileName))
	for _, args := range [][]string{{"status"}, {"search", "bees"}} {
		code, stdout, stderr := run(append(args, "-data", bare)...)
		want(t, strings.Join(args, " ")+" on a store without the service's tables", code, 1, stdout+stderr, "has no table ingest_migrations", "run weir migrate")
	}
	if paths := tree(t, bare); !slices.Equal(paths, []string{".", sqliteFileName}) {
		t.Fatalf("read-only commands wrote into a bare store's directory: %v", paths)
	}
	code, stdout, _ = run("jobs", "list", "-data", bare)
	want(t, "jobs list on weir's tables alone", code, 0, stdout, "no jobs")
}

// On PostgreSQL the read-only commands make no schema and no table: a
// schema that does not exist, or that holds no weir tables, is reported,
// with weir migrate to run.
func TestReadOnlyCommandsMakeNoSchema(t *testing.T) {
	t.Parallel()
	s, url := teststore.PostgresStore(t, "weir_cli_ro_", 2)
	ctx := context.Background()
	schemaExists := func(name string) bool {
		var ok bool
		if err := s.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, name).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	tables := func(name string) int {
		var n int
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = $1`, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	none := s.Schema() + "_none"
	empty := s.Schema() + "_empty"
	t.Cleanup(func() {
		for _, sc := range []string{none, empty} {
			_, _ = s.Pool().Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{sc}.Sanitize()+" CASCADE")
		}
	})
	if _, err := s.Pool().Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{empty}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	for _, args := range readOnlyCommands {
		code, stdout, stderr := run(append(args, "-store", url, "-schema", none, "-data", data)...)
		want(t, strings.Join(args, " ")+" on a missing schema", code, 1, stdout+stderr, `no weir data in PostgreSQL schema "`+none+`"`, "the schema does not exist", "weir migrate")
		code, stdout, stderr = run(append(args, "-store", url, "-schema", empty, "-data", data)...)
		want(t, strings.Join(args, " ")+" on an empty schema", code, 1, stdout+stderr, `"`+empty+`"`, "no weir tables", "run weir migrate")
	}
	if schemaExists(none) {
		t.Error("a read-only command made the missing schema")
	}
	if n := tables(empty); n != 0 {
		t.Errorf("read-only commands made %d tables in an empty schema", n)
	}
	// weir's tables without the service's: status and search say to
	// migrate, and make none.
	n := tables(s.Schema())
	for _, args := range [][]string{{"status"}, {"search", "bees"}} {
		code, stdout, stderr := run(append(args, "-store", url, "-schema", s.Schema(), "-data", data)...)
		want(t, strings.Join(args, " ")+" on weir's tables alone", code, 1, stdout+stderr, "has no table ingest_migrations", "run weir migrate")
	}
	if m := tables(s.Schema()); m != n {
		t.Errorf("status and search made %d tables", m-n)
	}
	if paths := tree(t, data); len(paths) != 1 {
		t.Errorf("read-only commands on PostgreSQL wrote into the data directory: %v", paths)
	}
	// After weir migrate they answer.
	if code, stdout, stderr := run("migrate", "-store", url, "-schema", s.Schema(), "-data", data); code != 0 {
		t.Fatalf("migrate: %d %s %s", code, stdout, stderr)
	}
	code, stdout, stderr := run("status", "-store", url, "-schema", s.Schema(), "-data", data)
	want(t, "status after migrate", code, 0, stdout+stderr, "documents:    none")
}
