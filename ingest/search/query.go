package search

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of a query, beyond which ParseQuery refuses it.
const (
	// MaxQueryBytes is the longest query accepted, in bytes.
	MaxQueryBytes = 4096
	// MaxQueryTerms is the most words and phrases a query may hold.
	MaxQueryTerms = 64
)

// Term is a word or phrase of a query. A backend matches every term of a
// query (AND).
type Term struct {
	// Text is the word or the phrase's text, without its quotes or
	// trailing *: never empty, it holds at least one letter or digit and
	// no double quote. The backend's tokenizer splits it into words; a
	// Text of several words is matched as a phrase.
	Text string
	// Phrase reports that the term was double-quoted.
	Phrase bool
	// Prefix reports a trailing *: the last word of Text is a prefix.
	Prefix bool
}

// QueryError is the error for a query that Search refuses (an empty one, a
// too long one). It wraps ErrInvalid.
type QueryError struct {
	Query  string // the query as given
	Reason string // why it was refused
}

func (e *QueryError) Error() string {
	q := e.Query
	if len(q) > 64 {
		q = strings.ToValidUTF8(q[:64], "") + "…"
	}
	return fmt.Sprintf("search: invalid query %q: %s", q, e.Reason)
}

// Unwrap returns ErrInvalid.
func (e *QueryError) Unwrap() error { return ErrInvalid }

// ParseQuery reads a user's query (see the package documentation for the
// syntax) into its terms. It fails only with a *QueryError: for a query
// that is empty or white space, longer than MaxQueryBytes, or of more than
// MaxQueryTerms terms. It returns no terms, and no error, for a query
// whose words are all ignored (punctuation, a lone *).
func ParseQuery(query string) ([]Term, error) {
	if len(query) > MaxQueryBytes {
		return nil, &QueryError{Query: query, Reason: fmt.Sprintf("it is %d bytes long, at most %d", len(query), MaxQueryBytes)}
	}
	s := strings.Map(clean, query)
	if strings.TrimSpace(s) == "" {
		return nil, &QueryError{Query: query, Reason: "it is empty: type a word to search for"}
	}
	var terms []Term
	for {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
		if s == "" {
			return terms, nil
		}
		var t Term
		if s[0] == '"' {
			// A phrase, to the closing quote or, left open, to the end.
			var text string
			text, s, _ = strings.Cut(s[1:], `"`)
			t = Term{Text: strings.TrimSpace(text), Phrase: true}
			if rest := strings.TrimLeft(s, "*"); len(rest) < len(s) {
				t.Prefix, s = true, rest
			}
		} else {
			end := strings.IndexFunc(s, func(r rune) bool { return r == '"' || unicode.IsSpace(r) })
			if end < 0 {
				end = len(s)
			}
			word := s[:end]
			s = s[end:]
			text := strings.TrimRight(word, "*")
			t = Term{Text: text, Prefix: len(text) < len(word)}
		}
		if !searchable(t.Text) {
			continue
		}
		if len(terms) == MaxQueryTerms {
			return nil, &QueryError{Query: query, Reason: fmt.Sprintf("it has more than %d words and phrases", MaxQueryTerms)}
		}
		terms = append(terms, t)
	}
}

// clean maps invalid UTF-8 (which ranging over a string reads as
// utf8.RuneError) and control characters to spaces.
func clean(r rune) rune {
	if r == utf8.RuneError || unicode.IsControl(r) {
		return ' '
	}
	return r
}

// searchable reports whether text holds a character that an index's
// tokenizer keeps in a word: a letter, a digit or a private-use character
// (the token characters of SQLite's unicode61 tokenizer). A term without
// one tokenizes to nothing, and would make the whole AND match nothing.
func searchable(text string) bool {
	return strings.IndexFunc(text, func(r rune) bool {
		return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Co, r)
	}) >= 0
}
