package searchtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/weirhq/weir/ingest/search"
)

// syntaxDocs are the documents of the query syntax's cases.
var syntaxDocs = []search.Doc{
	{ID: "a", Body: "the quick brown fox jumps"},
	{ID: "b", Body: "brown and quick, the fox"},
	{ID: "c", Body: "a TLS handshake failed after the connection was reset"},
	{ID: "d", Title: "Release notes", Body: "deployment of the billing service"},
}

// testQuerySyntax runs every query form the README and the search package
// document: words (ANDed, in any order), "a phrase", prefix*, "a
// phrase"*, operators and punctuation as plain text.
func testQuerySyntax(t *testing.T, h Harness) {
	ix := h.Open(t)
	put(t, ix, syntaxDocs...)
	findsEach(t, ix, []finding{
		{`quick brown`, []string{"a", "b"}},           // words ANDed, any order
		{`brown   quick`, []string{"a", "b"}},         // any order
		{`quick zebra`, nil},                          // every word must match
		{`"quick brown"`, []string{"a"}},              // a phrase keeps its order
		{`"brown quick"`, nil},                        // and adjacency
		{`"quick brown`, []string{"a"}},               // an open quote runs to the end
		{`fox "quick brown"`, []string{"a"}},          // words and phrases mix
		{`fox "jumps`, []string{"a"}},                 // an open quote after a word
		{`"the fox"`, []string{"b"}},                  // every word counts, "the" too
		{`hand*`, []string{"c"}},                      // a prefix
		{`HAND*`, []string{"c"}},                      // a prefix ignores case
		{`"tls hand"*`, []string{"c"}},                // a phrase whose last word is a prefix
		{`"tls hand"`, nil},                           // not a prefix without *
		{`"fox"*`, []string{"a", "b"}},                // a quoted prefix
		{`jum* "quick brown"*`, []string{"a"}},        // several prefixes
		{`QUICK Brown`, []string{"a", "b"}},           // case is ignored
		{`quick-brown`, []string{"a"}},                // punctuation splits a word into a phrase
		{`fox*jumps`, []string{"a"}},                  // so does a * inside a word
		{`quick "" * ()`, []string{"a", "b"}},         // ignored terms do not spoil the AND
		{`"quick brown" OR zebra`, nil},               // OR is a word, not an operator
		{`brown AND quick`, []string{"b"}},            // AND is the word "and" (only b has it)
		{`"brown and quick"`, []string{"b"}},          // "and" inside a phrase
		{`NOT fox`, nil},                              // NOT is the word "not"
		{`-fox`, []string{"a", "b"}},                  // - excludes nothing: it is punctuation
		{`body:fox`, nil},                             // no column filters: the phrase "body fox"
		{`title:release`, nil},                        // the phrase "title release"
		{`release notes`, []string{"d"}},              // the title is searched
		{`release billing`, []string{"d"}},            // a document matches across title and body
		{`   quick    `, []string{"a", "b"}},          // surrounding space
		{"quick\tbrown\nfox\x00", []string{"a", "b"}}, // control characters are spaces
		{`(quick) [brown]`, []string{"a", "b"}},       // brackets are punctuation
	})
}

// testPunctuation checks that the words of a query split where those of
// the text do, so that a part of an address, a path, a host name or a
// number is found.
func testPunctuation(t *testing.T, h Harness) {
	ix := h.Open(t)
	put(t, ix,
		search.Doc{ID: "ops", Body: "Mail alice@example.com about /var/log/syslog on db-01.internal; see https://wiki.example.org/runbooks/disk-full?x=1. Pi is 3.14, v2.5.1 ships."},
		search.Doc{ID: "other", Body: "Nothing of the kind: example text about logs."},
	)
	findsEach(t, ix, []finding{
		{`alice`, []string{"ops"}},
		{`alice@example.com`, []string{"ops"}},
		{`"example com"`, []string{"ops"}},
		{`example.com`, []string{"ops"}},
		{`syslog`, []string{"ops"}},
		{`/var/log/syslog`, []string{"ops"}},
		{`"log syslog"`, []string{"ops"}},
		{`internal`, []string{"ops"}},
		{`db-01`, []string{"ops"}},
		{`runbooks`, []string{"ops"}},
		{`disk-full`, []string{"ops"}},
		{`wiki`, []string{"ops"}},
		{`3.14`, []string{"ops"}},
		{`14`, []string{"ops"}},
		{`v2.5.1`, []string{"ops"}},
		{`example`, []string{"ops", "other"}},
	})
}

