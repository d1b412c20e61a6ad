package extract

import (
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// This file keeps the local extractor as it was before it was made to read
// a text once without a list of its words, and to stop reading for the
// summary once the summary is full; FuzzLocalMatchesReference checks that
// both give the same result. What did not change (the words of a text,
// where a sentence ends and starts) is local.go's, called from here: the
// test compares the parts that were rewritten.

// refLocal extracts from text already checked, whose words are words.
func refLocal(in Input, words []string) Result {
	title, terms := refTitleOf(in), refTerms(words)
	lang := refLanguage(terms)
	return Result{Title: title, Language: lang, WordCount: len(words), KeyTerms: refKeyTerms(terms, lang),
		Summary: refSummary(in.Text, title), Extractor: "refLocal"}
}

// refTitleOf is Input.Title, trimmed, or the text's first line that is
// not blank, its white space collapsed, cut to MaxTitleRunes.
func refTitleOf(in Input) string {
	if t := strings.TrimSpace(in.Title); t != "" {
		return strings.ToValidUTF8(t, "\uFFFD")
	}
	for _, line := range strings.Split(in.Text, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			return refCutWords(strings.Join(f, " "), MaxTitleRunes, "")
		}
	}
	return ""
}

// refCutWords returns s if it has at most n runes, else s cut to at most n
// runes, ellipsis included, on the last space in the second half of the
// cut, or hard when there is none; then ellipsis is appended.
func refCutWords(s string, n int, ellipsis string) string {
	rs := []rune(s)
	if len(rs) <= n {
		return s
	}
	n -= utf8.RuneCountInString(ellipsis)
	end := n // the cut: at a space at n, else the last one past n/2
	for end > n/2 && !unicode.IsSpace(rs[end]) {
		end--
	}
	if end == n/2 {
		return string(rs[:n]) + ellipsis
	}
	return strings.TrimRight(string(rs[:end]), " ,;:-–—") + ellipsis
}

// refTerms returns the lower-case refTerms of words for refLanguage and key refTerms:
// elided articles split off, "’" as "'".
func refTerms(words []string) []string {
	out := make([]string, 0, len(words))
	for _, w := range words {
		w = strings.ToLower(strings.ReplaceAll(w, "’", "'"))
		if pre, rest, ok := strings.Cut(w, "'"); ok && elided[pre] {
			out = append(out, pre)
			w = rest
		}
		out = append(out, w)
	}
	return out
}

// refLanguage returns the ISO 639-1 code of refTerms, or Undetermined: it
// scores the stop words as the extractor did before it streamed them, and
// picks as it does.
func refLanguage(refTerms []string) string {
	var score [len(languages)]float64
	for _, t := range refTerms {
		if ls, ok := stopIndex[t]; ok {
			w := 1 / float64(len(ls))
			for _, l := range ls {
				score[l] += w
			}
		}
	}
	return pickLanguage(score, len(refTerms))
}

// refKeyTerms returns up to MaxKeyTerms refTerms by frequency, ties by first
// appearance, without the stop words of lang.
func refKeyTerms(refTerms []string, lang string) []string {
	stop := stopWords(lang)
	type term struct {
		t     string
		n     int
		first int
	}
	idx := make(map[string]int)
	var ts []term
	for i, raw := range refTerms {
		t, ok := keyTerm(raw, stop)
		if !ok {
			continue
		}
		if j, ok := idx[t]; ok {
			ts[j].n++
			continue
		}
		idx[t] = len(ts)
		ts = append(ts, term{t: t, n: 1, first: i})
	}
	// A stable selection: the order of ts is first appearance.
	out := make([]string, 0, min(MaxKeyTerms, len(ts)))
	used := make([]bool, len(ts))
	for len(out) < MaxKeyTerms && len(out) < len(ts) {
		best := -1
		for j := range ts {
			if !used[j] && (best < 0 || ts[j].n > ts[best].n) {
				best = j
			}
		}
		used[best] = true
		out = append(out, ts[best].t)
	}
	return out
}

// refSummary returns the lead of text: whole refSentences while they fit in
// MaxSummaryRunes, or the first sentence cut on a word boundary.
func refSummary(text, title string) string {
	paras := refParagraphs(text)
	if len(paras) > 1 && strings.EqualFold(paras[0], title) && !endsSentence(paras[0]) {
		paras = paras[1:]
	}
	var b strings.Builder
	n := 0
	for _, p := range paras {
		for _, s := range refSentences(p) {
			sn := utf8.RuneCountInString(s)
			if n == 0 && sn > MaxSummaryRunes {
				return refCutWords(s, MaxSummaryRunes, "…")
			}
			if n > 0 && n+1+sn > MaxSummaryRunes {
				return b.String()
			}
			if n > 0 {
				b.WriteByte(' ')
				n++
			}
			b.WriteString(s)
			n += sn
		}
	}
	return b.String()
}

