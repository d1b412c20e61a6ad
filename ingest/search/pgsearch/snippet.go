package pgsearch

import (
	"strings"
	"unicode/utf8"
)

// The snippet's markers, the same as search/fts's.
const (
	// MarkStart and MarkEnd enclose each matched word of a Hit's Snippet.
	MarkStart = "«"
	MarkEnd   = "»"
	// Ellipsis stands for the text a Snippet leaves out.
	Ellipsis = "…"
)

// snippetContext is how many runes of the text as written the search
// reads beyond each end of the headline: enough to finish its last word
// and to see whether only punctuation lies between it and the text's end.
const snippetContext = 64

// headline is what the search query returns for a hit's snippet: PostgreSQL's
// ts_headline of the searchable form (fold) of the column shown, and the
// text as written around the same place.
type headline struct {
	// marked is ts_headline's fragment of the searchable form, with
	// MarkStart and MarkEnd around the matched words. The searchable form
	// holds neither marker, so every one in marked is ts_headline's.
	marked string
	// at is the 1-based rune offset of the fragment (marked without its
	// markers) in the searchable form; 0 if it was not found there.
	at int
	// text is the text as written from rune at on, snippetContext runes
	// longer than the fragment.
	text string
	// before is the text as written just before rune at: at most
	// snippetContext runes.
	before string
	// total is the length of the text as written, in runes.
	total int
}

// snippet writes the fragment of the text as written that h.marked marks
// in the searchable form. The two have one rune for each other's, except
// that a word whose diacritics were combining marks is shorter in the
// searchable form and padded with spaces after it: so each rune of the
// fragment is replaced by the text's rune at the same offset, and a
// MarkEnd is moved past the rest of its word in the text (the padding's
// spaces, which follow it in the fragment, are then skipped). Ellipsis
// stands where words of the text were left out before or after; where
// only punctuation or space was, it is kept.
func snippet(h headline) string {
	if h.at < 1 {
		// Never seen (ts_headline returns a part of its input); the
		// searchable form is better than nothing.
		return h.marked
	}
	var b strings.Builder
	b.Grow(len(h.marked) + 2*len(Ellipsis))
	if h.at > 1 {
		if h.at-1 > utf8.RuneCountInString(h.before) || strings.IndexFunc(h.before, isWordRune) >= 0 {
			b.WriteString(Ellipsis)
		} else {
			b.WriteString(h.before)
		}
	}
	text := []rune(h.text)
	j := 0          // the next rune of text
	skip := 0       // runes of marked that stand for runes already written
	inWord := false // the last rune written belongs to a word
	finishWord := func() int {
		n := 0
		for inWord && j < len(text) && isWordRune(text[j]) {
			b.WriteRune(text[j])
			j++
			n++
		}
		return n
	}
	for _, r := range h.marked {
		switch {
		case string(r) == MarkStart:
			b.WriteString(MarkStart)
		case string(r) == MarkEnd:
			skip += finishWord()
			b.WriteString(MarkEnd)
		case skip > 0:
			skip--
		case j < len(text):
			inWord = isWordRune(text[j])
			b.WriteRune(text[j])
			j++
		}
	}
	finishWord()
	if left := h.total - (h.at - 1) - j; left > 0 {
		rest := string(text[j:])
		if left > len(text)-j || strings.IndexFunc(rest, isWordRune) >= 0 {
			b.WriteString(Ellipsis)
		} else {
			b.WriteString(rest)
		}
	}
	return b.String()
}
