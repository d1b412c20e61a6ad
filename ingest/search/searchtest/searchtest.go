// Package searchtest is the conformance suite every search index (an
// implementation of search.Index) runs: search/fts against an SQLite file,
// search/pgsearch against a real PostgreSQL server. An index is done when
// Run passes.
//
// A new behaviour of the seam gets its case here first. Each case opens an
// index of its own (a temporary file, a fresh schema), so cases run in
// parallel. Where backends differ, the difference is declared in Features
// and the case checks each side of it; it is never left to a failing
// test. BenchPut and BenchSearch measure every index on the same
// documents and queries (Corpus), so that their figures compare.
package searchtest

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/weirhq/weir/ingest/search"
)

// Features declares how an index differs from the others, where the seam
// leaves it open.
type Features struct {
	// Name names the index in messages, e.g. "fts".
	Name string
	// Stems: English word endings are ignored, so that connections finds
	// connection and running finds runs.
	Stems bool
	// FoldsDiacritics: a Latin letter matches itself with or without its
	// accents, written precomposed or with combining marks: cafe finds
	// café, and resume finds résumé. (Whether other scripts' accents
	// fold is left open.)
	FoldsDiacritics bool
	// StoresAnyText: a document's text may hold NUL bytes and invalid
	// UTF-8, stored and returned as given. When false, Put refuses such
	// a document with an error wrapping search.ErrInvalid that names it,
	// and stores nothing of its call.
	StoresAnyText bool
	// KeyTermsReplaceInvalidUTF8: with StoresAnyText, invalid UTF-8 in
	// a key term comes back with each bad byte replaced by U+FFFD
	// (search/fts keeps the key terms as JSON), while the other texts
	// come back as given.
	KeyTermsReplaceInvalidUTF8 bool
	// UnboundedVocabulary: every word of a body is searchable, however
	// many distinct words the body holds. When false, a body of very many
	// distinct words (hundreds of thousands) is stored whole, and
	// searchable up to a limit.
	UnboundedVocabulary bool
	// PhrasesAnywhere: a phrase is found wherever it stands in a
	// document. When false, only near enough to the start of a long
	// body (PostgreSQL keeps positions of the first 16,383 words, and of
	// the first 256 occurrences of a word); its words are still found
	// anywhere.
	PhrasesAnywhere bool
}

// Harness is what an index gives the suite.
type Harness struct {
	// Open returns a new, empty index of the calling test's (or
	// benchmark's) own, and closes it, and removes what it made, when
	// the test ends.
	Open func(tb testing.TB) search.Index
	// Features declares the index's differences.
	Features Features
}

type suiteCase struct {
	name string
	fn   func(*testing.T, Harness)
}

// suite is every case of the suite.
func suite() []suiteCase {
	return []suiteCase{
		// Documents (docs.go).
		{"PutGetRoundTrip", testPutGet},
		{"PutZeroTimeAndNoTerms", testZeroTimeNoTerms},
		{"PutInvalidStoresNothing", testPutInvalid},
		{"PutRepeatedIDLastWins", testRepeatedID},
		{"PutAgainReplacesTheDocument", testReplace},
		{"PutOnlyUpdatedAtKeepsTheDocumentSearchable", testOnlyUpdatedAt},
		{"DeleteRemovesFromSearchGetAndEntries", testDelete},
		{"EntriesPageThroughEveryDocumentOnce", testEntries},
		{"Count", testCount},
		{"TextWithNULOrInvalidUTF8", testBadText},
		{"ConcurrentWritesAndSearches", testConcurrent},
		{"ClosedIndexRefusesCalls", testClosed},
		{"CanceledContextFails", testCanceled},
		// Queries (query.go).
		{"QuerySyntax", testQuerySyntax},
		{"QueryWordsSplitAtPunctuationAsTheText", testPunctuation},
		{"QueryStemsEnglishEndings", testStems},
		{"QueryUnicodeAndAccents", testUnicode},
		{"QueryHostileIsNeitherAnErrorNorAnOperator", testHostile},
		{"QueryEmptyOrTooLongIsRefused", testInvalidQueries},
		{"QueryOfIgnoredWordsMatchesNothing", testIgnoredWords},
		// Ranks and snippets (rank.go).
		{"RankTitleAboveKeyTermsAboveBody", testRankColumns},
		{"RankMoreMatchesAboveFewer", testRankMoreMatches},
		{"RankScoresDescendAndArePositive", testScores},
		{"LimitIsCappedAndEqualScoresInIDOrder", testLimit},
		{"HitCarriesTheDocumentsFields", testHitFields},
		{"SnippetMarksTheMatchInTheTextAsWritten", testSnippet},
		{"SnippetOfALongBodyIsAFragment", testSnippetFragment},
		// Sizes (size.go).
		{"LargeDocument", testLargeDocument},
		{"DocumentOfManyDistinctWords", testManyDistinctWords},
		{"PhraseDeepInALongBody", testDeepPhrase},
	}
}

