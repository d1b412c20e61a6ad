package searchtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/weirhq/weir/ingest/search"
)

// The markers every index puts in its snippets (the seam documents
// search/fts's, and the others keep them).
const (
	markStart = "«"
	markEnd   = "»"
	ellipsis  = "…"
)

func testRankColumns(t *testing.T, h Harness) {
	ix := h.Open(t)
	put(t, ix,
		search.Doc{ID: "1-body", Title: "Weekly notes", Body: "We talked about the migration plan and lunch."},
		search.Doc{ID: "2-title", Title: "Migration plan", Body: "Steps for moving the database next week."},
		search.Doc{ID: "3-terms", Title: "Misc", Body: "Nothing here about it really, we discussed other things at length.", Terms: []string{"migration"}},
		search.Doc{ID: "4-none", Title: "Lunch", Body: "Pizza."},
	)
	ranks(t, ix, "migration", "2-title", "3-terms", "1-body")
	ranks(t, ix, "migration plan", "2-title", "1-body")
}

func testRankMoreMatches(t *testing.T, h Harness) {
	ix := h.Open(t)
	// Bodies of the same length: only the number of matches differs.
	put(t, ix,
		search.Doc{ID: "one", Body: "the cache was cold after the restart of the node and the load went up"},
		search.Doc{ID: "three", Body: "the cache was cold and the cache missed and the cache filled up slowly"},
		search.Doc{ID: "two", Body: "the cache was cold after the restart and the cache filled up slowly"},
		search.Doc{ID: "zero", Body: "the disk was cold after the restart of the node and the load went up"},
	)
	ranks(t, ix, "cache", "three", "two", "one")
	// Two words: the document with both twice above those with them once.
	put(t, ix,
		search.Doc{ID: "p1", Body: "replica lag grew while the primary was busy with other work today"},
		search.Doc{ID: "p2", Body: "replica lag grew and replica lag stayed while the primary was busy"},
	)
	ranks(t, ix, "replica lag", "p2", "p1")
}

func testScores(t *testing.T, h Harness) {
	ix := h.Open(t)
	put(t, ix, Corpus(200, 50)...)
	for _, q := range []string{topics[0], topics[1][:3] + "*", `"primary disk"`, vocabulary()[0]} {
		hs, err := ix.Search(context.Background(), q, 50)
		if err != nil {
			t.Fatal(err)
		}
		for i, hit := range hs {
			if hit.Score <= 0 {
				t.Errorf("%s: hit %s has score %v, want positive (higher is better)", q, hit.ID, hit.Score)
			}
			if i > 0 && (hit.Score > hs[i-1].Score || hit.Score == hs[i-1].Score && hit.ID < hs[i-1].ID) {
				t.Errorf("%s: hit %d (%s, %v) ranks after %s (%v): want scores descending, then ids ascending",
					q, i, hit.ID, hit.Score, hs[i-1].ID, hs[i-1].Score)
			}
		}
	}
}

func testLimit(t *testing.T, h Harness) {
	ix := h.Open(t)
	ctx := context.Background()
	docs := make([]search.Doc, search.MaxLimit+5)
	for i := range docs {
		docs[i] = search.Doc{ID: fmt.Sprintf("d%05d", (i*7919)%len(docs)), Body: "common word"}
	}
	put(t, ix, docs...)
	hs, err := ix.Search(ctx, "common", search.MaxLimit*10)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != search.MaxLimit {
		t.Errorf("%d hits, want the cap %d", len(hs), search.MaxLimit)
	}
	// Which of equal hits make the cut is the index's choice; those
	// returned are in id order.
	for _, limit := range []int{3, 50} {
		hs, err = ix.Search(ctx, "common", limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(hs) != limit || !slices.IsSortedFunc(hs, func(a, b search.Hit) int { return strings.Compare(a.ID, b.ID) }) {
			t.Errorf("limit %d of equal scores: %d hits, want %d in id order", limit, len(hs), limit)
		}
	}
	es, err := ix.Entries(ctx, "", search.MaxLimit*10)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != search.MaxLimit {
		t.Errorf("%d entries, want the cap %d", len(es), search.MaxLimit)
	}
}

func testHitFields(t *testing.T, h Harness) {
	ix := h.Open(t)
	at := time.Date(2025, 1, 2, 3, 4, 5, 6000, time.UTC)
	put(t, ix, search.Doc{
		ID: "h", Title: "Postmortem", Summary: "What broke.", Source: "lists/dev.mbox#12", Language: "en", UpdatedAt: at,
		Body: "On Tuesday the primary database ran out of disk space.", Terms: []string{"outage"},
	})
	hs := hits(t, ix, "disk")
	if len(hs) != 1 {
		t.Fatalf("hits %+v, want one", hs)
	}
	hit := hs[0]
	if hit.ID != "h" || hit.Title != "Postmortem" || hit.Summary != "What broke." || hit.Source != "lists/dev.mbox#12" || !hit.UpdatedAt.Equal(at) {
		t.Errorf("hit %+v does not carry the document's fields", hit)
	}
}

// checkSnippet checks what every snippet is: one fragment of one of the
// document's texts (title, body or key terms joined by ", "), with
// balanced markers, an ellipsis only at its ends, at most 16 words.
func checkSnippet(t *testing.T, d search.Doc, snippet string) {
	t.Helper()
	plain := strings.NewReplacer(markStart, "", markEnd, "").Replace(snippet)
	plain = strings.TrimSuffix(strings.TrimPrefix(plain, ellipsis), ellipsis)
	if strings.Contains(plain, ellipsis) {
		t.Errorf("snippet %q: an ellipsis inside it", snippet)
	}
	if !strings.Contains(d.Title, plain) && !strings.Contains(d.Body, plain) && !strings.Contains(strings.Join(d.Terms, ", "), plain) {
		t.Errorf("snippet %q is not a fragment of the document's text", snippet)
	}
	depth := 0
	for _, r := range snippet {
		switch string(r) {
		case markStart:
			depth++
		case markEnd:
			depth--
		}
		if depth < 0 || depth > 1 {
			t.Errorf("snippet %q: unbalanced markers", snippet)
			break
		}
	}
	if n := len(strings.FieldsFunc(plain, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })); n > 16 {
		t.Errorf("snippet %q: %d words, want at most 16", snippet, n)
	}
}

