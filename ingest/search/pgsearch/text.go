package pgsearch

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/weirhq/weir/ingest/search"
)

// fold returns the searchable form of s: what PostgreSQL indexes, and what
// ts_headline reads, in place of the text as written (see doc.go). It has
// one rune for each rune of s, so that a rune offset in it is the same
// offset in s:
//
//   - a letter or decimal digit is lower-cased (through upper case, so
//     that ς and σ, ſ and s fold together) and loses its diacritics (é is
//     e, ǖ is u, ø is o);
//   - a combining diacritical mark inside a word is dropped, and the word
//     padded with a space at its end instead, so that e followed by U+0301
//     reads as e, as the precomposed é does;
//   - another combining mark inside a word (a vowel sign of an Indic
//     script) is kept;
//   - anything else (punctuation, symbols, white space, control and
//     private-use characters, invalid UTF-8) is a space.
//
// The result holds only letters, digits, marks and spaces: PostgreSQL's
// parser sees plain words, split where weir's query syntax splits them
// (foo-bar, a.b and /var/log are words apart), with no host, e-mail, URL,
// file or version token, and no quote or backslash can reach a tsquery.
func fold(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	pad := 0 // diacritics dropped from the current word: written as spaces at its end
	inWord := false
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
				b.WriteByte(c)
				inWord = true
			case 'A' <= c && c <= 'Z':
				b.WriteByte(c + 'a' - 'A')
				inWord = true
			default:
				writeSpaces(&b, pad+1)
				pad, inWord = 0, false
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			writeSpaces(&b, pad+1)
			pad, inWord = 0, false
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(foldRune(r))
			inWord = true
		case inWord && isDiacritic(r):
			pad++
		case inWord && unicode.IsMark(r):
			b.WriteRune(r)
		default:
			writeSpaces(&b, pad+1)
			pad, inWord = 0, false
		}
	}
	writeSpaces(&b, pad)
	return b.String()
}

func writeSpaces(b *strings.Builder, n int) {
	for range n {
		b.WriteByte(' ')
	}
}

// foldRune is a non-ASCII letter or digit lower-cased and without its
// diacritics.
func foldRune(r rune) rune {
	r = unicode.ToLower(unicode.ToUpper(r))
	var buf [utf8.UTFMax]byte
	if d := norm.NFD.Properties(buf[:utf8.EncodeRune(buf[:], r)]).Decomposition(); d != nil {
		r = baseLetter(r, d)
	}
	switch r { // letters with a stroke, which have no decomposition
	case 'ø':
		return 'o'
	case 'ł':
		return 'l'
	case 'đ':
		return 'd'
	case 'ħ':
		return 'h'
	case 'ŧ':
		return 't'
	}
	return r
}

// baseLetter returns the letter that r's canonical decomposition d
// begins with, when the rest of d is diacritics; r otherwise (a Hangul
// syllable's jamo, an Indic nukta are not accents).
func baseLetter(r rune, d []byte) rune {
	base, size := utf8.DecodeRune(d)
	if !unicode.IsLetter(base) {
		return r
	}
	for rest := d[size:]; len(rest) > 0; rest = rest[size:] {
		var m rune
		m, size = utf8.DecodeRune(rest)
		if !isDiacritic(m) {
			return r
		}
	}
	return base
}

// isDiacritic reports whether r is in one of Unicode's blocks of
// combining diacritical marks.
func isDiacritic(r rune) bool {
	return 0x300 <= r && r <= 0x36f || 0x1ab0 <= r && r <= 0x1aff ||
		0x1dc0 <= r && r <= 0x1dff || 0x20d0 <= r && r <= 0x20ff || 0xfe20 <= r && r <= 0xfe2f
}

// isWordRune reports whether r belongs to a word of the text as written:
// a letter, a digit or a combining mark.
func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
}

// maxWordBytes is the longest word PostgreSQL's parser indexes; it drops
// longer ones.
const maxWordBytes = 2047

// tsQueries are the to_tsquery texts of a parsed query.
type tsQueries struct {
	// all is every term, ANDed: what a document must match.
	all string
	// each is each term alone, to count the terms each column matches.
	each []string
	// anyTerm is the terms ORed, for ts_headline: it marks every term
	// found in the column shown, even when the others are in another.
	anyTerm string
	// words are the words of the terms, separated by spaces, to find
	// where in a long text the snippet should be looked for.
	words string
}

