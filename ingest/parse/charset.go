package parse

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/htmlindex"
)

// asciiLabels are the names of US-ASCII. A body labelled so, or not
// labelled, is read as undeclared text (as a text file is), since 8-bit
// bytes in such mail are common.
var asciiLabels = map[string]bool{
	"us-ascii": true, "ascii": true, "ansi_x3.4-1968": true, "iso646-us": true,
	"us": true, "cp367": true, "ibm367": true, "csascii": true, "iso-ir-6": true,
}

// decodeCharset converts b from the charset labelled label to valid UTF-8
// with LF line ends. The labels are the WHATWG Encoding Standard's (through
// golang.org/x/text's htmlindex), which reads ISO 8859-1 as its superset
// Windows-1252, as mail readers do. A body without a label or labelled
// US-ASCII is read as a text file is (UTF-8, or Windows-1252 when it is
// not), silently; a body that does not match its label, or whose label is
// unknown, is read the same way and problem says so. NUL bytes are kept,
// for the caller to judge.
func decodeCharset(label string, b []byte) (text, problem string) {
	l := strings.ToLower(strings.Trim(strings.TrimSpace(label), `"`))
	if l == "" || asciiLabels[l] {
		return sniffText(b), ""
	}
	if l == "utf-8" || l == "utf8" || l == "unicode-1-1-utf-8" {
		switch {
		case utf8.Valid(b):
			return lfBytes(b), ""
		case looksUTF8(b):
			return sniffText(b), "body is not valid utf-8: invalid bytes read as U+FFFD"
		}
		return sniffText(b), "body is not utf-8: read as windows-1252"
	}
	enc, err := htmlindex.Get(l)
	if err != nil || enc == encoding.Replacement {
		return sniffText(b), fmt.Sprintf("unsupported charset %q: read as utf-8 or windows-1252", label)
	}
	if cm, ok := enc.(*charmap.Charmap); ok {
		return lf(singleByte(cm, b)), ""
	}
	out, err := enc.NewDecoder().Bytes(b)
	if err != nil {
		return sniffText(b), fmt.Sprintf("charset %q: %v: read as utf-8 or windows-1252", label, err)
	}
	return lfBytes(out), ""
}

// charsetReader is mime.WordDecoder's CharsetReader, for the charsets it
// does not know itself. An unknown charset is an error, and the header is
// then kept as it was written.
func charsetReader(charset string, input io.Reader) (io.Reader, error) {
	b, err := io.ReadAll(input)
	if err != nil {
		return nil, err
	}
	s, problem := decodeCharset(charset, b)
	if problem != "" {
		return nil, errors.New(problem)
	}
	return strings.NewReader(s), nil
}

// htmlBreaks are the elements whose start or end breaks a line of text.
var htmlBreaks = map[atom.Atom]bool{
	atom.Br: true, atom.P: true, atom.Div: true, atom.Li: true, atom.Tr: true,
	atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true, atom.H5: true, atom.H6: true,
	atom.Blockquote: true, atom.Table: true, atom.Ul: true, atom.Ol: true, atom.Pre: true,
	atom.Hr: true, atom.Dt: true, atom.Dd: true, atom.Section: true, atom.Article: true,
	atom.Header: true, atom.Footer: true, atom.Title: true,
}

// htmlText is the text of an HTML document or fragment, read with
// golang.org/x/net/html's tokenizer: tags removed (script and style with
// their content, comments too), block ends made line breaks, character
// references decoded, each line trimmed and runs of blank lines made one.
func htmlText(s string) string {
	z := html.NewTokenizer(strings.NewReader(s))
	var b strings.Builder
	b.Grow(len(s))
	skip := 0 // inside script or style
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return tidyLines(b.String())
		case html.TextToken:
			if skip == 0 {
				b.Write(z.Text())
			}
		case html.StartTagToken, html.EndTagToken, html.SelfClosingTagToken:
			name, _ := z.TagName()
			a := atom.Lookup(name)
			switch {
			case (a == atom.Script || a == atom.Style) && tt == html.StartTagToken:
				skip++
			case (a == atom.Script || a == atom.Style) && tt == html.EndTagToken:
				skip = max(skip-1, 0)
			case htmlBreaks[a]:
				b.WriteByte('\n')
			}
		}
	}
}

// tidyLines trims each line of s and makes each run of blank lines one,
// with none at the start or end.
func tidyLines(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	blank := false
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		if line == "" {
			blank = b.Len() > 0
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
			if blank {
				b.WriteByte('\n')
			}
		}
		blank = false
		b.WriteString(line)
	}
	return b.String()
}
