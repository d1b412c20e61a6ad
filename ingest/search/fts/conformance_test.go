package fts_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/weirhq/weir/ingest/search"
	"github.com/weirhq/weir/ingest/search/fts"
	"github.com/weirhq/weir/ingest/search/searchtest"
)

// harness opens an index in a new file of the test's temporary directory.
var harness = searchtest.Harness{
	Open: func(tb testing.TB) search.Index {
		tb.Helper()
		ix, err := fts.Open(context.Background(), fts.Config{Path: filepath.Join(tb.TempDir(), "index.db")})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { ix.Close() })
		return ix
	},
	Features: searchtest.Features{
		Name:            "fts",
		Stems:           true, // porter
		FoldsDiacritics: true, // unicode61 remove_diacritics 2
		StoresAnyText:   true, // SQLite's text holds any bytes
		// The key terms are kept as JSON, which replaces invalid UTF-8.
		KeyTermsReplaceInvalidUTF8: true,
		UnboundedVocabulary:        true,
		PhrasesAnywhere:            true,
	},
}

// TestConformance runs the search index's conformance suite on an FTS5
// file.
func TestConformance(t *testing.T) {
	t.Parallel()
	searchtest.Run(t, harness)
}

// BenchmarkSuitePut and BenchmarkSuiteSearch measure the index on the
// suite's corpus and queries, the same as every other index's.
func BenchmarkSuitePut(b *testing.B)    { searchtest.BenchPut(b, harness) }
func BenchmarkSuiteSearch(b *testing.B) { searchtest.BenchSearch(b, harness) }

// FuzzConformanceQuery fuzzes Search (searchtest.FuzzQuery), with seeds
// of FTS5's query syntax.
func FuzzConformanceQuery(f *testing.F) {
	searchtest.FuzzQuery(f, harness, `NEAR(a b, 2)`, `{title body}: x`, `a AND b OR NOT c`, `"a" + "b"`, `^a*`)
}