// compile writes terms as to_tsquery texts: each word of a term's
// searchable form quoted ('word'), the words of a term joined by <->
// (followed by), :* after the last word of a prefix term, the terms
// joined by & (and | for anyTerm). The words hold only letters, digits
// and marks, so nothing in them is tsquery syntax; the quotes are doubled
// all the same. ok is false when a term cannot match any document: its
// searchable form has no word (only private-use characters), or a word
// longer than PostgreSQL indexes.
func compile(terms []search.Term) (q tsQueries, ok bool) {
	var all, anyTerm, allWords strings.Builder
	q.each = make([]string, 0, len(terms))
	for i, t := range terms {
		words := strings.Fields(fold(t.Text))
		if len(words) == 0 {
			return tsQueries{}, false
		}
		var e strings.Builder
		for j, w := range words {
			if len(w) > maxWordBytes {
				return tsQueries{}, false
			}
			if j > 0 {
				e.WriteString(" <-> ")
			}
			if allWords.Len() > 0 {
				allWords.WriteByte(' ')
			}
			allWords.WriteString(w)
			e.WriteByte('\'')
			e.WriteString(quoteOperand.Replace(w))
			e.WriteByte('\'')
		}
		if t.Prefix {
			e.WriteString(":*")
		}
		q.each = append(q.each, e.String())
		if i > 0 {
			all.WriteString(" & ")
			anyTerm.WriteString(" | ")
		}
		for _, b := range []*strings.Builder{&all, &anyTerm} {
			b.WriteByte('(')
			b.WriteString(e.String())
			b.WriteByte(')')
		}
	}
	q.all, q.anyTerm, q.words = all.String(), anyTerm.String(), allWords.String()
	return q, true
}

// quoteOperand doubles the characters that end or escape a quoted
// tsquery operand.
var quoteOperand = strings.NewReplacer(`'`, `''`, `\`, `\\`)

// vocabularyBudget is how many bytes of lexemes and positions a document's
// tsvector may take: PostgreSQL refuses one of more than 1 MiB - 1 (string
// is too long for tsvector), and the estimate below errs high.
const vocabularyBudget = 1_000_000

// indexedPrefixes returns, for each of texts (the searchable forms of a
// document's title, key terms and body, in that order), how many of its
// runes to index so that the document's tsvector fits budget bytes: all
// of them, unless the text's distinct words take more, which only a very
// large document of very many distinct words does. The tsvector keeps
// each distinct lexeme once, with a 2-byte position for each of its first
// 256 occurrences; a word's lexeme is taken as its length plus 8 bytes
// (its stem may be longer by a letter or two, its entry is aligned and
// counted), which errs high, since stemming merges words.
func indexedPrefixes(texts [3]string, budget int) [3]int32 {
	var caps [3]int32
	total := 0
	for _, s := range texts {
		total += len(s)
	}
	// A word of n bytes and its separator cost at most n+10 bytes, less
	// than 6 bytes for each of theirs.
	if 6*total+6 <= budget {
		for i, s := range texts {
			caps[i] = int32(utf8.RuneCountInString(s))
		}
		return caps
	}
	seen := make(map[string]int)
	used := 0
	full := true
	for i, s := range texts {
		if !full {
			continue // caps[i] stays 0: nothing more fits
		}
		caps[i] = int32(utf8.RuneCountInString(s))
		runes := 0 // runes of s before the current word
		for rest := s; rest != ""; {
			word, after, _ := strings.Cut(strings.TrimLeft(rest, " "), " ")
			runes += len(rest) - len(strings.TrimLeft(rest, " ")) // spaces are one byte
			if word == "" {
				break
			}
			if len(word) <= maxWordBytes {
				n := seen[word]
				cost := 2
				if n == 0 {
					cost += len(word) + 8
				} else if n >= 256 {
					cost = 0
				}
				if used+cost > budget {
					caps[i] = int32(runes)
					full = false
					break
				}
				used += cost
				seen[word] = n + 1
			}
			runes += utf8.RuneCountInString(word) + 1
			rest = after
		}
	}
	return caps
}
