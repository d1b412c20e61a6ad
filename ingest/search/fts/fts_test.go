package fts

import (
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/ingest/search"
)

// openIndex opens an index in a new file of t's temporary directory, and
// closes it at the end of the test.
func openIndex(t testing.TB) *Index {
	t.Helper()
	return openWith(t, Config{Path: filepath.Join(t.TempDir(), "index.db")})
}

// openWith opens the index of cfg, and closes it at the end of the test.
func openWith(t testing.TB, cfg Config) *Index {
	t.Helper()
	ix, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return ix
}

func put(t testing.TB, ix *Index, docs ...search.Doc) {
	t.Helper()
	if err := ix.Put(t.Context(), docs...); err != nil {
		t.Fatal(err)
	}
}

func searchIDs(t testing.TB, ix *Index, query string) []string {
	t.Helper()
	hits, err := ix.Search(t.Context(), query, 100)
	if err != nil {
		t.Fatalf("Search(%q): %v", query, err)
	}
	ids := make([]string, len(hits))
	for i, h := range hits {
		ids[i] = h.ID
	}
	return ids
}

func count(t testing.TB, ix *Index) int {
	t.Helper()
	n, err := ix.Count(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A Put that only moves updated_at skips reindexing (the update trigger's
// WHEN clause): the document stays searchable and the FTS table intact.
// (The conformance suite checks the hit and entry that move.)
func TestPutOnlyUpdatedAtKeepsDocSearchable(t *testing.T) {
	t.Parallel()
	ix := openIndex(t)
	d := search.Doc{ID: "u", Title: "Kernel", Body: "scheduler latency", UpdatedAt: time.UnixMicro(1000)}
	put(t, ix, d)
	d.UpdatedAt = time.UnixMicro(2000)
	d.Summary = "changed summary"
	put(t, ix, d)
	if ids := searchIDs(t, ix, "scheduler kernel"); !slices.Equal(ids, []string{"u"}) {
		t.Fatalf("hits %v, want [u]", ids)
	}
	if _, err := ix.db().ExecContext(t.Context(), `INSERT INTO docs_fts(docs_fts, rank) VALUES ('integrity-check', 1)`); err != nil {
		t.Errorf("FTS integrity-check after updates: %v", err)
	}
}

// db is the write pool, for tests that look inside the file.
func (ix *Index) db() *sql.DB { return ix.write }

func TestSearchRanksTitleMatchFirst(t *testing.T) {
	t.Parallel()
	ix := openIndex(t)
	put(t, ix,
		search.Doc{ID: "1-body", Title: "Weekly notes", Body: "We talked about the migration plan and lunch."},
		search.Doc{ID: "2-title", Title: "Migration plan", Body: "Steps for moving the database next week."},
		search.Doc{ID: "3-terms", Title: "Misc", Body: "Nothing here about it really, we discussed other things at length.", Terms: []string{"migration"}},
		search.Doc{ID: "4-none", Title: "Lunch", Body: "Pizza."},
	)
	ids := searchIDs(t, ix, "migration")
	if want := []string{"2-title", "3-terms", "1-body"}; !slices.Equal(ids, want) {
		t.Fatalf("hits %v, want %v", ids, want)
	}
	hits, err := ix.Search(t.Context(), "migration", 10)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(hits); i++ {
		if hits[i].Score > hits[i-1].Score {
			t.Errorf("scores not descending: %v then %v", hits[i-1].Score, hits[i].Score)
		}
	}
	if hits[0].Score <= 0 {
		t.Errorf("best score %v, want positive (higher is better)", hits[0].Score)
	}
}

func TestSearchHitFieldsAndSnippet(t *testing.T) {
	t.Parallel()
	ix := openIndex(t)
	at := time.Date(2025, 1, 2, 3, 4, 5, 6000, time.UTC)
	put(t, ix, search.Doc{
		ID: "h", Title: "Postmortem", Summary: "What broke.", Source: "lists/dev.mbox#12", UpdatedAt: at,
		Body: "On Tuesday the primary database ran out of disk space, and the replicas fell behind for an hour while we cleaned up old write-ahead logs and rotated the archives.",
	})
	hits, err := ix.Search(t.Context(), "replicas", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 {
		t.Fatalf("hits %+v, want one", hits)
	}
	h := hits[0]
	if h.ID != "h" || h.Title != "Postmortem" || h.Summary != "What broke." || h.Source != "lists/dev.mbox#12" || !h.UpdatedAt.Equal(at) {
		t.Errorf("hit %+v does not carry the document's fields", h)
	}
	if !strings.Contains(h.Snippet, MarkStart+"replicas"+MarkEnd) {
		t.Errorf("snippet %q does not mark the match", h.Snippet)
	}
	if !strings.Contains(h.Snippet, Ellipsis) {
		t.Errorf("snippet %q of a long body has no ellipsis", h.Snippet)
	}
}

func TestSearchPhrasesAndPrefixes(t *testing.T) {
	t.Parallel()
	ix := openIndex(t)
	put(t, ix,
		search.Doc{ID: "a", Body: "the quick brown fox jumps"},
		search.Doc{ID: "b", Body: "brown and quick, the fox"},
		search.Doc{ID: "c", Body: "a TLS handshake failed after connection reset"},
		search.Doc{ID: "d", Body: "we deployed the café résumé service"},
	)
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{`quick brown`, []string{"a", "b"}},           // words ANDed, any order
		{`"quick brown"`, []string{"a"}},              // a phrase keeps its order
		{`"brown quick"`, nil},                        // and adjacency
		{`"quick brown`, []string{"a"}},               // an open quote runs to the end
		{`fox "quick brown"`, []string{"a"}},          // words and phrases mix
		{`hand*`, []string{"c"}},                      // prefix
		{`"tls hand"*`, []string{"c"}},                // prefix phrase
		{`"tls hand"`, nil},                           // not a prefix without *
		{`conn*`, []string{"c"}},                      // prefix of a stemmed word
		{`connections`, []string{"c"}},                // porter: connections = connection
		{`deploy`, []string{"d"}},                     // porter: deployed = deploy
		{`depl*`, []string{"d"}},                      // a prefix of the stem
		{`deployi*`, nil},                             // documented: prefixes match stems, not words
		{`cafe RESUME`, []string{"d"}},                // diacritics and case folded
		{`quick zebra`, nil},                          // AND: all words must match
		{`quick-brown`, []string{"a"}},                // punctuation splits words into a phrase
		{`QUICK*`, []string{"a", "b"}},                // prefix ignores case
		{`quick "" * ()`, []string{"a", "b"}},         // ignored terms do not spoil the AND
		{`"the fox"`, []string{"b"}},                  // phrase
		{`fox "jumps`, []string{"a"}},                 // open quote after a word
		{`"quick brown" OR zebra`, nil},               // OR is a word, not an operator
		{`"brown and quick"`, []string{"b"}},          // "and" inside a phrase
		{`brown AND quick`, []string{"b"}},            // AND is the word "and" (only b has it)
		{`NOT fox`, nil},                              // NOT is the word "not"
		{`body:fox`, nil},                             // no column filters: the phrase "body fox"
		{`fox*jumps`, []string{"a"}},                  // * inside a word splits it: "fox jumps"
		{`"fox"*`, []string{"a", "b"}},                // a quoted prefix
		{`jum* "quick brown"*`, []string{"a"}},        // several prefixes
		{`   quick    `, []string{"a", "b"}},          // surrounding space
		{"quick\tbrown\nfox\x00", []string{"a", "b"}}, // control characters are spaces
	} {
		got := searchIDs(t, ix, tc.query)
		slices.Sort(got)
		if !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
			t.Errorf("Search(%q) = %v, want %v", tc.query, got, tc.want)
		}
	}
}

func TestSearchLimitCapped(t *testing.T) {
	t.Parallel()
	ix := openIndex(t)
	docs := make([]search.Doc, search.MaxLimit+5)
	for i := range docs {
		docs[i] = search.Doc{ID: fmt.Sprintf("d%05d", i), Body: "common word"}
	}
	put(t, ix, docs...)
	hits, err := ix.Search(t.Context(), "common", search.MaxLimit*10)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != search.MaxLimit {
		t.Errorf("%d hits, want the cap %d", len(hits), search.MaxLimit)
	}
	hits, err = ix.Search(t.Context(), "common", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 3 || !slices.IsSortedFunc(hits, func(a, b search.Hit) int { return strings.Compare(a.ID, b.ID) }) {
		t.Errorf("limit 3: %d hits, want 3, of equal scores in id order", len(hits))
	}
	es, err := ix.Entries(t.Context(), "", search.MaxLimit*10)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != search.MaxLimit {
		t.Errorf("%d entries, want the cap %d", len(es), search.MaxLimit)
	}
}

// Entries pages in byte order an id the conformance suite cannot use
// (PostgreSQL's text holds no NUL byte): "a\x00b" sorts after "a" and
// before "ab".
func TestEntriesOrderIDsWithNULBytes(t *testing.T) {
	t.Parallel()
	ix := openIndex(t)
	put(t, ix, search.Doc{ID: "ab"}, search.Doc{ID: "a\x00b"}, search.Doc{ID: "a"}, search.Doc{ID: "\x01"})
	for _, tc := range []struct {
		after string
		limit int
		want  []string
	}{
		{"", 10, []string{"\x01", "a", "a\x00b", "ab"}},
		{"a", 1, []string{"a\x00b"}},
		{"a\x00b", 10, []string{"ab"}},
	} {
		es, err := ix.Entries(t.Context(), tc.after, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range es {
			got = append(got, e.ID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("entries after %q: %q, want %q", tc.after, got, tc.want)
		}
	}
}

func TestReopenKeepsData(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "index.db")
	ix := openWith(t, Config{Path: path})
	if ix.Rebuilt() {
		t.Error("a new file reports Rebuilt")
	}
	put(t, ix, search.Doc{ID: "k", Title: "Kept", Body: "persistent text", UpdatedAt: time.UnixMicro(42)})
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := ix.Count(t.Context()); err == nil {
		t.Error("Count after Close succeeded")
	}

	ix = openWith(t, Config{Path: path, CheckIntegrity: true})
	if ix.Rebuilt() || ix.SchemaVersion() != SchemaVersion {
		t.Errorf("reopen: Rebuilt %v, SchemaVersion %d", ix.Rebuilt(), ix.SchemaVersion())
	}
	if ids := searchIDs(t, ix, "persistent"); !slices.Equal(ids, []string{"k"}) {
		t.Errorf("after reopen: hits %v, want [k]", ids)
	}
	d, err := ix.Get(t.Context(), "k")
	if err != nil || !d.UpdatedAt.Equal(time.UnixMicro(42)) {
		t.Errorf("after reopen: Get = %+v, %v", d, err)
	}
}

// writeDB makes an SQLite file at path by running stmts.
func writeDB(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func TestOtherSchemaVersionIsRecreated(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		stmts []string
	}{
		{"older", []string{
			// A version 0 layout: one plain FTS table.
			`CREATE VIRTUAL TABLE docs USING fts5(id UNINDEXED, body)`,
			`INSERT INTO docs VALUES ('old', 'old text')`,
			fmt.Sprintf(`PRAGMA application_id = %d`, applicationID),
			`PRAGMA user_version = 0`,
		}},
		{"newer", []string{
			`CREATE TABLE docs (id TEXT PRIMARY KEY, everything TEXT)`,
			`INSERT INTO docs VALUES ('old', 'old text')`,
			fmt.Sprintf(`PRAGMA application_id = %d`, applicationID),
			fmt.Sprintf(`PRAGMA user_version = %d`, SchemaVersion+1),
		}},
		{"current version, tables missing", []string{
			`CREATE TABLE docs (id TEXT PRIMARY KEY)`,
			fmt.Sprintf(`PRAGMA application_id = %d`, applicationID),
			fmt.Sprintf(`PRAGMA user_version = %d`, SchemaVersion),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "index.db")
			writeDB(t, path, tc.stmts...)
			ix := openWith(t, Config{Path: path})
			if !ix.Rebuilt() {
				t.Error("Rebuilt() = false")
			}
			if n := count(t, ix); n != 0 {
				t.Errorf("Count = %d, want an empty index", n)
			}
			put(t, ix, search.Doc{ID: "new", Body: "new text"})
			if ids := searchIDs(t, ix, "text"); !slices.Equal(ids, []string{"new"}) {
				t.Errorf("hits %v, want [new]", ids)
			}
			var v int
			if err := ix.db().QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != SchemaVersion {
				t.Errorf("user_version = %d, %v; want %d", v, err, SchemaVersion)
			}
		})
	}
}

func TestCorruptFileIsRecreated(t *testing.T) {
	t.Parallel()
	garbage := make([]byte, 64<<10)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range garbage {
		garbage[i] = byte(rng.Uint32())
	}
	for _, tc := range []struct {
		name    string
		data    []byte
		wal     []byte // a -wal file beside it, if not nil
		rebuilt bool
	}{
		{"garbage", garbage, nil, true},
		{"text", []byte("this is not a database\n"), nil, true},
		{"header only", append([]byte("SQLite format 3\x00"), garbage[:84]...), nil, true},
		{"garbage with garbage wal", garbage, garbage[:5000], true},
		// SQLite reads a one-byte file as an empty database: the new
		// index is written over it, with nothing to report.
		{"one byte", []byte{0}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "index.db")
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.wal != nil {
				if err := os.WriteFile(path+"-wal", tc.wal, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ix := openWith(t, Config{Path: path})
			if ix.Rebuilt() != tc.rebuilt {
				t.Errorf("Rebuilt() = %v, want %v", ix.Rebuilt(), tc.rebuilt)
			}
			put(t, ix, search.Doc{ID: "new", Body: "works again"})
			if ids := searchIDs(t, ix, "works"); !slices.Equal(ids, []string{"new"}) {
				t.Errorf("hits %v, want [new]", ids)
			}
		})
	}
}

// A valid file whose pages were damaged later is found by CheckIntegrity.
func TestDamagedPagesFoundByCheckIntegrity(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "index.db")
	ix := openWith(t, Config{Path: path})
	put(t, ix, corpus(500, 5)...)
	if err := ix.Close(); err != nil { // checkpoints the WAL into the file
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) < 64<<10 {
		t.Fatalf("index file of %d bytes: too small to damage its middle", len(data))
	}
	// Scribble over pages past the first (which holds the header and the
	// schema), as a torn write or a bad disk would.
	for i := 8 << 10; i < len(data)-4096; i += 3 * 4096 {
		copy(data[i:i+512], strings.Repeat("\xde\xad\xbe\xef", 128))
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	ix = openWith(t, Config{Path: path, CheckIntegrity: true})
	if !ix.Rebuilt() || count(t, ix) != 0 {
		t.Errorf("Rebuilt() = %v with %d docs, want a recreated empty index", ix.Rebuilt(), count(t, ix))
	}
}

func TestForeignDatabaseIsRefusedUntouched(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "service.db")
	writeDB(t, path, `CREATE TABLE documents (id TEXT PRIMARY KEY, updated_at INTEGER)`,
		`INSERT INTO documents VALUES ('precious', 1)`, `PRAGMA user_version = 7`)
	_, err := Open(t.Context(), Config{Path: path})
	if !errors.Is(err, ErrNotIndex) {
		t.Fatalf("Open of another application's database: %v, want ErrNotIndex", err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var id string
	if err := db.QueryRow(`SELECT id FROM documents`).Scan(&id); err != nil || id != "precious" {
		t.Errorf("the foreign database changed: %q, %v", id, err)
	}
}

func TestOpenConfigErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, cfg := range []Config{
		{},
		{Path: ":memory:"},
		{Path: "file:x.db"},
		{Path: filepath.Join(dir, "missing", "index.db")},
		{Path: dir},
		{Path: filepath.Join(dir, "index.db"), BusyTimeout: -time.Second},
	} {
		if ix, err := Open(t.Context(), cfg); err == nil {
			ix.Close()
			t.Errorf("Open(%+v) succeeded", cfg)
		}
	}
}

func TestMatchExpr(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ query, want string }{
		{`a b`, `"a" AND "b"`},
		{`"a b" c*`, `"a b" AND "c"*`},
		{`"x y"* OR`, `"x y"* AND "OR"`},
		{`title:x (y)`, `"title:x" AND "(y)"`},
	} {
		terms, err := search.ParseQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		if got := matchExpr(terms); got != tc.want {
			t.Errorf("matchExpr(%q) = %s, want %s", tc.query, got, tc.want)
		}
	}
	// A term holding a quote (not made by ParseQuery) is still one string.
	if got := matchExpr([]search.Term{{Text: `a"b`}}); got != `"a""b"` {
		t.Errorf("quote not doubled: %s", got)
	}
}
