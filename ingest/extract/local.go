package extract

import (
	"bytes"
	"context"
	"iter"
	"slices"
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
	if err := checkText(in.Text); err != nil {
		return Result{}, err
	}
	return local(in), nil
}

// local extracts from text already checked. It reads the text once for its
// words, keeping only each distinct term's count, and the summary reads no
// further than it needs: its memory does not grow with the text but for
// the vocabulary.
func local(in Input) Result {
	title := titleOf(in)
	st := scan(in.Text)
	lang := st.language()
	return Result{
		Title:     title,
		Language:  lang,
		WordCount: st.words,
		KeyTerms:  st.keyTerms(lang),
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
		if line, _ = collapse(line, MaxTitleRunes+1); line != "" {
			return cutWords(line, MaxTitleRunes, "")
		}
	}
	return ""
}

// collapse returns the fields of s joined by single spaces, cut after max
// runes; cut reports that it was cut.
func collapse(s string, max int) (out string, cut bool) {
	var b strings.Builder
	n := 0
	for f := range strings.FieldsSeq(s) {
		if n > 0 {
			if n == max {
				return b.String(), true
			}
			b.WriteByte(' ')
			n++
		}
		for _, r := range f {
			if n == max {
				return b.String(), true
			}
			b.WriteRune(r)
			n++
		}
	}
	return b.String(), false
}

// cutWords returns s if it has at most n runes, else s cut to at most n
// runes, ellipsis included, on the last space in the second half of the
// cut, or hard when there is none; then ellipsis is appended. It reads no
// more of s than n+1 runes.
func cutWords(s string, n int, ellipsis string) string {
	end, count := 0, 0
	for end < len(s) && count <= n {
		_, size := utf8.DecodeRuneInString(s[end:])
		end += size
		count++
	}
	if count <= n {
		return s
	}
	n -= utf8.RuneCountInString(ellipsis)
	rs := []rune(s[:end])
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

// words yields the words of s, as the package doc defines them, in order.
func words(s string) iter.Seq[string] {
	return func(yield func(string) bool) {
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
				if !yield(s[start:i]) {
					return
				}
				start = -1
			}
			prevWord = false
		}
		if start >= 0 {
			yield(s[start:])
		}
	}
}

// elided are the articles and prepositions French and Italian elide before a
// vowel: l'homme, d'accord, qu'il, dell'anno.
var elided = set("c d j l m n s t qu jusqu lorsqu puisqu quoiqu dell nell all dall sull coll un")

// stats is what the language and the key terms need of a text's words:
// their number, and each distinct term's count and first position.
type stats struct {
	words int
	// terms counts the lower-case terms of the words: elided articles
	// split off, "’" as "'"; n is how many there are.
	terms map[string]*termCount
	n     int
	score [len(languages)]float64
	buf   []byte
}

type termCount struct {
	n, first int
}

// scan reads the words of text once.
func scan(text string) *stats {
	st := &stats{terms: make(map[string]*termCount)}
	for w := range words(text) {
		st.words++
		st.buf = st.buf[:0]
		for _, r := range w {
			if r == '’' {
				r = '\''
			}
			st.buf = utf8.AppendRune(st.buf, unicode.ToLower(r))
		}
		t := st.buf
		if i := bytes.IndexByte(t, '\''); i >= 0 && elided[string(t[:i])] {
			st.add(t[:i])
			t = t[i+1:]
		}
		st.add(t)
	}
	return st
}

// add counts one term. Only a term not seen before is copied.
func (st *stats) add(t []byte) {
	if c, ok := st.terms[string(t)]; ok {
		c.n++
	} else {
		st.terms[string(t)] = &termCount{n: 1, first: st.n}
	}
	if ls, ok := stopIndex[string(t)]; ok {
		w := 1 / float64(len(ls))
		for _, l := range ls {
			st.score[l] += w
		}
	}
	st.n++
}

// language returns the ISO 639-1 code of the text, or Undetermined.
func (st *stats) language() string { return pickLanguage(st.score, st.n) }

// pickLanguage returns the ISO 639-1 code of the language of highest
// score, the scores of the stop words among terms terms, or Undetermined
// when it is not clearly ahead.
func pickLanguage(score [len(languages)]float64, terms int) string {
	best, second := 0, -1
	for i := 1; i < len(score); i++ {
		if score[i] > score[best] {
			best, second = i, best
		} else if second < 0 || score[i] > score[second] {
			second = i
		}
	}
	b, s := score[best], score[second]
	if b < 2 || b < 1.5*s || b < 0.08*float64(terms) {
		return Undetermined
	}
	return languages[best].code
}

// keyTerms returns up to MaxKeyTerms terms by frequency, ties by first
// appearance, without the stop words of lang.
func (st *stats) keyTerms(lang string) []string {
	stop := stopWords(lang)
	type term struct {
		t        string
		n, first int
	}
	idx := make(map[string]int)
	var ts []term
	for raw, c := range st.terms {
		t, ok := keyTerm(raw, stop)
		if !ok {
			continue
		}
		if j, ok := idx[t]; ok {
			ts[j].n += c.n
			ts[j].first = min(ts[j].first, c.first)
			continue
		}
		idx[t] = len(ts)
		ts = append(ts, term{t: t, n: c.n, first: c.first})
	}
	slices.SortFunc(ts, func(a, b term) int {
		if a.n != b.n {
			return b.n - a.n
		}
		return a.first - b.first
	})
	out := make([]string, 0, min(MaxKeyTerms, len(ts)))
	for _, t := range ts[:min(MaxKeyTerms, len(ts))] {
		out = append(out, t.t)
	}
	return out
}