// Run runs every case of the suite, each in parallel.
func Run(t *testing.T, h Harness) {
	if h.Open == nil || h.Features.Name == "" {
		t.Fatal("searchtest: the Harness needs Open and Features.Name")
	}
	for _, c := range suite() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, h)
		})
	}
}

func put(t testing.TB, ix search.Index, docs ...search.Doc) {
	t.Helper()
	if err := ix.Put(context.Background(), docs...); err != nil {
		t.Fatal(err)
	}
}

// hits searches for query, with a limit of 100.
func hits(t testing.TB, ix search.Index, query string) []search.Hit {
	t.Helper()
	hs, err := ix.Search(context.Background(), query, 100)
	if err != nil {
		t.Fatalf("Search(%q): %v", query, err)
	}
	return hs
}

// ids are the ids of query's hits, best first.
func ids(t testing.TB, ix search.Index, query string) []string {
	t.Helper()
	hs := hits(t, ix, query)
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.ID
	}
	return out
}

// sortedIDs are the ids of query's hits, in id order.
func sortedIDs(t testing.TB, ix search.Index, query string) []string {
	t.Helper()
	out := ids(t, ix, query)
	slices.Sort(out)
	return out
}

func count(t testing.TB, ix search.Index) int {
	t.Helper()
	n, err := ix.Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// finds checks that query finds exactly the documents want, in any
// order; why says what decided want, if a Feature did.
func finds(t *testing.T, ix search.Index, query string, want []string, why ...string) {
	t.Helper()
	if got := sortedIDs(t, ix, query); !sameIDs(got, want) {
		t.Errorf("Search(%q) = %v, want %v %s", query, got, want, strings.Join(why, " "))
	}
}

// finding is a query and the ids of the documents it must find.
type finding struct {
	query string
	want  []string
}

// findsEach checks each finding with finds.
func findsEach(t *testing.T, ix search.Index, fs []finding) {
	t.Helper()
	for _, f := range fs {
		finds(t, ix, f.query, f.want)
	}
}

// ranks checks that query finds the documents want, in that order.
func ranks(t *testing.T, ix search.Index, query string, want ...string) {
	t.Helper()
	if got := ids(t, ix, query); !slices.Equal(got, want) {
		t.Errorf("Search(%q): hits %v, want %v in that order", query, got, want)
	}
}

// sameIDs compares two lists of ids, nil and empty alike.
func sameIDs(a, b []string) bool {
	return len(a) == 0 && len(b) == 0 || slices.Equal(a, b)
}

func docsEqual(a, b search.Doc) bool {
	return a.ID == b.ID && a.Title == b.Title && a.Body == b.Body && a.Summary == b.Summary &&
		a.Source == b.Source && a.Language == b.Language && slices.Equal(a.Terms, b.Terms) &&
		(a.Terms == nil) == (b.Terms == nil) && a.UpdatedAt.Equal(b.UpdatedAt)
}
