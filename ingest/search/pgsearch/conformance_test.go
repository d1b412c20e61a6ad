package pgsearch_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weirhq/weir/ingest/search"
	"github.com/weirhq/weir/ingest/search/pgsearch"
	"github.com/weirhq/weir/ingest/search/searchtest"
	"github.com/weirhq/weir/internal/testenv"
)

// features are pgsearch's differences from the other indexes (see doc.go).
var features = searchtest.Features{
	Name:            "pgsearch",
	Stems:           true, // Snowball's English stemmer
	FoldsDiacritics: true, // fold
	// PostgreSQL's text holds neither NUL nor invalid UTF-8: Put refuses
	// them.
	StoresAnyText: false,
	// A tsvector holds at most 1 MB of lexemes and positions: a body of
	// more distinct words is indexed up to that.
	UnboundedVocabulary: false,
	// A tsvector keeps the positions of the first 16,383 words, and of
	// the first 256 occurrences of a lexeme.
	PhrasesAnywhere: false,
}

// newPool connects to the test server (skipping the test without one,
// failing it under WEIR_REQUIRE_SERVICES=1), for the test's whole life.
func newPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(testenv.Postgres(tb))
	if err != nil {
		tb.Fatal(err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// newSchema returns a schema name of the test's own, dropped (with all
// it holds) when the test ends.
func newSchema(tb testing.TB, pool *pgxpool.Pool) string {
	tb.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "weir_pgsearch_" + hex.EncodeToString(b)
	tb.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// openIndex opens an index in a new schema of the test's own.
func openIndex(tb testing.TB, pool *pgxpool.Pool) *pgsearch.Index {
	tb.Helper()
	ix, err := pgsearch.Open(context.Background(), pgsearch.Config{Pool: pool, Schema: newSchema(tb, pool)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ix.Close() })
	return ix
}

func harness(pool *pgxpool.Pool) searchtest.Harness {
	return searchtest.Harness{
		Open:     func(tb testing.TB) search.Index { return openIndex(tb, pool) },
		Features: features,
	}
}

// TestConformance runs the search index's conformance suite on
// PostgreSQL, each case in a schema of its own.
func TestConformance(t *testing.T) {
	t.Parallel()
	searchtest.Run(t, harness(newPool(t)))
}

// BenchmarkSuitePut and BenchmarkSuiteSearch measure the index on the
// suite's corpus and queries, the same as search/fts's.
func BenchmarkSuitePut(b *testing.B)    { searchtest.BenchPut(b, harness(newPool(b))) }
func BenchmarkSuiteSearch(b *testing.B) { searchtest.BenchSearch(b, harness(newPool(b))) }