// refParagraphs splits text on blank lines and collapses the white space of
// each paragraph.
func refParagraphs(text string) []string {
	var out []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.Join(cur, " "))
			cur = cur[:0]
		}
	}
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) == 0 {
			flush()
			continue
		}
		cur = append(cur, f...)
	}
	flush()
	return out
}

// refSentences splits a paragraph (single-spaced) after . ! ? or …, and any
// closing quotes or brackets, when a space and then an upper-case letter, a
// digit or an opening quote or bracket follow.
func refSentences(p string) []string {
	var out []string
	start := 0
	rs := []rune(p)
	pos := 0 // byte offset of rs[i]
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		size := utf8.RuneLen(r)
		if r == '.' || r == '!' || r == '?' || r == '…' {
			j, end := i+1, pos+size
			for j < len(rs) && strings.ContainsRune(`"'”’»)]`, rs[j]) {
				end += utf8.RuneLen(rs[j])
				j++
			}
			if j+1 < len(rs) && rs[j] == ' ' && startsSentence(rs[j+1]) {
				out = append(out, p[start:end])
				start = end + 1
			}
		}
		pos += size
	}
	if start < len(p) {
		out = append(out, p[start:])
	}
	return out
}

// FuzzLocalMatchesReference: the local extractor gives what the one before
// it gave, on any text it accepts.
func FuzzLocalMatchesReference(f *testing.F) {
	long := strings.Repeat("alpha beta ", 40)
	for _, s := range []string{
		"Session notes\n\nThe reservoir levels dropped. Engineers inspected the gates.",
		"Le conseil a décidé. L'homme d'accord, qu'il dell'anno.", "Zebra apple. The zebra's apple! L'mango, mango",
		long + "end.", strings.Repeat("x", 299) + ". " + "Next one here.", strings.Repeat("y", 300) + ". Z",
		"T\n\n" + strings.Repeat("w ", 151) + ". A", "\"Quoted.\" Then (more)! «Yes»", "a.b. C… d? E",
	} {
		f.Add("", s)
	}
	f.Add("Session notes", "Session notes\n\nBody. More.")
	f.Fuzz(func(t *testing.T, title, text string) {
		if checkText(text) != nil {
			return
		}
		got := local(Input{Title: title, Text: text})
		want := refLocal(Input{Title: title, Text: text}, slices.Collect(words(text)))
		if got.Title != want.Title || got.Language != want.Language || got.WordCount != want.WordCount ||
			strings.Join(got.KeyTerms, "|") != strings.Join(want.KeyTerms, "|") || got.Summary != want.Summary {
			t.Fatalf("local(%q, %q)\n= %+v\nwant %+v", title, text, got, want)
		}
	})
}

// TestLocalMatchesReferenceAtTheCut: around the place where the summary
// stops reading a paragraph, sentences of every length, closing quotes and
// long titles give what the extractor before gave.
func TestLocalMatchesReferenceAtTheCut(t *testing.T) {
	t.Parallel()
	word := func(n int) string { // n runes of words, no sentence end
		b := []rune(strings.Repeat("éa bc ", n))[:n]
		b[0] = 'X'
		return string(b)
	}
	var texts []string
	for n := 280; n <= 320; n++ {
		for _, end := range []string{".", ".\"", ".\"”»)", "…", "?", ". ", ". \n"} {
			for _, next := range []string{" Next one.", " next one.", "\n\nNew paragraph.", "", " (Aside.) More."} {
				texts = append(texts, word(n)+end+next, "Short one. "+word(n)+end+next)
			}
		}
	}
	for _, text := range texts {
		for _, title := range []string{"", strings.SplitN(text, "\n", 2)[0], word(310)} {
			got := local(Input{Title: title, Text: text})
			want := refLocal(Input{Title: title, Text: text}, slices.Collect(words(text)))
			if got.Summary != want.Summary || got.Title != want.Title {
				t.Fatalf("local(%q, %q):\nsummary %q\nwant    %q", title, text, got.Summary, want.Summary)
			}
		}
		in := Input{Text: word(300) + "\n\n" + text}
		if got, want := local(in), refLocal(in, slices.Collect(words(in.Text))); got.Summary != want.Summary {
			t.Fatalf("title paragraph %q: summary %q, want %q", in.Text, got.Summary, want.Summary)
		}
	}
}