// marked returns the words between markers in a snippet. An index may
// mark a phrase's words together or one by one.
func marked(snippet string) []string {
	var out []string
	for rest := snippet; ; {
		_, after, ok := strings.Cut(rest, markStart)
		if !ok {
			return out
		}
		span, after, _ := strings.Cut(after, markEnd)
		out = append(out, strings.FieldsFunc(span, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })...)
		rest = after
	}
}

func testSnippet(t *testing.T, h Harness) {
	ix := h.Open(t)
	docs := []search.Doc{
		{ID: "a1", Title: "Disk full on the primary", Body: "The primary database ran out of disk; replicas lagged."},
		{ID: "b2", Title: "Weekly notes", Body: "Planning, and a short note about the disk budget."},
		{ID: "c3", Title: "Errors", Body: "A TLS handshake failed, twice: TLS-handshake errors."},
		{ID: "d4", Title: "Menu", Body: "Le Café de la Gare, un résumé."},
		{ID: "e5", Title: "Misc", Body: "Unrelated words here.", Terms: []string{"kernel", "scheduler latency"}},
	}
	put(t, ix, docs...)
	byID := map[string]search.Doc{}
	for _, d := range docs {
		byID[d.ID] = d
	}
	accent := "café"
	if h.Features.FoldsDiacritics {
		accent = "cafe" // the snippet marks the word as written all the same
	}
	for _, tc := range []struct {
		query, id string
		want      string   // the whole snippet, if given
		marks     []string // the marked words, as written
	}{
		// The title shows when it matches as well as the body does.
		{`disk`, "a1", "«Disk» full on the primary", []string{"Disk"}},
		// The text as written: its case and punctuation, to its end.
		{`disk`, "b2", "Planning, and a short note about the «disk» budget.", []string{"disk"}},
		{`replicas`, "a1", "", []string{"replicas"}},
		{`lagged`, "a1", "", []string{"lagged"}},
		// A prefix marks the whole word.
		{`hand*`, "c3", "", []string{"handshake", "handshake"}},
		{`"tls handshake"`, "c3", "", []string{"TLS", "handshake", "TLS", "handshake"}},
		{accent, "d4", "", []string{"Café"}},
		{`gare caf*`, "d4", "", []string{"Café", "Gare"}},
		// The key terms show when they alone match.
		{`latency`, "e5", "", []string{"latency"}},
	} {
		var hit *search.Hit
		for _, x := range hits(t, ix, tc.query) {
			if x.ID == tc.id {
				hit = &x
			}
		}
		if hit == nil {
			t.Errorf("Search(%q): %s not found", tc.query, tc.id)
			continue
		}
		checkSnippet(t, byID[tc.id], hit.Snippet)
		if tc.want != "" && hit.Snippet != tc.want {
			t.Errorf("Search(%q): snippet of %s %q, want %q", tc.query, tc.id, hit.Snippet, tc.want)
		}
		if got := marked(hit.Snippet); !slices.Equal(got, tc.marks) {
			t.Errorf("Search(%q): snippet of %s %q marks %q, want %q", tc.query, tc.id, hit.Snippet, got, tc.marks)
		}
	}
}

func testSnippetFragment(t *testing.T, h Harness) {
	ix := h.Open(t)
	var words []string
	for i := range 200 {
		words = append(words, fmt.Sprintf("filler%c%c", 'a'+i%26, 'a'+i/26))
	}
	words[100] = "needle"
	d := search.Doc{ID: "long", Title: "A long body", Body: strings.Join(words, " ") + "."}
	put(t, ix, d)
	hs := hits(t, ix, "needle")
	if len(hs) != 1 {
		t.Fatalf("hits %+v, want one", hs)
	}
	s := hs[0].Snippet
	checkSnippet(t, d, s)
	if !strings.HasPrefix(s, ellipsis) || !strings.HasSuffix(s, ellipsis) {
		t.Errorf("snippet %q of a match in the middle of 200 words: want an ellipsis at both ends", s)
	}
	if got := marked(s); !slices.Equal(got, []string{"needle"}) {
		t.Errorf("snippet %q marks %q, want [needle]", s, got)
	}
	if n := len(strings.Fields(s)); n < 8 {
		t.Errorf("snippet %q: %d words, want some context around the match", s, n)
	}
}