func testStems(t *testing.T, h Harness) {
	ix := h.Open(t)
	put(t, ix,
		search.Doc{ID: "c", Body: "the connection was reset"},
		search.Doc{ID: "r", Body: "she runs every morning"},
		search.Doc{ID: "d", Body: "we deployed the service"},
	)
	for _, tc := range []struct {
		query   string
		want    []string
		stemmed bool // the query's word is not in the text as written
	}{
		{`connection`, []string{"c"}, false},
		{`runs`, []string{"r"}, false},
		{`deployed`, []string{"d"}, false},
		{`depl*`, []string{"d"}, false},
		{`connections`, []string{"c"}, true},
		{`connected`, []string{"c"}, true},
		{`deploys`, []string{"d"}, true},
		{`deploying`, []string{"d"}, true},
		{`run`, []string{"r"}, true},
	} {
		want := tc.want
		if tc.stemmed && !h.Features.Stems {
			want = nil
		}
		finds(t, ix, tc.query, want, fmt.Sprintf("(Features.Stems %v)", h.Features.Stems))
	}
}

func testUnicode(t *testing.T, h Harness) {
	ix := h.Open(t)
	put(t, ix,
		search.Doc{ID: "gr", Title: "Ελληνικά κείμενα", Body: "Η βάση δεδομένων"},
		search.Doc{ID: "jp", Body: "日本語のテキスト と 東京"},
		search.Doc{ID: "fr", Body: "Le café de la gare, un résumé de l'été."},
		search.Doc{ID: "de", Body: "Die Straße nach München"},
		search.Doc{ID: "emoji", Body: "deploy 😀 party 👩‍👩‍👧"},
		search.Doc{ID: "nfd", Body: "re\u0301sume\u0301 draft"}, // résumé with combining accents
		search.Doc{ID: "plain", Body: "cafe resume munchen"},
	)
	for _, tc := range []struct {
		query string
		want  []string
		fold  []string // the hits when Features.FoldsDiacritics, if they differ
	}{
		{`ελληνικά`, []string{"gr"}, nil},
		{`ΕΛΛΗΝΙΚΆ`, []string{"gr"}, nil},
		{`δεδομένων`, []string{"gr"}, nil},
		{`東京`, []string{"jp"}, nil},
		{`日本語*`, []string{"jp"}, nil},
		{`Straße`, []string{"de"}, nil},
		{`party`, []string{"emoji"}, nil},
		{`deploy 😀`, []string{"emoji"}, nil},
		{`café`, []string{"fr"}, []string{"fr", "plain"}},
		{`CAFÉ`, []string{"fr"}, []string{"fr", "plain"}},
		{`"de l'été"`, []string{"fr"}, nil},
		{`münchen`, []string{"de"}, []string{"de", "plain"}},
		{`cafe`, []string{"plain"}, []string{"fr", "plain"}},
		{`resume`, []string{"plain"}, []string{"fr", "nfd", "plain"}},
		{`résumé`, []string{"fr"}, []string{"fr", "nfd", "plain"}},
		{"re\u0301sume\u0301", []string{"nfd"}, []string{"fr", "nfd", "plain"}},
		{`ete`, nil, []string{"fr"}},
	} {
		want := tc.want
		if h.Features.FoldsDiacritics && tc.fold != nil {
			want = tc.fold
		}
		finds(t, ix, tc.query, want, fmt.Sprintf("(Features.FoldsDiacritics %v)", h.Features.FoldsDiacritics))
	}
}

// hostileQueries would be syntax errors, operators or injections of an
// index's own query language or of SQL, if passed through.
var hostileQueries = []string{
	`"`, `""`, `"""`, `'`, `''`, `"unbalanced`, `un"balanced`, `a"b"c"`,
	`(`, `)`, `(a OR b`, `a) AND (b`, `()`, `((((((((((`,
	`AND`, `OR`, `NOT`, `NEAR`, `NEAR(a b, 2)`, `a AND`, `OR b`, `a NOT`, `NEAR/3`, `a NEAR b`,
	`:`, `title:`, `:a`, `{title body}: x`, `-title: x`, `a:b:c`, `^a`, `+a`, `-a`, `a + b`,
	`*`, `**`, `* *`, `a**`, `*a`, `"*"`, `"a"**`, `a*b*c*`,
	`&`, `|`, `!`, `!a`, `a & b`, `a | b`, `a <-> b`, `a <2> b`, `a:*`, `a:AB`, `'a':*`, `!(a & b)`,
	`'; DROP TABLE docs; --`, `1' OR '1'='1`, `" OR 1=1 --`, `%`, `_`, `\`, `\"`, `a\`, `\'`, `$1`, `$$`, `E'\x41'`,
	`docs_fts`, `rank`, `MATCH`, `SELECT * FROM docs`, `bm25(docs_fts)`, `x) OR (1=1`,
	`weir_search_docs`, `to_tsquery('a')`, `'a' & 'b'`, `pg_sleep(10)`, `); DROP SCHEMA public CASCADE; --`,
	`é`, `日本語のテキスト`, `Ελληνικά`, `😀`, `👩‍👩‍👧`, "\u0301", "\ufeff", "\u200b", "e\u0301",
	"a\xffb", "a\x00b", `…«»`, `«a»`, "\U000F0000", "\ue000", `ǅ`, `ﬁ`, `ß`, `İ`,
	strings.Repeat("a ", search.MaxQueryTerms), strings.Repeat(`"`, 99), strings.Repeat("(", 500),
	strings.Repeat("x", search.MaxQueryBytes), strings.Repeat("ab", 1100) + " x", strings.Repeat("é", 1500),
}

