package searchtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/weirhq/weir/ingest/search"
)

// testLargeDocument stores a body of about 1 MB of words, with words of
// its own at its start, middle and end, and finds each.
func testLargeDocument(t *testing.T, h Harness) {
	ix := h.Open(t)
	var b strings.Builder
	b.WriteString("alphamarker opens the text. ")
	for i, d := range Corpus(250, 800) {
		if i == 125 {
			b.WriteString("Here middlemarker stands. ")
		}
		b.WriteString(d.Body)
		b.WriteString(".\n")
	}
	b.WriteString("The text ends with omegamarker.")
	d := search.Doc{ID: "large", Title: "A large document", Body: b.String()}
	if len(d.Body) < 1_000_000 {
		t.Fatalf("the body is %d bytes, want 1 MB", len(d.Body))
	}
	put(t, ix, d, search.Doc{ID: "small", Title: "A small document", Body: "small"})
	got, err := ix.Get(context.Background(), "large")
	if err != nil || got.Body != d.Body {
		t.Fatalf("Get of a %d-byte body: %d bytes back, %v", len(d.Body), len(got.Body), err)
	}
	// (Each search makes a snippet of the body: a few are enough.)
	for _, q := range []string{`"alphamarker opens"`, "middlemarker", "omegamarker"} {
		hs := hits(t, ix, q)
		if len(hs) != 1 || hs[0].ID != "large" {
			t.Errorf("Search(%q): %d hits, want the large document", q, len(hs))
			continue
		}
		checkSnippet(t, d, hs[0].Snippet)
		if q == "omegamarker" && (!strings.HasPrefix(hs[0].Snippet, ellipsis) || !slices.Contains(marked(hs[0].Snippet), "omegamarker")) {
			t.Errorf("snippet %q at the end of a large body: want an ellipsis before it and the word marked", hs[0].Snippet)
		}
	}
}

// testManyDistinctWords stores a body of 110,000 distinct words (770 kB,
// whose lexemes and positions take 1.1 MB, more than a PostgreSQL
// tsvector holds): it is stored whole, and its first words are found;
// its last one too where Features.UnboundedVocabulary.
func testManyDistinctWords(t *testing.T, h Harness) {
	ix := h.Open(t)
	words := make([]string, 110_000)
	for i := range words {
		words[i] = fmt.Sprintf("w%05x", i*2654435761%(1<<20)) // distinct: the factor is odd
	}
	d := search.Doc{ID: "many", Title: "Many words", Body: strings.Join(words, " ")}
	put(t, ix, d)
	got, err := ix.Get(context.Background(), "many")
	if err != nil || got.Body != d.Body {
		t.Fatalf("Get: %d bytes back of %d, %v", len(got.Body), len(d.Body), err)
	}
	for _, w := range []string{words[0], "many " + words[1000]} {
		finds(t, ix, w, []string{"many"})
	}
	if h.Features.UnboundedVocabulary {
		for _, w := range []string{words[len(words)-1]} {
			finds(t, ix, w, []string{"many"}, "(Features.UnboundedVocabulary)")
		}
	}
}

// testDeepPhrase finds the words of a phrase that stands after 20,000
// words, and the phrase itself where Features.PhrasesAnywhere.
func testDeepPhrase(t *testing.T, h Harness) {
	ix := h.Open(t)
	body := strings.Repeat("filler text of a long body, ", 5000) + "and then the deep phrase stands here at last."
	put(t, ix, search.Doc{ID: "deep", Body: body})
	finds(t, ix, "deep phrase stands", []string{"deep"})
	if !h.Features.PhrasesAnywhere {
		return
	}
	finds(t, ix, `"deep phrase stands"`, []string{"deep"}, "(Features.PhrasesAnywhere)")
	finds(t, ix, `"phrase deep"`, nil)
}
