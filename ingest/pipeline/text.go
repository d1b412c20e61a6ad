package pipeline

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/weirhq/weir/ingest/extract"
	"github.com/weirhq/weir/ingest/parse"
)

// Every text the service writes to SQL is valid UTF-8 without a NUL:
// PostgreSQL refuses anything else (SQLSTATE 22021, for the whole
// transaction), SQLite takes it. So that one bad message is poison on its
// own, refused at once with the same outcome on both stores, the texts of
// each parsed document are checked before they are written: a document
// whose title, text or metadata holds such bytes is recorded with those
// bytes replaced by U+FFFD, and its extract job fails it at once with the
// reason, the original text going to failed/. Paths are checked by the
// scan (a file whose name is not UTF-8 is poison), and the extraction's
// texts are made valid (they are derived, not the input).

// badText says why s cannot be written to SQL as text ("contains a NUL
// byte at offset 12", "is not valid UTF-8 at offset 3"), or "".
func badText(s string) string {
	for i := 0; i < len(s); {
		c := s[i]
		if c == 0 {
			return fmt.Sprintf("contains a NUL byte at offset %d", i)
		}
		if c < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return fmt.Sprintf("is not valid UTF-8 at offset %d", i)
		}
		i += n
	}
	return ""
}

// cleanText is s with invalid UTF-8 and NUL bytes replaced by U+FFFD.
func cleanText(s string) string {
	if badText(s) == "" {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

// checkedDoc is a parsed document's texts as SQL takes them, and why the
// document is poison ("" when it is not).
type checkedDoc struct {
	title, text, meta string
	poison            string
}

// checkDoc checks the texts of d, the document at key of the file at
// path, and makes them fit for SQL.
func checkDoc(path string, d parse.Doc) (checkedDoc, error) {
	var c checkedDoc
	what := "the file"
	if d.Key != "" {
		what = "the message " + d.Key
	}
	mark := func(field, why string) {
		if why != "" && c.poison == "" {
			c.poison = fmt.Sprintf("%s%s: %s: its %s %s", path, d.Key, what, field, why)
		}
	}
	mark("title", badText(d.Title))
	mark("text", badText(d.Text))
	meta := make(map[string]string, len(d.Meta))
	for _, k := range slices.Sorted(maps.Keys(d.Meta)) {
		v := d.Meta[k]
		why := badText(k)
		if why == "" {
			why = badText(v)
		}
		mark(fmt.Sprintf("metadata %q", cleanText(k)), why)
		meta[cleanText(k)] = cleanText(v)
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return c, err
	}
	c.title, c.text, c.meta = cleanText(d.Title), cleanText(d.Text), string(b)
	return c, nil
}

// cleanResult is r with every text made fit for SQL and JSON.
func cleanResult(r extract.Result) extract.Result {
	r.Title, r.Language, r.Summary, r.Extractor = cleanText(r.Title), cleanText(r.Language), cleanText(r.Summary), cleanText(r.Extractor)
	if r.KeyTerms != nil {
		terms := make([]string, len(r.KeyTerms))
		for i, t := range r.KeyTerms {
			terms[i] = cleanText(t)
		}
		r.KeyTerms = terms
	}
	return r
}