func testHostile(t *testing.T, h Harness) {
	ix := h.Open(t)
	put(t, ix,
		search.Doc{ID: "1", Title: "and or not near", Body: "title body rank match select from docs drop table 1 a b c x é 日本語 ab"},
		search.Doc{ID: "2", Title: "Ελληνικά", Body: "fine print"},
	)
	for _, q := range hostileQueries {
		if _, err := ix.Search(context.Background(), q, 10); err != nil {
			t.Errorf("Search(%.40q): %v", q, err)
		}
	}
	// The index is intact after them all, and operator words are words.
	if n := count(t, ix); n != 2 {
		t.Errorf("Count = %d, want 2", n)
	}
	for _, q := range []string{`and or not near`, `a & b`, `a | b`, `!a`, `'a' & 'b'`, `a <-> b`, `a:*`} {
		finds(t, ix, q, []string{"1"})
	}
	// A word longer than any index keeps matches no document, and does
	// not widen an AND to the other words.
	finds(t, ix, "fine "+strings.Repeat("x", 3000), nil)
}

func testInvalidQueries(t *testing.T, h Harness) {
	ix := h.Open(t)
	ctx := context.Background()
	for _, q := range []string{"", " ", "\t\n", "\x00 \x01", "\xff\xfe", "\x00",
		strings.Repeat("x", search.MaxQueryBytes+1), strings.Repeat("a ", search.MaxQueryTerms+1)} {
		_, err := ix.Search(ctx, q, 10)
		var qe *search.QueryError
		if !errors.Is(err, search.ErrInvalid) || !errors.As(err, &qe) {
			t.Errorf("Search(%.20q): %v, want a QueryError wrapping ErrInvalid", q, err)
		}
	}
	for _, limit := range []int{0, -1} {
		if _, err := ix.Search(ctx, "x", limit); !errors.Is(err, search.ErrInvalid) {
			t.Errorf("Search limit %d: %v, want ErrInvalid", limit, err)
		}
		if _, err := ix.Entries(ctx, "", limit); !errors.Is(err, search.ErrInvalid) {
			t.Errorf("Entries limit %d: %v, want ErrInvalid", limit, err)
		}
	}
}

func testIgnoredWords(t *testing.T, h Harness) {
	ix := h.Open(t)
	put(t, ix, search.Doc{ID: "a", Title: "anything", Body: "! * ( ) \" at all"})
	for _, q := range []string{`* "" () !!!`, `*`, `😀`, `"()"*`} {
		hs, err := ix.Search(context.Background(), q, 10)
		if err != nil || hs == nil || len(hs) != 0 {
			t.Errorf("Search(%q) of ignored words = %v, %v; want an empty slice, nil", q, hs, err)
		}
	}
}

// FuzzQuery fuzzes Search: any query either searches without error or is
// refused with the *search.QueryError of search.ParseQuery, and never
// panics. Its seeds are the hostile queries of the suite and those
// given, which each index adds for its own query language.
func FuzzQuery(f *testing.F, h Harness, seeds ...string) {
	for _, q := range append(slices.Clone(hostileQueries), seeds...) {
		f.Add(q)
	}
	f.Add(`quick "brown fox" jump*`)
	ix := h.Open(f)
	docs := Corpus(50, 20)
	docs[0].Title = "quick brown fox"
	put(f, ix, docs...)
	f.Fuzz(func(t *testing.T, q string) {
		_, perr := search.ParseQuery(q)
		_, err := ix.Search(context.Background(), q, 5)
		if perr != nil {
			var qe *search.QueryError
			if !errors.As(err, &qe) || !errors.Is(err, search.ErrInvalid) {
				t.Fatalf("Search(%q): %v, want the QueryError %v", q, err, perr)
			}
			return
		}
		if err != nil {
			t.Fatalf("Search(%q): %v", q, err)
		}
	})
}