// stopWords are the stop words of lang, or of every language for
// Undetermined.
func stopWords(lang string) map[string]bool {
	for _, l := range languages {
		if l.code == lang {
			return l.stop
		}
	}
	return allStop
}

// keyTerm returns the term raw counts as among the key terms (an English
// possessive counts as its word), and whether it may be one: not a stop
// word nor an elided article, of two runes or more, a letter among them.
func keyTerm(raw string, stop map[string]bool) (string, bool) {
	t := strings.TrimSuffix(strings.TrimSuffix(raw, "'s"), "'")
	return t, !stop[t] && !elided[t] && utf8.RuneCountInString(t) >= 2 && strings.ContainsFunc(t, unicode.IsLetter)
}

// summary returns the lead of text: whole sentences while they fit in
// MaxSummaryRunes, or the first sentence cut on a word boundary. It reads
// the paragraphs one at a time, each cut a little past the longest any
// decision needs, and stops when the summary is full.
func summary(text, title string) string {
	// Past the cut, a sentence is longer than the room left (or than the
	// title, for the comparison with it), with three runes to spare for
	// the space and capital that end a sentence.
	pr := paragraphReader{text: text, max: max(MaxSummaryRunes, utf8.RuneCountInString(title)) + 3}
	p, cut, ok := pr.next()
	if !ok {
		return ""
	}
	if !cut && strings.EqualFold(p, title) && !endsSentence(p) {
		if q, qcut, more := pr.next(); more {
			p, cut = q, qcut
		}
	}
	var b strings.Builder
	n := 0
	for {
		for s, last := range sentences(p) {
			// The last sentence of a cut paragraph goes on past the cut:
			// longer than any room left but the whole summary's.
			incomplete := cut && last
			sn := utf8.RuneCountInString(s)
			if n == 0 && (sn > MaxSummaryRunes || incomplete) {
				return cutWords(s, MaxSummaryRunes, "…")
			}
			if n > 0 && (n+1+sn > MaxSummaryRunes || incomplete) {
				return b.String()
			}
			if n > 0 {
				b.WriteByte(' ')
				n++
			}
			b.WriteString(s)
			n += sn
		}
		if p, cut, ok = pr.next(); !ok {
			return b.String()
		}
	}
}

// paragraphReader splits text on blank lines and collapses the white space
// of each paragraph, cut after max runes.
type paragraphReader struct {
	text string
	max  int
}

func (pr *paragraphReader) next() (p string, cut, ok bool) {
	var b strings.Builder
	n := 0
	for len(pr.text) > 0 {
		line, rest, _ := strings.Cut(pr.text, "\n")
		pr.text = rest
		if strings.TrimSpace(line) == "" {
			if n > 0 || cut {
				return b.String(), cut, true
			}
			continue
		}
		if cut {
			continue // the rest of a paragraph already cut
		}
		for f := range strings.FieldsSeq(line) {
			if n > 0 {
				if n == pr.max {
					cut = true
					break
				}
				b.WriteByte(' ')
				n++
			}
			for _, r := range f {
				if n == pr.max {
					cut = true
					break
				}
				b.WriteRune(r)
				n++
			}
			if cut {
				break
			}
		}
	}
	return b.String(), cut, n > 0
}

func endsSentence(s string) bool {
	s = strings.TrimRight(s, `"'”’»)]`)
	r, _ := utf8.DecodeLastRuneInString(s)
	return r == '.' || r == '!' || r == '?' || r == '…' || r == '。'
}

// sentences yields the sentences of a paragraph (single-spaced), and
// whether each is the last: it splits after . ! ? or …, and any closing
// quotes or brackets, when a space and then an upper-case letter, a digit
// or an opening quote or bracket follow.
func sentences(p string) iter.Seq2[string, bool] {
	return func(yield func(string, bool) bool) {
		start := 0
		for i := 0; i < len(p); {
			r, size := utf8.DecodeRuneInString(p[i:])
			i += size
			if r != '.' && r != '!' && r != '?' && r != '…' {
				continue
			}
			end := i
			for end < len(p) {
				c, size := utf8.DecodeRuneInString(p[end:])
				if !strings.ContainsRune(`"'”’»)]`, c) {
					break
				}
				end += size
			}
			if end+1 < len(p) && p[end] == ' ' {
				if next, _ := utf8.DecodeRuneInString(p[end+1:]); startsSentence(next) {
					if !yield(p[start:end], false) {
						return
					}
					start = end + 1
				}
			}
		}
		if start < len(p) {
			yield(p[start:], true)
		}
	}
}

func startsSentence(r rune) bool {
	return unicode.IsUpper(r) || unicode.IsDigit(r) || strings.ContainsRune(`"'“‘«(¿¡[`, r)
}
