package extract

import (
	"context"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Local is the deterministic extractor described in the package doc. It
// does no I/O and is safe for concurrent use.
type Local struct{}

var _ Extractor = (*Local)(nil)

// NewLocal returns a Local extractor.
func NewLocal() *Local { return &Local{} }

// Extract derives a Result from in. It fails only for poison input (a
// permanent error matching ErrNotText) and when ctx has ended.
func (l *Local) Extract(ctx context.Context, in Input) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	words, err := checkText(in.Text)
	if err != nil {
		return Result{}, err
	}
	return local(in, words), nil
}

// local extracts from text already checked, whose words are words.
func local(in Input, words []string) Result {
	title := titleOf(in)
	terms := terms(words)
	lang := language(terms)
	return Result{
		Title:     title,
		Language:  lang,
		WordCount: len(words),
		KeyTerms:  keyTerms(terms, lang),
		Summary:   summary(in.Text, title),
		Extractor: "local",
	}
}

// titleOf is Input.Title, trimmed, or the text's first non-empty line cut
// to MaxTitleRunes.
func titleOf(in Input) string {
	if t := strings.TrimSpace(in.Title); t != "" {
		return strings.ToValidUTF8(t, "\uFFFD")
	}
	for line := range strings.Lines(in.Text) {
		if line = strings.Join(strings.Fields(line), " "); line != "" {
			return cutWords(line, MaxTitleRunes, "")
		}
	}
	return ""
}

// cutWords returns s if it has at most n runes, else s cut to at most n
// runes, ellipsis included, on the last space in the second half of the
// cut, or hard when there is none; then ellipsis is appended.
func cutWords(s string, n int, ellipsis string) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	n -= utf8.RuneCountInString(ellipsis)
	rs := []rune(s)
	cut := rs[:n]
	if unicode.IsSpace(rs[n]) {
		return strings.TrimRight(string(cut), " ,;:-–—") + ellipsis
	}
	for i := n - 1; i > n/2; i-- {
		if unicode.IsSpace(cut[i]) {
			return strings.TrimRight(string(cut[:i]), " ,;:-–—") + ellipsis
		}
	}
	return string(cut) + ellipsis
}

// isWordRune reports whether r belongs to a word.
func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) }

func isJoiner(r rune) bool { return r == '\'' || r == '’' || r == '-' || r == '‐' }

// tokenize returns the words of s, as the package doc defines them.
func tokenize(s string) []string {
	var words []string
	start := -1
	var prevWord bool // the rune before i is a word rune
	for i, r := range s {
		switch {
		case isWordRune(r):
			if start < 0 {
				start = i
			}
			prevWord = true
			continue
		case start >= 0 && prevWord && isJoiner(r):
			next, _ := utf8.DecodeRuneInString(s[i+utf8.RuneLen(r):])
			if isWordRune(next) {
				prevWord = false
				continue
			}
		}
		if start >= 0 {
			words = append(words, s[start:i])
			start = -1
		}
		prevWord = false
	}
	if start >= 0 {
		words = append(words, s[start:])
	}
	return words
}

// elided are the articles and prepositions French and Italian elide before a
// vowel: l'homme, d'accord, qu'il, dell'anno.
var elided = set("c d j l m n s t qu jusqu lorsqu puisqu quoiqu dell nell all dall sull coll un")

// terms returns the lower-case terms of words for language and key terms:
// elided articles split off, "’" as "'".
func terms(words []string) []string {
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

// language returns the ISO 639-1 code of terms, or Undetermined.
func language(terms []string) string {
	var score [len(languages)]float64
	for _, t := range terms {
		if ls, ok := stopIndex[t]; ok {
			w := 1 / float64(len(ls))
			for _, l := range ls {
				score[l] += w
			}
		}
	}
	best, second := 0, -1
	for i := 1; i < len(score); i++ {
		if score[i] > score[best] {
			best, second = i, best
		} else if second < 0 || score[i] > score[second] {
			second = i
		}
	}
	b, s := score[best], score[second]
	if b < 2 || b < 1.5*s || b < 0.08*float64(len(terms)) {
		return Undetermined
	}
	return languages[best].code
}

// keyTerms returns up to MaxKeyTerms terms by frequency, ties by first
// appearance, without the stop words of lang.
func keyTerms(terms []string, lang string) []string {
	stop := allStop
	for _, l := range languages {
		if l.code == lang {
			stop = l.stop
		}
	}
	type term struct {
		t     string
		n     int
		first int
	}
	idx := make(map[string]int)
	var ts []term
	for i, t := range terms {
		t = strings.TrimSuffix(strings.TrimSuffix(t, "'s"), "'")
		if stop[t] || elided[t] || utf8.RuneCountInString(t) < 2 || !strings.ContainsFunc(t, unicode.IsLetter) {
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

// summary returns the lead of text: whole sentences while they fit in
// MaxSummaryRunes, or the first sentence cut on a word boundary.
func summary(text, title string) string {
	paras := paragraphs(text)
	if len(paras) > 1 && strings.EqualFold(paras[0], title) && !endsSentence(paras[0]) {
		paras = paras[1:]
	}
	var b strings.Builder
	n := 0
	for _, p := range paras {
		for _, s := range sentences(p) {
			sn := utf8.RuneCountInString(s)
			if n == 0 && sn > MaxSummaryRunes {
				return cutWords(s, MaxSummaryRunes, "…")
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

// paragraphs splits text on blank lines and collapses the white space of
// each paragraph.
func paragraphs(text string) []string {
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

func endsSentence(s string) bool {
	s = strings.TrimRight(s, `"'”’»)]`)
	r, _ := utf8.DecodeLastRuneInString(s)
	return r == '.' || r == '!' || r == '?' || r == '…' || r == '。'
}

// sentences splits a paragraph (single-spaced) after . ! ? or …, and any
// closing quotes or brackets, when a space and then an upper-case letter, a
// digit or an opening quote or bracket follow.
func sentences(p string) []string {
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

func startsSentence(r rune) bool {
	return unicode.IsUpper(r) || unicode.IsDigit(r) || strings.ContainsRune(`"'“‘«(¿¡[`, r)
}
