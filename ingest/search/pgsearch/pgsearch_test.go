package pgsearch_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weirhq/weir/ingest/search"
	"github.com/weirhq/weir/ingest/search/pgsearch"
	"github.com/weirhq/weir/ingest/search/searchtest"
)

func open(t *testing.T, cfg pgsearch.Config) *pgsearch.Index {
	t.Helper()
	ix, err := pgsearch.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func put(t *testing.T, ix *pgsearch.Index, docs ...search.Doc) {
	t.Helper()
	if err := ix.Put(context.Background(), docs...); err != nil {
		t.Fatal(err)
	}
}

func count(t *testing.T, ix *pgsearch.Index) int {
	t.Helper()
	n, err := ix.Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func schemaExists(t *testing.T, pool *pgxpool.Pool, schema string) bool {
	t.Helper()
	var ok bool
	if err := pool.QueryRow(context.Background(), "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestOpenCreatesThenReopensKeepingData(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	schema := newSchema(t, pool)
	var logs bytes.Buffer
	ix := open(t, pgsearch.Config{Pool: pool, Schema: schema, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if !ix.Created() || ix.Rebuilt() || ix.SchemaVersion() != pgsearch.SchemaVersion || ix.Schema() != schema {
		t.Errorf("a new schema: Created %v, Rebuilt %v, SchemaVersion %d, Schema %q", ix.Created(), ix.Rebuilt(), ix.SchemaVersion(), ix.Schema())
	}
	if !strings.Contains(logs.String(), "search index created") {
		t.Errorf("logs %q do not say the index was created", logs.String())
	}
	put(t, ix, search.Doc{ID: "k", Title: "Kept", Body: "persistent text"})
	ix.Close()

	ix = open(t, pgsearch.Config{Pool: pool, Schema: schema})
	if ix.Created() || ix.Rebuilt() {
		t.Errorf("reopen: Created %v, Rebuilt %v; want neither", ix.Created(), ix.Rebuilt())
	}
	hits, err := ix.Search(context.Background(), "persistent", 10)
	if err != nil || len(hits) != 1 || hits[0].ID != "k" {
		t.Errorf("after reopen: hits %+v, %v; want k", hits, err)
	}
	// The tables have the GIN index the search reads.
	var am string
	err = pool.QueryRow(context.Background(), `SELECT am.amname FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam
		WHERE i.indrelid = $1::regclass AND am.amname = 'gin'`,
		pgx.Identifier{schema, "weir_search_docs"}.Sanitize()).Scan(&am)
	if err != nil {
		t.Errorf("no GIN index on weir_search_docs: %v", err)
	}
}

// Processes starting at once on a new schema make the index once: each
// Open runs on a pool (a session) of its own.
func TestOpenConcurrentlyCreatesTheTablesOnce(t *testing.T) {
	t.Parallel()
	admin := newPool(t)
	schema := newSchema(t, admin)
	const n = 6
	pools := make([]*pgxpool.Pool, n)
	for i := range pools {
		pools[i] = newPool(t)
	}
	created := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			ix, err := pgsearch.Open(context.Background(), pgsearch.Config{Pool: pools[i], Schema: schema})
			if err != nil {
				errs[i] = err
				return
			}
			created[i] = ix.Created()
			if ix.Rebuilt() {
				errs[i] = errors.New("Rebuilt on a new schema")
			}
			errs[i] = ix.Put(context.Background(), search.Doc{ID: string(rune('a' + i)), Body: "concurrent start"})
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
		}
	}
	if c := slices.Index(created, true); c < 0 || slices.Index(created[c+1:], true) >= 0 {
		t.Errorf("Created: %v, want exactly one", created)
	}
	ix := open(t, pgsearch.Config{Pool: admin, Schema: schema})
	if got := count(t, ix); got != n {
		t.Errorf("Count = %d, want %d", got, n)
	}
}

func TestOpenRecreatesAnOlderOrIncompleteIndex(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, schema string)
	}{
		{"older version", func(t *testing.T, schema string) {
			exec(t, pool, "UPDATE "+pgx.Identifier{schema, "weir_search_meta"}.Sanitize()+" SET version = 0")
		}},
		{"table missing", func(t *testing.T, schema string) {
			exec(t, pool, "DROP TABLE "+pgx.Identifier{schema, "weir_search_docs"}.Sanitize())
		}},
		{"configuration missing", func(t *testing.T, schema string) {
			exec(t, pool, "DROP TEXT SEARCH CONFIGURATION "+pgx.Identifier{schema, "weir_search"}.Sanitize()+" CASCADE")
		}},
		{"version table missing", func(t *testing.T, schema string) {
			exec(t, pool, "DROP TABLE "+pgx.Identifier{schema, "weir_search_meta"}.Sanitize())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			schema := newSchema(t, pool)
			ix := open(t, pgsearch.Config{Pool: pool, Schema: schema})
			put(t, ix, search.Doc{ID: "old", Body: "old text"})
			tc.spoil(t, schema)

			var logs bytes.Buffer
			ix = open(t, pgsearch.Config{Pool: pool, Schema: schema, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if !ix.Rebuilt() || ix.Created() {
				t.Errorf("Rebuilt %v, Created %v; want Rebuilt only", ix.Rebuilt(), ix.Created())
			}
			if !strings.Contains(logs.String(), "reindex everything") {
				t.Errorf("logs %q do not ask for a reindex", logs.String())
			}
			if n := count(t, ix); n != 0 {
				t.Errorf("Count = %d, want an empty index", n)
			}
			put(t, ix, search.Doc{ID: "new", Body: "new text"})
			if hits, err := ix.Search(context.Background(), "text", 10); err != nil || len(hits) != 1 || hits[0].ID != "new" {
				t.Errorf("hits %+v, %v; want new", hits, err)
			}
			// Opened again, it is as it was left.
			if again := open(t, pgsearch.Config{Pool: pool, Schema: schema}); again.Rebuilt() || again.Created() || count(t, again) != 1 {
				t.Errorf("opened again: Rebuilt %v, Created %v, Count %d", again.Rebuilt(), again.Created(), count(t, again))
			}
		})
	}
}

func TestOpenRefusesANewerIndexUntouched(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	schema := newSchema(t, pool)
	ix := open(t, pgsearch.Config{Pool: pool, Schema: schema})
	put(t, ix, search.Doc{ID: "kept", Body: "newer text"})
	exec(t, pool, "UPDATE "+pgx.Identifier{schema, "weir_search_meta"}.Sanitize()+" SET version = $1", pgsearch.SchemaVersion+1)
	for _, mustExist := range []bool{false, true} {
		_, err := pgsearch.Open(context.Background(), pgsearch.Config{Pool: pool, Schema: schema, MustExist: mustExist})
		if !errors.Is(err, pgsearch.ErrSchemaTooNew) {
			t.Errorf("Open (MustExist %v) of a newer index: %v, want ErrSchemaTooNew", mustExist, err)
		}
	}
	if n := count(t, ix); n != 1 {
		t.Errorf("Count = %d: the newer index was changed", n)
	}
}

func TestOpenMustExistMakesNothing(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	schema := newSchema(t, pool)
	_, err := pgsearch.Open(context.Background(), pgsearch.Config{Pool: pool, Schema: schema, MustExist: true})
	if !errors.Is(err, pgsearch.ErrNoIndex) || !strings.Contains(err.Error(), schema) {
		t.Errorf("MustExist on a missing schema: %v, want ErrNoIndex naming it", err)
	}
	if schemaExists(t, pool, schema) {
		t.Error("MustExist made the schema")
	}
	exec(t, pool, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	if _, err := pgsearch.Open(context.Background(), pgsearch.Config{Pool: pool, Schema: schema, MustExist: true}); !errors.Is(err, pgsearch.ErrNoIndex) {
		t.Errorf("MustExist on an empty schema: %v, want ErrNoIndex", err)
	}
	var tables int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1", schema).Scan(&tables); err != nil || tables != 0 {
		t.Errorf("MustExist made %d relations, %v", tables, err)
	}

	ix := open(t, pgsearch.Config{Pool: pool, Schema: schema})
	put(t, ix, search.Doc{ID: "a", Body: "readable"})
	ro := open(t, pgsearch.Config{Pool: pool, Schema: schema, MustExist: true})
	if ro.Created() || ro.Rebuilt() || count(t, ro) != 1 {
		t.Errorf("MustExist on an index: Created %v, Rebuilt %v, Count %d", ro.Created(), ro.Rebuilt(), count(t, ro))
	}
	exec(t, pool, "UPDATE "+pgx.Identifier{schema, "weir_search_meta"}.Sanitize()+" SET version = 0")
	if _, err := pgsearch.Open(context.Background(), pgsearch.Config{Pool: pool, Schema: schema, MustExist: true}); !errors.Is(err, pgsearch.ErrNoIndex) {
		t.Errorf("MustExist on an older index: %v, want ErrNoIndex", err)
	}
	if n := count(t, ix); n != 1 {
		t.Errorf("Count = %d: MustExist changed an older index", n)
	}
}

func TestOpenConfigErrors(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	for _, tc := range []struct {
		cfg  pgsearch.Config
		want string
	}{
		{pgsearch.Config{}, "Pool is nil"},
		{pgsearch.Config{Pool: pool, Schema: strings.Repeat("s", 64)}, "longer than 63"},
		{pgsearch.Config{Pool: pool, Schema: "a\x00b"}, "NUL"},
	} {
		_, err := pgsearch.Open(context.Background(), tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%+v): %v, want an error about %q", tc.cfg, err, tc.want)
		}
	}
}

// A schema name that needs quoting, with quotes of both kinds in it, is
// kept intact in every statement.
func TestSchemaNameIsQuoted(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	schema := `We'ir "search"` + newSchema(t, pool)[len("weir_pgsearch"):]
	t.Cleanup(func() {
		exec(t, pool, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	})
	ix := open(t, pgsearch.Config{Pool: pool, Schema: schema})
	put(t, ix, search.Doc{ID: "q", Title: "Quoted schema", Body: "it works"})
	hits, err := ix.Search(context.Background(), "works", 10)
	if err != nil || len(hits) != 1 || hits[0].Snippet != "it «works»" {
		t.Errorf("hits %+v, %v; want q with its snippet", hits, err)
	}
	if !schemaExists(t, pool, schema) {
		t.Errorf("schema %q was not made as named", schema)
	}
}

func TestPutRefusesTextPostgreSQLCannotStore(t *testing.T) {
	t.Parallel()
	ix := openIndex(t, newPool(t))
	for _, tc := range []struct {
		doc  search.Doc
		want string
	}{
		{search.Doc{ID: "n", Body: "a\x00b"}, `document 1: search: invalid parameter: document "n": its body holds a NUL byte (at byte 1)`},
		{search.Doc{ID: "u", Summary: "caf\xe9"}, `its summary is not valid UTF-8`},
		{search.Doc{ID: "t", Terms: []string{"ok", "x\x00"}}, `its key term 1 holds a NUL byte`},
	} {
		err := ix.Put(context.Background(), search.Doc{ID: "fine"}, tc.doc)
		if !errors.Is(err, search.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Put(%+v): %v, want ErrInvalid saying %q", tc.doc, err, tc.want)
		}
	}
	if n := count(t, ix); n != 0 {
		t.Errorf("Count = %d, want nothing stored", n)
	}
}

// FuzzSearchQuery fuzzes Search (searchtest.FuzzQuery), with seeds of
// tsquery's syntax: no query reaches PostgreSQL as tsquery syntax, or
// fails there.
func FuzzSearchQuery(f *testing.F) {
	searchtest.FuzzQuery(f, harness(newPool(f)), `'`, `\`, `a:*`, `!a & (b | c) <-> d`, `''''`, `\'`,
		`a' | 'b`, `E'\\'`, `"a b"*`, `:* :*`, `<2>`, `a<->b`, `1e5`, `x`+strings.Repeat("y", 3000))
}

// TestExampleSteps runs Example's steps, which an example cannot run
// without a server, and checks what they print.
func TestExampleSteps(t *testing.T) {
	pool := newPool(t)
	schema := newSchema(t, pool)
	out := captureStdout(t, func() error { return exampleSteps(context.Background(), pool, schema) })
	want := `a1 lists/ops.mbox#3: «Disk» full on the primary
b2 incoming/notes/week23.txt: Planning, and a short note about the «disk» budget at café Zoë.
b2 incoming/notes/week23.txt: Planning, and a short note about the «disk» «budget» at café Zoë.
b2 incoming/notes/week23.txt: Planning, and a short note about the disk budget at «café» «Zoë».
a1 2025-06-01T09:00:00Z
b2 2025-06-01T09:00:00Z
`
	if out != want {
		t.Errorf("the example printed\n%s\nwant\n%s", out, want)
	}
}

// captureStdout returns what fn prints.
func captureStdout(t *testing.T, fn func() error) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		done <- b
	}()
	ferr := fn()
	os.Stdout = old
	w.Close()
	out := <-done
	if ferr != nil {
		t.Fatal(ferr)
	}
	return string(out)
}
